package natstest

import (
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// A server that cannot listen for routes (its port taken, as by another
// process between a test's stop and restart of it) makes Run fail at
// once, naming the port and the listener's error. Before, Run waited 30 s
// and said only "not ready".
func TestRunSaysWhyAServerIsNotReady(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", FreeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port
	opts := &server.Options{ServerName: "blocked", Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true, NoLog: true,
		Cluster: server.ClusterOpts{Name: "t", Host: "127.0.0.1", Port: port}}
	rec := &fatalRecorder{TB: t}
	start := time.Now()
	done := make(chan struct{})
	go func() { defer close(done); Run(rec, opts) }()
	<-done
	took := time.Since(start)
	t.Logf("Run failed after %v: %s", took, rec.fatal)
	want := fmt.Sprintf("router port: %d", port)
	if !strings.Contains(rec.fatal, want) || !strings.Contains(rec.fatal, "address already in use") {
		t.Errorf("Run said %q, want the route listener's error (%q, address already in use)", rec.fatal, want)
	}
	if took > readyTimeout/2 {
		t.Errorf("Run took %v to fail", took)
	}
}

// fatalRecorder is a test that keeps what Fatalf says and ends the
// goroutine, as a test's Fatalf does.
type fatalRecorder struct {
	testing.TB
	fatal string
}

func (r *fatalRecorder) Fatalf(format string, v ...any) {
	r.fatal = fmt.Sprintf(format, v...)
	runtime.Goexit()
}
