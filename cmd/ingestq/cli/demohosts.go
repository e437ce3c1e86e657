package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lmittmann/tint"
	"github.com/nats-io/nats.go"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// demoHosts are the daemons of a demo, run in this process as the hosts of
// one cluster: the first embeds NATS and the others join it, and they
// share one OCFL root and one inventory (a bbolt file serves one process,
// so the demo serves it to them over HTTP, as an inventory service would).
type demoHosts struct {
	names     []string
	natsURL   string
	storage   string // the OCFL root
	inventory string // the bbolt file
	since     time.Time

	stops  []func() int // each daemon's, in start order
	inv    *inventory.Local
	srv    *http.Server
	srvLog *os.File // the inventory server's log, beside the daemons'
	once   sync.Once
}

func (a *app) startDemoHosts(ctx context.Context, dir, zkAddr string, n int) (*demoHosts, error) {
	h := &demoHosts{since: time.Now()}
	invURL := ""
	if n == 1 {
		data := filepath.Join(dir, "data")
		h.storage, h.inventory = handlers.DefaultStorage(data), filepath.Join(data, "inventory.db")
	} else {
		var err error
		h.storage, h.inventory = filepath.Join(dir, "ocfl"), filepath.Join(dir, "inventory.db")
		if invURL, err = h.serveInventory(dir); err != nil {
			return nil, err
		}
		a.step("Inventory: %s, served to the hosts at %s, log in %s", h.inventory, invURL, h.srvLog.Name())
	}
	for i := range n {
		if err := a.startDemoHost(ctx, h, dir, zkAddr, invURL, i, n); err != nil {
			h.stop()
			return nil, err
		}
	}
	return h, nil
}

// startDemoHost starts the i-th of n daemons and waits until it is ready.
// Its ports are picked free just before it starts (freeAddr), and another
// process may take one before the daemon binds it: the daemon then exits,
// its log saying the address is in use, and it is started once more, on
// ports picked anew.
func (a *app) startDemoHost(ctx context.Context, h *demoHosts, dir, zkAddr, invURL string, i, n int) error {
	err := a.launchDemoHost(ctx, h, dir, zkAddr, invURL, i, n)
	var taken portTaken
	if errors.As(err, &taken) {
		h.stops[len(h.stops)-1]() // it exited: its end is waited for
		h.stops = h.stops[:len(h.stops)-1]
		a.println("  %s was taken by another process before the daemon bound it: starting the daemon again on other ports", string(taken))
		err = a.launchDemoHost(ctx, h, dir, zkAddr, invURL, i, n)
	}
	return err
}

// portTaken is a daemon that exited at start because one of the addresses
// given to it (freeAddr's) was in use by then.
type portTaken string

func (p portTaken) Error() string { return string(p) + ": " + syscall.EADDRINUSE.Error() }

// launchDemoHost starts the i-th of n daemons, on ports free now, and waits
// until it is ready; a portTaken error when it exited saying one was in use.
func (a *app) launchDemoHost(ctx context.Context, h *demoHosts, dir, zkAddr, invURL string, i, n int) error {
	httpAddr, err := freeAddr() // not 8080: a daemon may already run here
	if err != nil {
		return err
	}
	natsAddr := strings.TrimPrefix(h.natsURL, "nats://")
	if i == 0 {
		if natsAddr, err = freeAddr(); err != nil {
			return err
		}
		h.natsURL = "nats://" + natsAddr
	}
	name, data, logName := "", filepath.Join(dir, "data"), "daemon.log"
	// The demo's content is served on this host. Its objects are kilobytes:
	// only --space-margin holds a job back (--max-fill 1), so that the demo
	// runs on a laptop's disk past the default 80 % too (checked: demoRoom).
	args := []string{"--zk", zkAddr, "serve", "--http", httpAddr, "--provision-wait", "2s", "--backoff", "200ms", "--fetch-allow", "127.0.0.0/8",
		"--max-fill", "1"}
	if n > 1 {
		name = fmt.Sprintf("host%d", i+1)
		data, logName = filepath.Join(dir, name), name+".log"
		args = append(args, "--host", name, "--storage", h.storage, "--inventory", invURL)
		args = append(args, demoRoles(i)...)
	}
	nats, states := "embedded NATS on "+natsAddr, ""
	if n > 1 {
		states = ", --states " + demoRoles(i)[1]
	}
	if i == 0 {
		args = append(args, "--nats-listen", natsAddr)
	} else {
		args = append(args, "--nats", h.natsURL)
		nats = "joins NATS at " + h.natsURL
	}
	args = append(args, "--data-dir", data)
	logFile, err := os.Create(filepath.Join(dir, logName))
	if err != nil {
		return err
	}
	a.step("Daemon %s: ingestq serve%s, %s, HTTP on %s, data in %s, log in %s", cmp.Or(name, "(this host)"), states, nats, httpAddr, data, logFile.Name())
	dctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	// exited closes when the daemon returns, code then its exit code: both
	// the wait for it to be ready and each stop read them, however many.
	exited, code := make(chan struct{}), 0
	go func() {
		code = Run(dctx, args, logFile, logFile, a.getenv)
		logFile.Close()
		close(exited)
	}()
	stop := func() int {
		cancel()
		<-exited
		return code
	}
	h.stops = append(h.stops, stop)
	if err := waitDaemon(ctx, zkAddr, h.natsURL, httpAddr, exited, func() int { return code }); err != nil {
		// Its log is said here: the demo removes its folder on the way out.
		said, _ := os.ReadFile(logFile.Name())
		bound := []string{httpAddr}
		if i == 0 {
			bound = append(bound, natsAddr)
		}
		if addr := addrInUse(string(said), bound...); addr != "" {
			return portTaken(addr)
		}
		return &exitError{code: 1, err: fmt.Errorf("the daemon did not start (%v); its log, %s, ends:\n%s",
			err, logFile.Name(), lastLines(string(said), 10))}
	}
	h.names = append(h.names, cmp.Or(name, "this host"))
	return nil
}

// addrInUse is the address among addrs that a daemon's log says was in
// use ("" if none): the daemon names the address it could not listen on
// before the system's words.
func addrInUse(log string, addrs ...string) string {
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, syscall.EADDRINUSE.Error()) {
			continue
		}
		for _, addr := range addrs {
			if strings.Contains(line, addr) {
				return addr
			}
		}
	}
	return ""
}

// demoRoles are the --states (and workers) of the i-th host of a demo of
// several. They split the work so that the table of who ran what shows a
// job passing from host to host: the first host takes in batches, starts
// their jobs and reports; the others download, and run each job's later
// steps where its files are, one download at a time each, which spreads
// the jobs over them.
func demoRoles(i int) []string {
	if i == 0 {
		return []string{"--states", "intake,pending,estimating,provisioning,reporting"}
	}
	return []string{"--states", "downloading,processing,storing,recording,notify", "--state-workers", "downloading=1"}
}

// serveInventory opens the inventory file and serves it on a free port. It
// logs into dir/inventory.log, as the daemons log into their files: its
// lines would break up the deposit's progress.
func (h *demoHosts) serveInventory(dir string) (string, error) {
	inv, err := inventory.OpenLocal(h.inventory)
	if err != nil {
		return "", err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		inv.Close()
		return "", err
	}
	logFile, err := os.Create(filepath.Join(dir, "inventory.log"))
	if err != nil {
		inv.Close()
		ln.Close()
		return "", err
	}
	h.inv, h.srvLog = inv, logFile
	log := slog.New(tint.NewTextHandler(logFile, &tint.Options{TimeFormat: LogTimeFormat, NoColor: true}))
	h.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: inventory.NewServer(inv, log)}
	go func() { _ = h.srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), nil
}

// stop stops the daemons, the one carrying NATS last, then the inventory
// server, so that the inventory file can be read. Safe to call twice.
func (h *demoHosts) stop() {
	h.once.Do(func() {
		for i := len(h.stops) - 1; i >= 0; i-- {
			_ = h.stops[i]()
		}
		if h.srv != nil {
			_ = h.srv.Close()
			_ = h.inv.Close()
			_ = h.srvLog.Close()
		}
	})
}

// printWhoRanWhat replays the demo's job events and shows, for each job,
// the host that ran each of its steps (the one that moved it on).
func (a *app) printWhoRanWhat(ctx context.Context, natsURL string, since time.Time) error {
	nc, err := nats.Connect(natsURL, nats.Timeout(5*time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	ran := map[string]map[queue.State]string{}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = events.Replay(ctx, nc, "", events.Filter{Since: since}, func(e events.Event) error {
		if e.Kind == events.KindJob && e.From != "" {
			if ran[e.JobID] == nil {
				ran[e.JobID] = map[queue.State]string{}
			}
			ran[e.JobID][queue.State(e.From)] = e.Host
		}
		return nil
	})
	if err != nil {
		return err
	}
	states := reactor.JobStates[1:] // Pending is a hand-off, not a step
	a.step("Who ran what: the host that ran each step of each job")
	a.println("  host1 started each job; the host that downloaded its files ran its later steps")
	header := []string{"  JOB"}
	for _, s := range states {
		header = append(header, string(s))
	}
	t := a.newTable(header...)
	jids := make([]string, 0, len(ran))
	for jid := range ran {
		jids = append(jids, jid)
	}
	slices.Sort(jids)
	for _, jid := range jids {
		row := []string{"  " + jid}
		for _, s := range states {
			row = append(row, cmp.Or(ran[jid][s], "-"))
		}
		t.row(row...)
	}
	return t.flush()
}

// lastLines is the last n lines of text, without its final newline.
func lastLines(text string, n int) string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}
