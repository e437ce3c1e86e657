package zkconn_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/internal/zkconn"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// A serving ZooKeeper says so, with its last zxid; a port nothing listens
// on gives the dial's refusal, not an answer. (A member without a quorum,
// which does not serve, is zkwatch's TestQuorumLossKeepsTheSession.)
func TestServing(t *testing.T) {
	srv := zktest.OwnServer(t)
	serving, zxid, err := zkconn.Serving(t.Context(), srv.Addr, 5*time.Second)
	if err != nil || !serving || !strings.HasPrefix(zxid, "0x") {
		t.Errorf("a standalone ZooKeeper: serving %v, zxid %q, %v; want serving with a zxid", serving, zxid, err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	serving, _, err = zkconn.Serving(t.Context(), srv.Addr, 5*time.Second)
	if serving || err == nil || errors.Is(err, zkconn.ErrSrvrNotAllowed) {
		t.Errorf("a stopped ZooKeeper: serving %v, %v; want the refusal", serving, err)
	}
}
