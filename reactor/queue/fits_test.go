package queue

import (
	"errors"
	"io"
	"log"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/internal/zkconn"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// A request fits lets through is one the real server takes, at the very
// boundary of its reckoning: a multi() of one create, the smallest multi
// and the one whose own framing (header, op header, closing header: 26
// bytes) is least covered by the per-op margin. Its node is then read
// back whole by a reader capped at the packet, as Merritt's Java clients
// are (jute.maxbuffer).
func TestARequestThatFitsIsTaken(t *testing.T) {
	t.Parallel()
	srv := zktest.Shared(t)
	conn := zktest.Connect(t, srv.Addr)
	root := zktest.Root(t)
	d := door{conn: conn, timeout: 10 * time.Second, sent: &Requests{}, log: slog.New(slog.DiscardHandler)}
	// A Java client takes a reply under jute.maxbuffer (ClientCnxnSocket).
	capped, _, err := zk.Connect([]string{srv.Addr}, zktest.SessionTimeout, zk.WithMaxBufferSize(zkconn.MaxPacket-1),
		zk.WithLogger(log.New(io.Discard, "", 0)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(capped.Close)
	ctx := t.Context()
	if _, err := d.create(ctx, root, nil, 0); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		send func(p string, data []byte) error
	}{
		{"multi", func(p string, data []byte) error {
			_, err := d.multi(ctx, &zk.CreateRequest{Path: p, Data: data, Acl: acl})
			return err
		}},
		{"create", func(p string, data []byte) error { _, err := d.create(ctx, p, data, 0); return err }},
	} {
		p := root + "/" + tt.name
		// The most data fits takes, found by asking it: a byte more is refused.
		n := zkconn.MaxPacket
		for fits(&zk.CreateRequest{Path: p, Data: make([]byte, n)}) != nil {
			n--
		}
		data := []byte(strings.Repeat("x", n))
		if err := tt.send(p, data); err != nil {
			t.Fatalf("%s of %d bytes, which fits takes: %v", tt.name, n, err)
		}
		if err := tt.send(p+"-more", append(data, 'x')); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("%s of a byte more: %v, want ErrTooLarge", tt.name, err)
		}
		got, _, err := capped.Get(p)
		if err != nil || len(got) != n {
			t.Fatalf("%s's node read back by a reader capped at the packet: %d bytes, %v; want %d", tt.name, len(got), err, n)
		}
	}

	// A foreign writer's node at the most the server takes (a create's 47
	// bytes over path and data) is read whole: its reply, 88 bytes over
	// the data, is over the packet, and go-zookeeper reads it uncapped.
	p := root + "/foreign"
	big := make([]byte, zkconn.MaxPacket-47-len(p))
	if _, err := conn.Create(p, big, 0, acl); err != nil {
		t.Fatalf("a foreign create of %d bytes: %v", len(big), err)
	}
	if _, err := conn.Create(p+"-more", append(big, 'x'), 0, acl); err == nil {
		t.Fatal("the server took a create a byte over its limit: the reckoning above is wrong")
	}
	conn = zktest.Connect(t, srv.Addr) // the connection the refusal closed
	d.conn = conn
	got, _, err := d.get(ctx, p)
	if err != nil || len(got) != len(big) {
		t.Fatalf("a foreign node of %d bytes read: %d bytes, %v", len(big), len(got), err)
	}
}
