package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/handlers/storage/ocfl"
	"github.com/ingestq/ingestq/handlers/storage/place"
	"github.com/ingestq/ingestq/internal/backoff"
	"github.com/ingestq/ingestq/internal/freeport"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

type demoFlags struct {
	content string
	dir     string
	keep    bool
	hosts   int
}

func (a *app) demoCommand() *cobra.Command {
	var f demoFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Everything on one machine: ZooKeeper, the daemon, a sample deposit",
		Long: "demo starts a ZooKeeper server (Debian's jars; `make deps` installs them), the daemon with\n" +
			"its embedded NATS and the built-in demo profile, and a web server of the sample content in\n" +
			"--content. It submits the sample batch manifest (four objects, one with a wrong digest on\n" +
			"purpose), follows it live, prints the report, the stored objects and the inventory rows,\n" +
			"and stops everything. The daemon's log goes to daemon.log in the demo folder.\n\n" +
			"The demo folder is a new temporary one, removed at the end unless --keep. A folder given\n" +
			"with --dir must be empty or absent; at the end the demo removes from it only what it made\n" +
			"there (and the folder, if it made that too), unless --keep. A reader of its output that goes\n" +
			"(ingestq demo | head) stops it, with the same clean-up; it then exits 141, as a cut pipe's.",
		Args: args(),
		RunE: func(cmd *cobra.Command, _ []string) error { return a.demo(cmd.Context(), f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.content, "content", "testdata/demo", "folder of the sample content: batch.checkm, objects/, files/")
	fl.StringVar(&f.dir, "dir", "", "folder for ZooKeeper, the daemon's data and logs: empty or absent (default: a temporary one)")
	fl.BoolVar(&f.keep, "keep", false, "keep what the demo made afterwards (default: removed)")
	fl.IntVar(&f.hosts, "hosts", 1, "daemons to run, as the hosts of one cluster: one OCFL root and one inventory for all, each its own\n"+
		"working folders; the first takes in batches and starts jobs, the others download and run the later steps\n"+
		"(--states); the demo then shows which host ran which step of each job")
	return cmd
}

// demo runs the demo; a stdout cut on the way (its reader gone) stops it,
// and what it made is removed as at its end.
func (a *app) demo(ctx context.Context, f demoFlags) error {
	ctx, release := a.stopWhenOutputCut(ctx)
	defer release()
	err := a.runDemo(ctx, f)
	if cut := outputCut(ctx); cut != nil {
		return cut
	}
	return err
}

func (a *app) runDemo(ctx context.Context, f demoFlags) error {
	if _, err := os.Stat(filepath.Join(f.content, "batch.checkm")); err != nil {
		return usagef("--content %s: no batch.checkm there (run the demo from the repository's root, or give --content)", f.content)
	}
	dir, cleanup, err := demoDir(f.dir)
	if err != nil {
		return err
	}
	if !f.keep {
		defer cleanup()
	}
	if err := demoRoom(dir); err != nil {
		return &exitError{code: 1, err: err}
	}
	a.step("ZooKeeper: starting a local server in %s", dir)
	zk, err := zktest.StartServer(filepath.Join(dir, demoZooKeeper))
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	defer zk.Stop()
	a.println("  listening on %s", zk.Addr)

	web, err := serveContent(f.content)
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	defer web.Close()
	a.step("Content: serving %s at %s", f.content, web.url)

	hosts, err := a.startDemoHosts(ctx, dir, zk.Addr, max(f.hosts, 1))
	if err != nil {
		return err
	}
	defer hosts.stop() // a second stop is a no-op
	if f.keep {
		defer a.printKept(dir, hosts)
	}
	natsURL := hosts.natsURL

	a.step("Submit: %s/batch.checkm for profile demo, following it live", web.url)
	code := Run(ctx, []string{"--zk", zk.Addr, "--nats", natsURL, "submit", "--profile", "demo", "--submitter", "demo",
		"--wait", web.url + "/batch.checkm"}, a.stdout, a.stderr, a.getenv)
	if cut := outputCut(ctx); cut != nil {
		return cut // no one reads on: the rest goes unshown
	}

	if len(hosts.names) > 1 {
		if err := a.printWhoRanWhat(ctx, natsURL, hosts.since); err != nil {
			a.println("  (steps per host not shown: %v)", err)
		}
	}
	a.step("Daemons: stopping")
	hosts.stop()
	if err := a.printHoldings(ctx, hosts.storage, hosts.inventory); err != nil {
		return &exitError{code: 1, err: err}
	}
	a.step("ZooKeeper: stopping")
	switch code {
	case 0, 1: // Completed, or Failed as the sample's wrong digest makes it
		a.println("\nDone. One object of the sample has a wrong digest on purpose: its job failed with the\n" +
			"mismatch named in the report, and the other objects were stored and recorded.")
		return nil
	default:
		return &exitError{code: code, err: fmt.Errorf("submit --wait exited %d", code), silent: true}
	}
}

// demoRoom refuses a demo folder whose file system has less free than the
// daemon keeps free (--space-margin) plus what the demo writes (measured:
// under 1 MiB; 16 MiB allowed): its jobs would wait in Provisioning, and
// the demo would follow them without end.
func demoRoom(dir string) error {
	const writes = 16 << 20
	free, _, err := diskSpace(dir)
	if err != nil {
		return fmt.Errorf("the demo folder %s: %w", dir, err)
	}
	if need := uint64(handlers.Defaults.Margin + writes); free < need {
		return fmt.Errorf("the demo folder %s is on a file system with %d MiB free; the demo needs %d MiB (the daemon keeps "+
			"--space-margin, %d MiB, free, and a job waits for room below it): free some space, or give --dir on another file system",
			dir, free>>20, need>>20, handlers.Defaults.Margin>>20)
	}
	return nil
}

// demoZooKeeper is the folder of the demo's ZooKeeper in the demo folder.
const demoZooKeeper = "zookeeper"

// demoDir makes the demo's folder: given (dir), it must be empty or
// absent, since the demo removes what it made there; else a new temporary
// one. cleanup removes what the demo made: a temporary folder whole; in a
// given one, only the entries the demo makes (demoMade), and the folder
// itself when the demo made it and it is empty then. A given folder is
// never removed wholesale (decision 242).
func demoDir(dir string) (string, func(), error) {
	if dir == "" {
		tmp, err := os.MkdirTemp("", "ingestq-demo-")
		if err != nil {
			return "", nil, &exitError{code: 1, err: err}
		}
		return tmp, func() { _ = os.RemoveAll(tmp) }, nil
	}
	entries, err := os.ReadDir(dir)
	made := errors.Is(err, fs.ErrNotExist)
	switch {
	case made:
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return "", nil, &exitError{code: 1, err: fmt.Errorf("--dir: %w", err)}
		}
	case err != nil:
		return "", nil, usagef("--dir %s: %v", dir, err)
	case len(entries) > 0:
		held := entries[0].Name()
		if len(entries) > 1 {
			held += fmt.Sprintf(" and %d more", len(entries)-1)
		}
		return "", nil, usagef("--dir %s is not empty (it holds %s): the demo needs an empty or new folder; give another, "+
			"or leave --dir out for a temporary one", dir, held)
	}
	return dir, func() {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if demoMade(e.Name()) {
				_ = os.RemoveAll(filepath.Join(dir, e.Name()))
			}
		}
		if made {
			_ = os.Remove(dir) // only when empty: anything else there is someone else's
		}
	}, nil
}

// demoMade tells whether name is an entry the demo makes in its folder:
// its ZooKeeper's, the daemon's data and log, or with --hosts the OCFL
// root, the inventory and its server's log, and each host's data and log.
func demoMade(name string) bool {
	switch name {
	case demoZooKeeper, "data", "daemon.log", "ocfl", "inventory.db", "inventory.log":
		return true
	}
	n, ok := strings.CutPrefix(name, "host")
	n = strings.TrimSuffix(n, ".log")
	if !ok || n == "" {
		return false
	}
	for _, c := range n {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func (a *app) step(format string, args ...any) { a.println("\n== "+format, args...) }

// printKept says, with --keep, where the demo's files stay and how to look
// at them: the demo ends without a word of them otherwise.
func (a *app) printKept(dir string, hosts *demoHosts) {
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for i, l := range logs {
		logs[i] = filepath.Base(l)
	}
	a.step("Kept (--keep): what the demo made is in %s", dir)
	a.println("  logs: %s", strings.Join(logs, ", "))
	a.println("  storage: %s, an OCFL root (ls -R %s: each object, its versions and files)", hosts.storage, hosts.storage)
	a.println("  inventory: %s (ingestq object --inventory %s ARK, for an ARK listed above)", hosts.inventory, hosts.inventory)
	a.println("  ZooKeeper's data: %s", filepath.Join(dir, demoZooKeeper))
	a.println("  remove it all with: rm -r %s", dir)
}

// printHoldings lists what the OCFL root dir and the bbolt inventory
// file db hold.
func (a *app) printHoldings(ctx context.Context, dir, db string) error {
	pl, err := place.NewLocal(dir)
	if err != nil {
		return err
	}
	store, err := ocfl.New(ctx, pl)
	if err != nil {
		return err
	}
	arks, _, err := store.Objects(ctx, "")
	if err != nil {
		return err
	}
	a.step("Storage: %d OCFL 1.1 objects in the storage root %s", len(arks), dir)
	for _, ark := range arks {
		v, err := store.Latest(ctx, ark)
		if err != nil {
			return err
		}
		a.println("  %s  version %d, %d files; %s", ark, v.Number, len(v.Files), v.URL)
		for _, f := range v.Files {
			a.println("    %-36s %9d  sha256 %s…", f.Name, f.Size, f.SHA256[:16])
		}
	}
	inv, err := inventory.OpenLocal(db)
	if err != nil {
		return err
	}
	defer inv.Close()
	var rows []inventory.ObjectRow
	for row, err := range inventory.Objects(ctx, inv, inventory.MaxPage) {
		if err != nil {
			return err
		}
		rows = append(rows, row)
	}
	a.step("Inventory: %d objects in %s", len(rows), db)
	a.println("  %-24s %-8s %-14s %-7s %s", "ARK", "PROFILE", "LOCAL ID", "VERSION", "TITLE")
	for _, r := range rows {
		a.println("  %-24s %-8s %-14s %-7d %s", r.ARK, r.Profile, strings.Join(r.LocalIDs, ";"), r.LatestVersion, r.What)
	}
	return nil
}

// waitDaemon waits until the daemon has published its profiles, its
// NATS answers and its own HTTP server (httpAddr) says it is alive, or it
// exited (exited closed, exitCode its code). The profiles and the NATS
// of a second host are the first host's, there long before: its /healthz
// is what tells that it started, or exited (a port taken meanwhile).
func waitDaemon(ctx context.Context, zkAddr, natsURL, httpAddr string, exited <-chan struct{}, exitCode func() int) error {
	s, err := zkwatch.Dial(ctx, zkwatch.Config{Servers: []string{zkAddr}})
	if err != nil {
		return err
	}
	defer s.Close()
	q, err := queue.New(s.Conn, "")
	if err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for try := 1; ; try++ {
		_, known, _ := profile.Known(ctx, q, "demo")
		if known {
			if nc, err := nats.Connect(natsURL, nats.Timeout(time.Second)); err == nil {
				nc.Close()
				if alive(ctx, httpAddr) {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after 60 s")
		}
		select {
		case <-exited:
			return fmt.Errorf("it exited %d", exitCode())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff.Delay(50*time.Millisecond, time.Second, try)):
		}
	}
}

// alive tells whether the daemon whose HTTP server is at addr answers its
// /healthz.
func alive(ctx context.Context, addr string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/healthz", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// demoWeb serves the sample content as a plain file server: its manifests
// name their files relative to themselves, so any web server would do.
type demoWeb struct {
	url string
	srv *http.Server
}

func serveContent(dir string) (*demoWeb, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	w := &demoWeb{url: "http://" + ln.Addr().String()}
	w.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.FileServer(http.Dir(dir))}
	go func() { _ = w.srv.Serve(ln) }()
	return w, nil
}

func (w *demoWeb) Close() { _ = w.srv.Close() }

// freeAddr is a loopback address with a port free right now, below the
// kernel's ephemeral range, where no outgoing connection can take it before
// the daemon binds it (a variable: a test gives one taken).
var freeAddr = freeport.Addr
