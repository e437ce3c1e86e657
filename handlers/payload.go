package handlers

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers/checkm"
	"github.com/ingestq/ingestq/handlers/container"
	"github.com/ingestq/ingestq/handlers/fetch"
	"github.com/ingestq/ingestq/handlers/internal/plainfile"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/internal/redact"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// Submission types (its "type"): what the depositor says the payload is.
// "auto" and "" mean: look at its first bytes.
const (
	SubmitAuto      = "auto"
	SubmitFile      = "file"
	SubmitContainer = "container"
	SubmitManifest  = "manifest"
)

// Objects reads a Pending batch's payload: one object per job to make.
// A payload server that answers busy (503, 429) is waited for as a job's
// download's is (busyWait): the batch is tried again Later, spending no
// attempt and holding no batch worker, up to BusyLimit. Before, the
// batch's attempts were spent in seconds under one of the two batch
// workers: 15 requests in 2 minutes to a server asking for 120 s, then
// Failed.
func (p *Pipeline) Objects(ctx context.Context, b *queue.Batch) ([]reactor.Object, error) {
	ctx = fetch.WaitsForBusy(fetch.WithLogger(ctx, p.log.With("batch", b.ID)))
	if d := b.Arrival.Deferred; d == nil || d.Host != p.cfg.Host {
		// Taken without this daemon's deferral in its status (a first
		// try, held and released, deferred by another host): its busy
		// clock starts again. Kept, a batch held past the limit failed at
		// its first busy answer after its release.
		p.endWaits(b.ID)
	}
	objs, err := p.payloadObjects(ctx, b)
	busy := &busyAnswers{}
	if !busy.add("", err) {
		if err == nil || reactor.IsFatal(err) {
			p.endWaits(b.ID) // a retryable failure between busy answers keeps their clock, as a download's does
		}
		return objs, err
	}
	next, msg, err := p.busyWait(p.nextWait(b.ID, nil), b.ID, "batch", busy)
	if err != nil {
		return nil, err
	}
	// Its progress event, as a job's wait's is (sayWhyItWaits): a batch's
	// events were its moves only, and a depositor following them heard
	// `→ Pending`, then nothing for up to --fetch-busy-limit. Said just
	// before the reactor writes msg into its status (Later); each try
	// of the same wait writes it, not its event.
	p.publishWait(b.Status.Message, events.Event{BatchID: b.ID, To: string(b.State()), Message: msg}, next)
	p.log.Info("payload: a depositor's server is busy; batch waits", "batch", b.ID, "err", busy.err, "retest_in", time.Until(next))
	return nil, reactor.Later(next, msg)
}

// payloadObjects is Objects but for a busy payload server: the objects
// the batch's payload gives.
func (p *Pipeline) payloadObjects(ctx context.Context, b *queue.Batch) ([]reactor.Object, error) {
	sub := b.Submission
	if sub.PayloadURL == "" && sub.Profile == "" && sub.FileName == "" {
		// A foreign writer's batch without its submission: not `unknown profile ""`.
		return nil, reactor.Fatal(fmt.Errorf("the batch has no submission: /batches/%s/submission is missing, or names no payload_url and no profile_name", b.ID))
	}
	prof, err := p.profile(b.Profile())
	if err != nil {
		return nil, err
	}
	url := sub.PayloadURL
	if url == "" {
		if name := sub.FileName; name != "" {
			// Merritt's ingest service keeps a depositor's upload on its own disk.
			return nil, reactor.Fatal(fmt.Errorf("submission has no payload_url, only the file name %q of an upload that ingestq cannot fetch", name))
		}
		return nil, reactor.Fatal(fmt.Errorf("submission has no payload_url"))
	}
	kind := sub.Type
	var m *checkm.Manifest
	if kind == "" || kind == SubmitAuto || kind == SubmitManifest {
		if kind, m, err = p.readPayload(ctx, prof, url, kind); err != nil {
			return nil, err
		}
	}
	base := jobConfig(sub, prof)
	var objs []reactor.Object
	switch kind {
	case SubmitFile, SubmitContainer:
		objs = []reactor.Object{p.single(sub, prof, base, kind, url)}
	case SubmitManifest:
		objs, err = p.manifestObjects(sub, prof, base, m, url)
	default:
		err = reactor.Fatal(fmt.Errorf("submission type %q: want %s, %s, %s or %s", kind, SubmitAuto, SubmitFile, SubmitContainer, SubmitManifest))
	}
	return objs, err
}

// peekBytes is how much of a payload's beginning type auto looks at.
const peekBytes = 512

// sniffPayload is what type auto takes a payload whose first bytes
// (peekBytes of them) are head for: a checkm manifest, a zip container,
// else a single file, stored under the payload's name.
func sniffPayload(head []byte) string {
	switch {
	case checkm.Sniff(head):
		return SubmitManifest
	case container.Sniff(head):
		return SubmitContainer
	}
	return SubmitFile
}

// SniffLocalFile is sniffPayload of the first bytes of the local file at
// path, a symbolic link followed, as a daemon's fetch of its file: URL
// reads them; an error when it cannot be read or is no plain file (a pipe
// is not waited on: plainfile).
func SniffLocalFile(path string) (string, error) {
	f, _, err := plainfile.OpenFollowing(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	head, err := io.ReadAll(io.LimitReader(f, peekBytes)) // as fetch's Peek of a file: URL
	if err != nil {
		return "", err
	}
	return sniffPayload(head), nil
}

// readPayload looks at the payload's first bytes (sniffPayload): a checkm
// manifest is read whole and parsed, a zip is a container, anything else
// a single file.
func (p *Pipeline) readPayload(ctx context.Context, prof *profile.Profile, url, kind string) (string, *checkm.Manifest, error) {
	head, err := p.head(ctx, prof, url)
	if err != nil {
		return "", nil, err
	}
	sniffed := sniffPayload(head)
	shown := redact.Location(url) // a batch's message is shown below admin, and e-mailed
	switch {
	case sniffed == SubmitManifest:
		data, err := p.client(prof).Fetch(ctx, url, maxManifestBytes)
		if err != nil {
			return "", nil, classify(fmt.Errorf("manifest: %w", err))
		}
		m, err := checkm.Parse(bytes.NewReader(data), url, p.cfg.Manifests)
		if err != nil {
			return "", nil, reactor.Fatal(err)
		}
		return SubmitManifest, m, nil
	case kind == SubmitManifest:
		return "", nil, reactor.Fatal(fmt.Errorf("%s was submitted as a manifest but does not start with #%%checkm", shown))
	case len(head) == 0:
		// Nothing a depositor means to deposit; an empty file as the
		// object is still a type file submission away.
		return "", nil, reactor.Fatal(fmt.Errorf("%s is empty (0 bytes): nothing to ingest (submit it with type file to store an empty file)", shown))
	case strings.HasSuffix(strings.ToLower(urlBase(url)), ".checkm"):
		return "", nil, reactor.Fatal(fmt.Errorf("%s is named as a checkm manifest but does not start with #%%checkm (a damaged manifest?); "+
			"submit it with type file to store it as a file", shown))
	}
	return sniffed, nil, nil
}

// head reads the first peekBytes of a payload.
func (p *Pipeline) head(ctx context.Context, prof *profile.Profile, raw string) ([]byte, error) {
	head, err := p.client(prof).Peek(ctx, raw, peekBytes)
	if errors.Is(err, fetch.ErrScheme) {
		allowed := "http, https"
		if prof.AllowLocalFiles {
			allowed += ", file"
		}
		u, _ := url.Parse(raw) // it parsed, or the error would not be about its scheme
		return nil, reactor.Fatal(fmt.Errorf("payload_url %q: scheme %q not allowed for profile %s (%s)", redact.Location(raw), u.Scheme, prof.Name, allowed))
	}
	if err != nil {
		return nil, classify(err)
	}
	return head, nil
}

// jobConfig is the configuration every job of a batch shares.
func jobConfig(sub queue.Submission, prof *profile.Profile) queue.JobConfig {
	return queue.JobConfig{Profile: prof.Name, Submitter: sub.Submitter, BatchUUID: sub.BatchUUID,
		ResponseType: cmp.Or(sub.ResponseType, "json"), SubmissionMode: cmp.Or(sub.SubmissionMode, "add")}
}

// single is the one object of a file or container payload.
func (p *Pipeline) single(sub queue.Submission, prof *profile.Profile, cfg queue.JobConfig, kind, raw string) reactor.Object {
	cfg.PayloadURL, cfg.PayloadType = raw, kind
	cfg.FileName = cmp.Or(sub.FileName, urlBase(raw))
	cfg.HashAlg, cfg.HashValue, cfg.FileSize = sub.HashAlg, sub.HashValue, sub.FileSize
	spec := queue.JobSpec{Priority: batchPriority(sub, prof), Config: cfg}
	ids := &queue.Identifiers{PrimaryID: sub.PrimaryID, LocalIDs: queue.SplitLocalIDs(sub.LocalIDs)}
	if ids.PrimaryID != "" || len(ids.LocalIDs) > 0 {
		spec.Identifiers = ids
	}
	md := &queue.Metadata{Who: sub.Who, What: sub.What, When: sub.When, Where: sub.Where}
	if *md != (queue.Metadata{}) {
		spec.Metadata = md
	}
	return reactor.Object{Key: kind, Spec: spec}
}

// manifestObjects are the objects a manifest lists: the manifest itself
// (mrt-ingest-manifest), or one per line.
func (p *Pipeline) manifestObjects(sub queue.Submission, prof *profile.Profile, base queue.JobConfig, m *checkm.Manifest, raw string) ([]reactor.Object, error) {
	if m.Profile == checkm.IngestManifest {
		o := p.single(sub, prof, base, TypeManifest, raw)
		o.Spec.Config.FileName = ""
		o.Key = "manifest"
		return []reactor.Object{o}, nil
	}
	types := map[string]string{checkm.BatchManifest: TypeManifest, checkm.SingleFileBatch: TypeFile, checkm.ContainerBatch: TypeContainer}
	typ, ok := types[m.Profile]
	if !ok {
		return nil, reactor.Fatal(fmt.Errorf("%s: manifest profile %q is not one ingestq reads", redact.Location(raw), m.Profile))
	}
	objs := make([]reactor.Object, 0, len(m.Entries))
	for _, e := range m.Entries {
		cfg := base
		cfg.PayloadURL, cfg.PayloadType, cfg.ManifestLine = e.URL, typ, e.Line
		if typ == TypeFile {
			cfg.FileName = e.FileName
		}
		if typ != TypeManifest && e.HashAlg != "" {
			cfg.HashAlg, cfg.HashValue = e.HashAlg, e.HashValue
		}
		if typ != TypeManifest && e.Size >= 0 {
			cfg.FileSize = &e.Size
		}
		spec := queue.JobSpec{Priority: batchPriority(sub, prof), Config: cfg}
		if e.PrimaryID != "" || len(e.LocalIDs) > 0 {
			spec.Identifiers = &queue.Identifiers{PrimaryID: e.PrimaryID, LocalIDs: e.LocalIDs}
		}
		if md := (queue.Metadata{Who: e.Who, What: e.What, When: e.When, Where: e.Where}); md != (queue.Metadata{}) {
			spec.Metadata = &md
		}
		// The line number and URL name the object: stable when the
		// handler runs again on the same manifest.
		objs = append(objs, reactor.Object{Key: fmt.Sprintf("line %d: %s", e.Line, e.URL), Spec: spec})
	}
	return objs, nil
}

// Note names the submission's fields for its one object that a batch
// manifest's objects leave unused, each line giving its own ids,
// description, file and digest (decision 543 (c)): with type auto nothing
// could say so at submission. A batch manifest's objects are the ones made
// from its lines (ManifestLine).
func (p *Pipeline) Note(b *queue.Batch, objs []reactor.Object) string {
	if len(objs) == 0 || objs[0].Spec.Config.ManifestLine == 0 {
		return ""
	}
	sub := b.Submission
	var given []string
	for _, f := range []struct {
		key string
		set bool
	}{
		{"local_id", sub.LocalIDs != ""}, {"primary_id", sub.PrimaryID != ""}, {"file_name", sub.FileName != ""},
		{"hash_algorithm", sub.HashAlg != ""}, {"hash_value", sub.HashValue != ""}, {"file_size", sub.FileSize != nil},
		{"erc_who", sub.Who != ""}, {"erc_what", sub.What != ""}, {"erc_when", sub.When != ""}, {"erc_where", sub.Where != ""},
	} {
		if f.set {
			given = append(given, f.key)
		}
	}
	if len(given) == 0 {
		return ""
	}
	verb := "are"
	if len(given) == 1 {
		verb = "is"
	}
	return fmt.Sprintf("%sthe submission's %s %s not used: the payload is a batch manifest, whose lines give each object's own",
		queue.NotePrefix, strings.Join(given, ", "), verb)
}

func batchPriority(sub queue.Submission, prof *profile.Profile) int {
	if v := sub.Priority; v != nil && *v >= 0 && *v <= 99 {
		return *v
	}
	return prof.Priority
}

func urlBase(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return path.Base(strings.TrimSuffix(u.Path, "/"))
}
