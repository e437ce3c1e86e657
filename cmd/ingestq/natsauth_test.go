//go:build linux

package main_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/internal/natstest"
	"github.com/ingestq/ingestq/internal/tlstest"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// operatorNATS is a nats-server in operator mode (decentralized JWT
// authentication), as a site runs its own NATS: an operator, a system
// account, and one account with JetStream whose users the test makes.
type operatorNATS struct {
	t        *testing.T
	ns       *server.Server
	url      string
	op       nkeys.KeyPair
	account  nkeys.KeyPair
	claims   *jwt.AccountClaims
	resolver *server.MemAccResolver
	sys      string // a user of the system account: its creds file
}

func startOperatorNATS(t *testing.T) *operatorNATS {
	t.Helper()
	o := &operatorNATS{t: t, resolver: &server.MemAccResolver{}}
	sysKP, opClaims, err := o.keys()
	if err != nil {
		t.Fatalf("operator, accounts: %v", err)
	}
	ns := natstest.Run(t, &server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true,
		TrustedOperators: []*jwt.OperatorClaims{opClaims}, AccountResolver: o.resolver, SystemAccount: opClaims.SystemAccount,
	})
	o.ns, o.url = ns, ns.ClientURL()
	o.sys = filepath.Join(t.TempDir(), "sys.creds")
	if _, err := writeCreds(sysKP, o.sys); err != nil {
		t.Fatal(err)
	}
	return o
}

// keys makes the operator, the system account and the JetStream account,
// and gives both accounts to the resolver.
func (o *operatorNATS) keys() (sysKP nkeys.KeyPair, opClaims *jwt.OperatorClaims, err error) {
	if o.op, err = nkeys.CreateOperator(); err != nil {
		return nil, nil, err
	}
	opPub, _ := o.op.PublicKey()
	if sysKP, err = nkeys.CreateAccount(); err != nil {
		return nil, nil, err
	}
	sysPub, _ := sysKP.PublicKey()
	oc := jwt.NewOperatorClaims(opPub)
	oc.SystemAccount = sysPub
	token, err := oc.Encode(o.op)
	if err != nil {
		return nil, nil, err
	}
	if opClaims, err = jwt.DecodeOperatorClaims(token); err != nil {
		return nil, nil, err
	}
	if token, err = jwt.NewAccountClaims(sysPub).Encode(o.op); err != nil {
		return nil, nil, err
	}
	if err := o.resolver.Store(sysPub, token); err != nil {
		return nil, nil, err
	}
	if o.account, err = nkeys.CreateAccount(); err != nil {
		return nil, nil, err
	}
	accPub, _ := o.account.PublicKey()
	o.claims = jwt.NewAccountClaims(accPub)
	o.claims.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	return sysKP, opClaims, o.storeAccount()
}

// storeAccount signs the account's claims and gives them to the server
// (to the resolver for new connections, and to the running account).
func (o *operatorNATS) storeAccount() error {
	token, err := o.claims.Encode(o.op)
	if err != nil {
		return err
	}
	if err := o.resolver.Store(o.claims.Subject, token); err != nil || o.ns == nil {
		return err
	}
	acc, err := o.ns.LookupAccount(o.claims.Subject)
	if err != nil {
		return err
	}
	ac, err := jwt.DecodeAccountClaims(token)
	if err != nil {
		return err
	}
	o.ns.UpdateAccountClaims(acc, ac)
	return nil
}

// user writes the creds file of a new user of the JetStream account at path
// and returns its public key.
func (o *operatorNATS) user(path string) string {
	o.t.Helper()
	pub, err := writeCreds(o.account, path)
	if err != nil {
		o.t.Fatalf("creds file %s: %v", path, err)
	}
	return pub
}

// revoke revokes a user of the account: the server closes its connections
// and refuses it from then on.
func (o *operatorNATS) revoke(user string) {
	o.t.Helper()
	o.claims.RevokeAt(user, time.Now().Add(time.Second)) // a JWT issued up to a second ago is revoked
	if err := o.storeAccount(); err != nil {
		o.t.Fatalf("revoke user %s: %v", user, err)
	}
}

// writeCreds writes, at path, the creds file of a new user of account, as
// `nsc generate creds` does, and returns the user's public key.
func writeCreds(account nkeys.KeyPair, path string) (string, error) {
	u, err := nkeys.CreateUser()
	if err != nil {
		return "", err
	}
	pub, _ := u.PublicKey()
	seed, _ := u.Seed()
	token, err := jwt.NewUserClaims(pub).Encode(account)
	if err != nil {
		return "", err
	}
	file, err := jwt.FormatUserConfig(token, seed)
	if err != nil {
		return "", err
	}
	return pub, os.WriteFile(path, file, 0o600)
}

// refusals counts the server's authentication failures of clients named
// name, from the system account's events.
func (o *operatorNATS) refusals(name string) *atomic.Int64 {
	o.t.Helper()
	nc, err := nats.Connect(o.url, nats.UserCredentials(o.sys))
	if err != nil {
		o.t.Fatalf("connect to %s as the system account: %v", o.url, err)
	}
	o.t.Cleanup(nc.Close)
	var n atomic.Int64
	_, err = nc.Subscribe("$SYS.SERVER.*.CLIENT.AUTH.ERR", func(m *nats.Msg) {
		var ev server.DisconnectEventMsg
		if json.Unmarshal(m.Data, &ev) == nil && ev.Client.Name == name {
			n.Add(1)
		}
	})
	if err == nil {
		err = nc.Flush()
	}
	if err != nil {
		o.t.Fatalf("subscribe to authentication failures: %v", err)
	}
	return &n
}

// A site's own NATS in operator mode: serve --nats-creds records a batch's
// events in its JetStream, and events replay --nats-creds reads them back.
// Without credentials, or with a creds file that is not there, the daemon
// and the CLI end at once with an error that says what, and an operator's
// action is made with a warning that says why its event is not recorded.
func TestNATSCredentials(t *testing.T) {
	t.Parallel()
	o := startOperatorNATS(t)
	dir := t.TempDir()
	creds := filepath.Join(dir, "ingestq.creds")
	o.user(creds)
	missing := filepath.Join(dir, "nowhere.creds")
	r := natsClients{t: t, zk: zktest.Shared(t).Addr, root: zktest.Root(t), url: o.url}

	for _, c := range []struct {
		name  string
		flags []string
		want  string // in the errors, beside the URL
	}{
		{"no creds", nil, "authorization failed"},
		{"a missing creds file", []string{"--nats-creds", missing}, missing},
	} {
		r.refused(c.name, c.flags, c.want)
		for _, action := range []string{"hold", "release"} {
			_, stderr, code := r.cli(append([]string{action, "queue"}, c.flags...)...)
			if code != 0 || !strings.Contains(stderr, "its event is not recorded") || strings.Contains(stderr, "must name the daemon's NATS") ||
				!strings.Contains(stderr, c.want) {
				t.Errorf("%s queue with %s: exit %d, stderr %q: want 0 and a warning that says %q, not to change --nats", action, c.name, code, stderr, c.want)
			}
		}
	}
	r.recorded("--nats-creds", creds)
}

// natsClients runs the daemon and the CLI against the NATS at url.
type natsClients struct {
	t             *testing.T
	zk, root, url string
}

// cli runs ingestq with args on the queue and NATS and returns its stdout,
// stderr and exit code.
func (r natsClients) cli(args ...string) (stdout, stderr string, code int) {
	r.t.Helper()
	cmd := exec.Command(ingestqBin, append([]string{"--zk", r.zk, "--zk-root", r.root, "--nats", r.url}, args...)...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		r.t.Fatalf("ingestq %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

// refused checks that serve and events replay with flags end with exit 1
// and an error that names the NATS and says want, not that nothing answers.
func (r natsClients) refused(name string, flags []string, want string) {
	r.t.Helper()
	d := launchDaemon(r.t, daemonConfig{Host: "refused", ZK: r.zk, Root: r.root, NATS: r.url, Extra: flags})
	if !d.wait(30 * time.Second) {
		r.t.Fatalf("serve with %s: still running after 30s, want an exit", name)
	}
	_, stderr, code := r.cli(append([]string{"events", "replay"}, flags...)...)
	r.t.Logf("with %s: serve says %q; events replay says %q", name, strings.TrimSpace(tail(d.logText(), 1)), strings.TrimSpace(stderr))
	for what, res := range map[string]struct {
		code int
		text string
	}{"serve": {d.state.ExitCode(), d.logText()}, "events replay": {code, stderr}} {
		if res.code != 1 || !strings.Contains(res.text, r.url) || !strings.Contains(res.text, want) || strings.Contains(res.text, "not reachable") {
			r.t.Errorf("%s with %s: exit %d, %q: want exit 1 and an error that names %s and says %q", what, name, res.code,
				strings.TrimSpace(tail(res.text, 1)), r.url, want)
		}
	}
}

// recorded runs a daemon with flags for a batch, and checks that events
// replay with the same flags reads each of its moves once.
func (r natsClients) recorded(flags ...string) {
	r.t.Helper()
	q := openQueue(r.t, r.zk, r.root)
	d := startDaemon(r.t, daemonConfig{Host: "d", ZK: r.zk, Root: r.root, NATS: r.url, Extra: flags})
	bid := createBatch(r.t, q, 5)
	waitBatchDone(r.t, q, bid, 60*time.Second)
	jids := assertBatchCompleted(r.t, q, bid, 5)
	d.stop(15 * time.Second)
	d.assertNoLoss()
	out, stderr, code := r.cli(append([]string{"events", "replay", "--batch", bid, "-o", "json"}, flags...)...)
	if code != 0 {
		r.t.Fatalf("events replay %s: exit %d: %s", strings.Join(flags, " "), code, stderr)
	}
	var evs []events.Event
	if err := json.Unmarshal([]byte(out), &evs); err != nil {
		r.t.Fatalf("events replay -o json: %v\n%s", err, out)
	}
	assertExactlyOnce(r.t, evs, bid, jids)
}

// The daemon's NATS user is revoked while it runs: NATS refuses it, the
// daemon works its jobs meanwhile, and once the creds file holds a user NATS
// takes (an operator renewed it), it reconnects and records the events that
// waited (decision 268: an outage shorter than the resends' minute loses
// none). nats.go gives up on a server that refuses the same credentials
// twice; the daemon must not.
func TestNATSCredentialsRenewed(t *testing.T) {
	t.Parallel()
	o := startOperatorNATS(t)
	creds := filepath.Join(t.TempDir(), "ingestq.creds")
	user := o.user(creds)
	zkAddr, root := zktest.Shared(t).Addr, zktest.Root(t)
	q := openQueue(t, zkAddr, root)
	refused := o.refusals("ingestq@d")
	d := startDaemon(t, daemonConfig{Host: "d", ZK: zkAddr, Root: root, NATS: o.url, Extra: []string{"--nats-creds", creds}})

	o.revoke(user)
	d.waitLog(30*time.Second, "events: NATS disconnected")
	bid := createBatch(t, q, 5)
	waitBatchDone(t, q, bid, 60*time.Second)
	jids := assertBatchCompleted(t, q, bid, 5)
	// Refused twice: nats.go gives up there.
	poll(t, 30*time.Second, "NATS to refuse the daemon twice", func() (bool, string, error) {
		return refused.Load() >= 2, "", nil
	})
	d.waitLog(10*time.Second, "authorization")

	o.user(creds)
	d.waitLog(30*time.Second, "events: NATS reconnected")
	d.waitEventsTaken(60 * time.Second)
	d.stop(15 * time.Second)
	if _, lost := d.stopped(); lost != 0 {
		t.Errorf("events_lost=%d after NATS refused the daemon for less than the resends' minute", lost)
	}
	assertExactlyOnce(t, replay(t, o.url, bid, nats.UserCredentials(creds)), bid, jids)
	if n := len(d.logLines("authorization")); n > 5 {
		t.Errorf("%d log lines about the refusal, want a few (rate-limited):\n%s", n, strings.Join(d.logLines("authorization"), "\n"))
	}
}

// A NATS that asks for mutual TLS: serve --nats-tls-ca/-cert/-key records a
// batch's events and events replay with them reads them back; without a
// client certificate, or without the CA, both end with an error that says
// the TLS handshake failed, not that nothing answers.
func TestNATSMutualTLS(t *testing.T) {
	t.Parallel()
	pki := tlstest.Mutual(t)
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: pki.ServerCert, KeyFile: pki.ServerKey, CaFile: pki.CA, Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	ns := natstest.Run(t, &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(),
		NoSigs: true, NoLog: true, TLS: true, TLSVerify: true, TLSConfig: tc, TLSTimeout: 2})
	r := natsClients{t: t, zk: zktest.Shared(t).Addr, root: zktest.Root(t), url: "tls://" + ns.Addr().String()}
	withTLS := []string{"--nats-tls-ca", pki.CA, "--nats-tls-cert", pki.ClientCert, "--nats-tls-key", pki.ClientKey}
	r.refused("no client certificate", withTLS[:2], "TLS handshake")
	r.refused("no CA", withTLS[2:], "TLS handshake")
	r.recorded(withTLS...)
}
