package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JetStream's answer to a server removal when there is nothing to do.
const errCodeNotMember = 10044 // server is not a member of the cluster

// ErrNotClustered is ForgetHost's answer while the bus's own server is no
// cluster member (it runs alone, or the bus uses an external NATS).
var ErrNotClustered = errors.New("events: this daemon's NATS server is not in a cluster now")

// ForgetHost asks the cluster's JetStream to drop host's server from its
// meta group, for a host gone for good: the stream's copies on it move to
// the servers left, and the servers that are gone no longer count against
// the quorum, which a cluster whose hosts are replaced one by one would
// otherwise lose (decision 258). The meta leader answers, whichever server
// the request enters by. nil also when the server is no member (already
// forgotten, or never joined).
func (b *Bus) ForgetHost(ctx context.Context, host string) error {
	if b.emb == nil {
		return ErrNotClustered
	}
	if clustered, _ := b.emb.clustered(); !clustered {
		return ErrNotClustered
	}
	nc, err := nats.Connect("", nats.InProcessServer(b.emb), asSystem(), nats.Name("ingestq-forget@"+b.cfg.Host))
	if err != nil {
		return fmt.Errorf("events: forget %s: connect to the system account: %w", host, err)
	}
	defer nc.Close()
	req, err := json.Marshal(map[string]string{"peer": serverName(host)})
	if err != nil {
		return err
	}
	m, err := nc.RequestWithContext(ctx, "$JS.API.SERVER.REMOVE", req)
	if err != nil {
		return fmt.Errorf("events: forget %s: no answer from the JetStream meta leader: %w", host, err)
	}
	var resp struct {
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return fmt.Errorf("events: forget %s: %w", host, err)
	}
	if resp.Error != nil && resp.Error.ErrorCode != errCodeNotMember {
		return fmt.Errorf("events: forget %s: %w", host, resp.Error)
	}
	return nil
}
