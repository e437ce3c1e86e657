package zktest

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/ingestq/ingestq/internal/childproc"
)

// Ensemble is a quorum of ZooKeeper servers on loopback. Servers[i] has
// myid i+1 and lives in <dir>/zk<i+1>.
type Ensemble struct {
	Servers []*Server
}

// StartEnsemble starts n servers forming one ensemble under dir and waits
// until every one of them serves as leader or follower.
func StartEnsemble(dir string, n int) (*Ensemble, error) {
	if n < 1 {
		return nil, fmt.Errorf("zktest: ensemble size %d < 1", n)
	}
	if err := Installed(); err != nil {
		return nil, err
	}
	var err error
	for try := 0; try < startTries; try++ {
		var e *Ensemble
		if e, err = startEnsemble(dir, n); err == nil {
			return e, nil
		}
		if !errors.Is(err, childproc.ErrPortTaken) {
			break
		}
	}
	return nil, err
}

func startEnsemble(dir string, n int) (*Ensemble, error) {
	ports, err := freePorts(3 * n) // client, peer, election per node
	if err != nil {
		return nil, err
	}
	peers := make([]string, n)
	for i := range n {
		peers[i] = fmt.Sprintf("server.%d=127.0.0.1:%d:%d", i+1, ports[3*i+1], ports[3*i+2])
	}
	e := &Ensemble{}
	for i := range n {
		s := newServer(filepath.Join(dir, fmt.Sprintf("zk%d", i+1)), quorumMain, ports[3*i])
		if err := writeConfig(s, ports[3*i], peers, i+1); err != nil {
			return nil, err
		}
		e.Servers = append(e.Servers, s)
	}
	for _, s := range e.Servers {
		if err := s.launch(); err != nil {
			_ = e.kill()
			return nil, err
		}
	}
	deadline := time.Now().Add(readyTimeout)
	if err := e.each(func(s *Server) error { return s.waitReady(deadline) }); err != nil {
		_ = e.kill()
		return nil, err
	}
	return e, nil
}

// Addrs returns the client addresses of all servers, in Servers order.
func (e *Ensemble) Addrs() []string {
	addrs := make([]string, len(e.Servers))
	for i, s := range e.Servers {
		addrs[i] = s.Addr
	}
	return addrs
}

// Stop stops all servers (concurrently, SIGTERM as Server.Stop).
func (e *Ensemble) Stop() error {
	return e.each((*Server).Stop)
}

func (e *Ensemble) kill() error {
	return e.each((*Server).Kill)
}

// each runs f on every server concurrently and joins the errors.
func (e *Ensemble) each(f func(*Server) error) error {
	errs := make([]error, len(e.Servers))
	var wg sync.WaitGroup
	for i, s := range e.Servers {
		wg.Go(func() { errs[i] = f(s) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
