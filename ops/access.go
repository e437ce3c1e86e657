package ops

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"golang.org/x/text/unicode/norm"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/reactor/queue"
)

// DefaultAccessThreshold is the estimated size above which a request goes
// to the large access queue.
const DefaultAccessThreshold = 1 << 30

// AccessFormats are the package formats, the default first.
var AccessFormats = []string{queue.FormatZip, queue.FormatTarGz}

// ObjectReader is what an access request's size is estimated from: the
// inventory.
type ObjectReader interface {
	Object(ctx context.Context, ark string) (inventory.ObjectDetail, error)
}

// AccessRequest is what someone asks to download: a whole object (every
// version), one version, or some files (of a version, or of the latest).
type AccessRequest struct {
	ARK         string   `json:"ark"`
	Version     int      `json:"version,omitempty"`
	Files       []string `json:"files,omitempty"`
	Format      string   `json:"format,omitempty"` // zip (default) or tar.gz
	RequestedBy string   `json:"requested_by,omitempty"`
}

// AccessView is an access request as the CLI and the API show it.
type AccessView struct {
	Ref          string      `json:"ref"` // queue/qid: each queue numbers its own
	ID           string      `json:"id"`
	Queue        string      `json:"queue"` // small or large
	State        queue.State `json:"state"`
	Message      string      `json:"message,omitempty"`
	LastModified string      `json:"last_modified"`
	Locked       bool        `json:"locked"` // a daemon is assembling it
	// Holder is the daemon that took it to assemble it (its host and
	// session), while it is Pending or Processing; none once it ends, or
	// for another tool's request.
	Holder *queue.JobHolder  `json:"holder,omitempty"`
	Token  queue.AccessToken `json:"token"`
	// Unreachable says why a Completed package cannot be downloaded now:
	// its folder's host is not running (Service.Unreachable; set by the
	// show of one request).
	Unreachable string `json:"unreachable,omitempty"`
}

func accessView(a *queue.Access) AccessView {
	t, _ := a.AccessToken() // another tool's token shows what it shares with ours
	return AccessView{Ref: a.Ref(), ID: a.ID, Queue: a.Queue, State: a.State(), Message: a.Status.Message,
		LastModified: a.Status.LastModified, Locked: a.Locked, Holder: a.Status.Holder, Token: t}
}

// MissingObject is an access request's refusal of an ARK the inventory
// does not hold.
func MissingObject(ark string) error { return queue.Missing("object %s is not in the inventory", ark) }

// RequestAccess checks a request against the inventory, estimates its
// size, and queues it: on the small queue, or on the large one when the
// estimate is above the threshold (Service.AccessThreshold). Its event
// (→ Pending) names who asked as its actor, as an operator's other
// changes do; RequestedBy is whom the package is for.
func (s *Service) RequestAccess(ctx context.Context, r AccessRequest) (AccessView, error) {
	r.Format = cmp.Or(r.Format, queue.FormatZip)
	if err := CheckAccessRequest(r); err != nil {
		return AccessView{}, err
	}
	if s.Inventory == nil {
		return AccessView{}, errors.New("access request: no inventory to estimate its size from")
	}
	d, err := s.Inventory.Object(ctx, r.ARK)
	if errors.Is(err, inventory.ErrNotFound) {
		return AccessView{}, MissingObject(r.ARK)
	}
	if err != nil {
		return AccessView{}, err
	}
	size, err := estimate(d, r)
	if err != nil {
		return AccessView{}, err
	}
	name := queue.AccessSmall
	if size > cmp.Or(s.AccessThreshold, DefaultAccessThreshold) {
		name = queue.AccessLarge
	}
	now := time.Now().UTC()
	t := queue.AccessToken{Token: uuid.NewString(), ContentBytes: size, TokenStatus: queue.TokenNotReady,
		Anticipated: now.Add(anticipate(size)).Format(time.RFC3339), ARK: r.ARK, Profile: d.Object.Profile,
		Version: r.Version, Files: r.Files, Format: r.Format, RequestedBy: r.RequestedBy, Requested: now.Format(time.RFC3339)}
	a, err := s.Q.CreateAccess(ctx, name, t.Map(nil))
	if errors.Is(err, queue.ErrTooLarge) {
		return AccessView{}, fmt.Errorf("access request for %s: more than its node may hold (%d file names, a requested_by of %d bytes); "+
			"ask for a version (all its files), fewer files, or a shorter requested_by: %w", r.ARK, len(r.Files), len(r.RequestedBy), err)
	}
	if err != nil {
		return AccessView{}, err
	}
	s.publish(events.Event{Kind: events.KindAccess, AccessID: a.Ref(), To: string(queue.Pending), Actor: s.actor(ctx),
		Attrs: map[string]any{"queue": name, "ark": r.ARK, "estimated_bytes": size}})
	return accessView(a), nil
}

// anticipate is a rough guess at how long a package of size takes: a
// minute, and 100 MB a second.
func anticipate(size int64) time.Duration {
	return time.Minute + time.Duration(size/100e6)*time.Second
}

// CheckAccessRequest checks a request's fields without reading anything:
// a bad one is a FieldError (ark, version, format or file), so that the
// CLI can name its flag.
func CheckAccessRequest(r AccessRequest) error {
	if err := storage.CheckARK(r.ARK); err != nil || !strings.HasPrefix(r.ARK, "ark:") {
		return &FieldError{Field: "ark", Value: strconv.Quote(r.ARK), Problem: "want an ARK (ark:/NAAN/NAME)"}
	}
	if r.Version < 0 {
		return &FieldError{Field: "version", Value: strconv.Itoa(r.Version), Problem: "want 1 or more"}
	}
	if !slices.Contains(AccessFormats, cmp.Or(r.Format, queue.FormatZip)) {
		return &FieldError{Field: "format", Value: strconv.Quote(r.Format), Problem: "want " + strings.Join(AccessFormats, " or ")}
	}
	seen := map[string]bool{}
	for _, f := range r.Files {
		switch {
		case f == "":
			return &FieldError{Field: "file", Value: `""`, Problem: "empty: want a file of the object, as stored (producer/…)"}
		case seen[f]:
			return &FieldError{Field: "file", Value: strconv.Quote(f), Problem: "named twice"}
		}
		seen[f] = true
	}
	return nil
}

// estimate sums the sizes the inventory records of what r asks for; a
// version or file it lacks is not found, named.
func estimate(d inventory.ObjectDetail, r AccessRequest) (int64, error) {
	vs := d.Versions
	if len(vs) == 0 {
		return 0, queue.Missing("object %s has no version in the inventory", r.ARK)
	}
	if r.Version == 0 && len(r.Files) == 0 {
		var n int64
		for _, v := range vs {
			n += filesSize(v.Files)
		}
		return n, nil
	}
	i := len(vs) - 1
	if r.Version > 0 {
		i = slices.IndexFunc(vs, func(v inventory.Record) bool { return v.Version == r.Version })
		if i < 0 {
			return 0, queue.Missing("%s", storage.NoVersion(r.ARK, r.Version, vs[len(vs)-1].Version))
		}
	}
	v := vs[i]
	if len(r.Files) == 0 {
		return filesSize(v.Files), nil
	}
	// By name, not a search of the files for each one asked: 60,000 names
	// of an object of 60,000 files took a minute of CPU a request.
	sizes := make(map[string]int64, len(v.Files))
	for _, f := range v.Files {
		sizes[f.Name] = f.Size
	}
	var n int64
	var missing []string
	for _, name := range r.Files {
		size, ok := sizes[name]
		if !ok {
			missing = append(missing, name)
			continue
		}
		n += size
	}
	if len(missing) > 0 {
		had := inOtherVersions(vs, v.Version, missing)
		byNFC := make(map[string]string, len(v.Files)) // v's names by their NFC form
		for _, f := range v.Files {
			byNFC[norm.NFC.String(f.Name)] = f.Name
		}
		for i, name := range missing {
			if stored, ok := byNFC[norm.NFC.String(name)]; ok { // café typed on one system, stored from another: %+q shows them apart
				missing[i] = fmt.Sprintf("%+q (stored as %+q, the same name in another Unicode normalization: ask for it as stored)", name, stored)
			} else {
				missing[i] = strconv.Quote(name) + had[name]
			}
		}
		return 0, queue.Missing("object %s version %d has no file %s", r.ARK, v.Version, strings.Join(missing, ", "))
	}
	return n, nil
}

// inOtherVersions names, of each of names, the latest version other than
// skip that has it, so that a request for a file since removed, or added
// later, says which version to ask for: " (version N has it)", none when
// no other version has it.
func inOtherVersions(vs []inventory.Record, skip int, names []string) map[string]string {
	had := make(map[string]string, len(names))
	for _, name := range names {
		had[name] = ""
	}
	for _, v := range slices.Backward(vs) {
		if v.Version == skip {
			continue
		}
		for _, f := range v.Files {
			if said, ok := had[f.Name]; ok && said == "" {
				had[f.Name] = fmt.Sprintf(" (version %d has it)", v.Version)
			}
		}
	}
	return had
}

func filesSize(files []inventory.FileRow) int64 {
	var n int64
	for _, f := range files {
		n += f.Size
	}
	return n
}

// ParseAccessState maps an any-case name to an access request's state.
func ParseAccessState(name string) (queue.State, error) {
	for _, st := range queue.AccessMachine.States {
		if strings.EqualFold(string(st), name) {
			return st, nil
		}
	}
	names := make([]string, len(queue.AccessMachine.States))
	for i, st := range queue.AccessMachine.States {
		names[i] = string(st)
	}
	return "", invalid(fmt.Sprintf("unknown access state %q (known: %s)", name, strings.Join(names, ", ")))
}

// CheckAccessRef refuses what cannot name an access request, as every
// command on one does.
func CheckAccessRef(ref string) error { return checkAccessRef(ref) }

// checkAccessRef refuses what cannot name a request: small/qid…,
// large/qid… or qid….
func checkAccessRef(ref string) error {
	name, qid, ok := strings.Cut(ref, "/")
	if !ok {
		qid = name
	} else if !slices.Contains(queue.AccessQueues, name) {
		return invalid(fmt.Sprintf("%q is not an access request (want small/qid…, large/qid… or qid…)", ref))
	}
	return checkID(qid, "qid", "access request")
}

// ShowAccess reads one request, by its ref or its qid.
func (s *Service) ShowAccess(ctx context.Context, ref string) (AccessView, error) {
	if err := checkAccessRef(ref); err != nil {
		return AccessView{}, err
	}
	a, err := s.Q.FindAccess(ctx, ref)
	if err != nil {
		return AccessView{}, err
	}
	return accessView(a), nil
}

// Unreachable says why request v's Completed package cannot be had now: a
// folder is served only by the daemon that made it, so while that host is
// not among the queue's live hosts its URL answers nothing. "" when it can,
// or when the hosts cannot be read (show says what it knows). One read of
// ZooKeeper: the show of one request asks it, not a listing.
func (s *Service) Unreachable(ctx context.Context, v AccessView) string {
	p := v.Token.Package
	if v.State != queue.Completed || p == nil || p.Where != "folder" || p.Host == "" {
		return ""
	}
	if _, alive, _, err := s.Q.LiveHost(ctx, p.Host); err != nil || alive {
		return ""
	}
	return fmt.Sprintf("its host %s is not running: the package is reachable again when %s is back, or ask again", p.Host, p.Host)
}

// AccessHold is the hold of an access queue (small or large) while it is
// held, else nil: the queue then takes no new request.
func (s *Service) AccessHold(ctx context.Context, name string) (*queue.Hold, error) {
	hold := queue.QueueAccessSmall
	if name == queue.AccessLarge {
		hold = queue.QueueAccessLarge
	}
	holds, err := s.Q.Holds(ctx)
	if err != nil {
		return nil, err
	}
	for _, h := range holds {
		if h.Kind == "queue" && h.Name == hold {
			return &h, nil
		}
	}
	return nil, nil
}

// RequeueAccess sends a Failed request back to Processing: a daemon
// assembles it again.
func (s *Service) RequeueAccess(ctx context.Context, ref string) (Outcome, error) {
	if err := checkAccessRef(ref); err != nil {
		return Outcome{}, err
	}
	a, err := s.Q.RequeueAccess(ctx, ref)
	if err != nil {
		return Outcome{}, err
	}
	msg := fmt.Sprintf("access request %s requeued: a daemon assembles it again", a.Ref())
	s.Announce(ctx, "requeue", events.Event{AccessID: a.Ref(), Message: msg})
	return Outcome{ID: a.Ref(), Changed: true, State: queue.Processing, Message: msg}, nil
}

// DeleteAccess deletes a request: a Failed one becomes Deleted; a
// Completed or Deleted one is removed, and so is its package (packageGone).
func (s *Service) DeleteAccess(ctx context.Context, ref string) (Outcome, error) {
	if err := checkAccessRef(ref); err != nil {
		return Outcome{}, err
	}
	a, removed, err := s.Q.RemoveAccess(ctx, ref)
	if err != nil {
		return Outcome{}, err
	}
	o := Outcome{ID: a.Ref(), Changed: true, State: queue.Deleted, Message: fmt.Sprintf("access request %s is Deleted", a.Ref())}
	if removed {
		o.State, o.Message = "", fmt.Sprintf("access request %s removed%s", a.Ref(), s.packageGone(ctx, a))
	}
	s.Announce(ctx, "delete", events.Event{AccessID: a.Ref(), Message: o.Message})
	return o, nil
}

// packageGone removes the package of request a, just removed, where it can
// at once, and says what became of it. A folder's is refused (410) by its
// host's server from now on and removed at that host's next sweep; an S3
// one is deleted now (RemovePackage) when this door can reach the bucket,
// else its presigned URL works until the next sweep of a daemon writing
// there deletes it.
func (s *Service) packageGone(ctx context.Context, a *queue.Access) string {
	t, err := a.AccessToken()
	if err != nil || t.Package == nil {
		return ""
	}
	p := t.Package
	if p.Where != "s3" {
		return fmt.Sprintf(" (its host %s refuses its package from now on, and removes it at its next sweep)", p.Host)
	}
	err = errors.New("no S3 access here")
	if s.RemovePackage != nil {
		err = s.RemovePackage(ctx, p)
	}
	if err != nil {
		return fmt.Sprintf(" (its package %s in %s could not be deleted now: %v; its URL works until the next sweep of a daemon writing there deletes it)",
			p.Name, p.Location, err)
	}
	return fmt.Sprintf(" (its package %s deleted from %s)", p.Name, p.Location)
}
