package childproc

import (
	"net/http"
	"os"
	"os/exec"
	"time"
)

// selfReadyTimeout bounds StartSelf's wait for the program to serve.
const selfReadyTimeout = 30 * time.Second

// StartSelf starts this test binary again as the program (one of the
// project's own HTTP servers), env (NAME=value) added to its environment
// for its TestMain to serve by instead of running tests, and waits until a
// GET of readyURL answers (any status), for 30 s at most.
func (p *Proc) StartSelf(env, readyURL string) error {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env)
	if err := p.Start(cmd); err != nil {
		return err
	}
	ready := func() bool {
		resp, err := http.Get(readyURL)
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	}
	return p.WaitReady(ready, time.Now().Add(selfReadyTimeout))
}
