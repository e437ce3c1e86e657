package ops

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers/checkm"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/internal/redact"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// PayloadTypes are the types a submission may give its payload.
var PayloadTypes = []string{"auto", "file", "container", "manifest"}

// SubmitRequest is what a depositor asks for (ingestq submit's flags, or
// the API's JSON).
type SubmitRequest struct {
	Profile    string
	Submitter  string
	PayloadURL string // a URL; the CLI makes a local path a file: URL first
	Type       string // one of PayloadTypes; "" is auto
	Priority   *int   // 0..99; nil: the profile's
	// Fields are more keys of the submission (erc_who, local_id, …), kept
	// as given; they win over the keys above.
	Fields map[string]any
}

// FieldError is a bad field of a submission request. Its message names
// the field as the caller calls it (Named): a flag, or a JSON key.
type FieldError struct {
	Field   string // the JSON key: profile, type, priority, payload_url, submitter, primary_id, hash_algorithm, hash_value, file_name
	Value   string // the bad value as the message shows it; "" when missing
	Problem string
}

func (e *FieldError) Error() string        { return e.Named(e.Field) }
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

// Named is the message with the field called name.
func (e *FieldError) Named(name string) string {
	if e.Value == "" {
		return "missing " + name
	}
	return name + " " + e.Value + ": " + e.Problem
}

// CheckSubmitRequest checks a request's fields, in the order a person
// reads them.
func CheckSubmitRequest(r SubmitRequest) error {
	switch {
	case r.Profile == "":
		return &FieldError{Field: "profile"}
	case r.Type != "" && !slices.Contains(PayloadTypes, r.Type):
		return &FieldError{Field: "type", Value: fmt.Sprintf("%q", r.Type), Problem: "want one of " + strings.Join(PayloadTypes, ", ")}
	case r.Priority != nil && (*r.Priority < 0 || *r.Priority > 99):
		return &FieldError{Field: "priority", Value: fmt.Sprint(*r.Priority), Problem: "want 0..99"}
	case r.PayloadURL == "":
		return &FieldError{Field: "payload_url"}
	case r.Submitter == "":
		return &FieldError{Field: "submitter"}
	}
	return nil
}

// Submission checks a request and makes the batch's submission from it.
func Submission(r SubmitRequest) (queue.Submission, error) {
	if err := CheckSubmitRequest(r); err != nil {
		return queue.Submission{}, err
	}
	m := map[string]any{
		"profile_name":    r.Profile,
		"submitter":       r.Submitter,
		"payload_url":     r.PayloadURL,
		"type":            cmp.Or(r.Type, "auto"),
		"submission_mode": "add",
	}
	if r.Priority != nil {
		m["priority"] = *r.Priority
	}
	for k, v := range r.Fields {
		m[k] = v
	}
	// Through JSON, as a daemon reads it: keys that name a field fill it,
	// the others are kept as they are.
	var sub queue.Submission
	data, err := json.Marshal(m)
	if err == nil {
		err = json.Unmarshal(data, &sub)
	}
	if err != nil {
		return queue.Submission{}, invalid("submission: " + err.Error())
	}
	// A daemon reading the node keeps a value its field does not take
	// aside (queue.Extra), and the field empty: refused here, as a local
	// id or date lost without a word.
	for _, k := range slices.Sorted(maps.Keys(sub.Extra)) {
		if f, ok := submissionField(k); ok {
			return queue.Submission{}, &FieldError{Field: k, Value: string(sub.Extra[k]), Problem: "want " + kindWord(f.Type)}
		}
	}
	if err := checkObjectFields(&sub); err != nil {
		return queue.Submission{}, err
	}
	return sub, nil
}

// SetValue is the value of a submission field given as text (ingestq
// submit --set KEY=TEXT): the text itself for a field the submission takes
// as a string (local_id=12345 is a local id, erc_when=2024 a date), else
// its JSON when it parses (file_size=1024, a pipeline's fail_job=3), else
// the text.
func SetValue(key, text string) any {
	if f, ok := submissionField(key); ok && f.Type.Kind() == reflect.String {
		return text
	}
	var v any
	if json.Unmarshal([]byte(text), &v) != nil {
		return text
	}
	return v
}

// submissionField is the field of queue.Submission whose JSON key is key.
func submissionField(key string) (reflect.StructField, bool) {
	t := reflect.TypeFor[queue.Submission]()
	for i := range t.NumField() {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name == key && name != "-" {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// kindWord says what a field of type t takes.
func kindWord(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.String {
		return "a string"
	}
	return "a whole number"
}

// checkObjectFields checks what a submission says of its one object as
// the pipeline checks a manifest's line (handlers/checkm), so that a bad
// value is refused now, naming its field, not found by a job later: the
// primary id is an ARK, the hash one the manifests may give (normalised,
// "SHA-256" → "sha256"), the file name safe.
func checkObjectFields(sub *queue.Submission) error {
	if id := sub.PrimaryID; id != "" {
		if err := checkm.CheckARK(id); err != nil {
			return &FieldError{Field: "primary_id", Value: strconv.Quote(id), Problem: err.Error()}
		}
	}
	if sub.HashAlg != "" || sub.HashValue != "" {
		alg, ok := checkm.HashAlgorithm(sub.HashAlg)
		switch {
		case sub.HashAlg == "":
			return &FieldError{Field: "hash_algorithm"}
		case !ok:
			return &FieldError{Field: "hash_algorithm", Value: strconv.Quote(sub.HashAlg), Problem: "want " + checkm.HashAlgorithms}
		case sub.HashValue == "":
			return &FieldError{Field: "hash_value"}
		}
		if err := checkm.CheckDigest(alg, sub.HashValue); err != nil {
			return &FieldError{Field: "hash_value", Value: strconv.Quote(sub.HashValue), Problem: alg + " digest " + err.Error()}
		}
		sub.HashAlg, sub.HashValue = alg, strings.ToLower(sub.HashValue)
	}
	if name := sub.FileName; name != "" {
		if _, err := checkm.CleanName(name); err != nil {
			return &FieldError{Field: "file_name", Value: strconv.Quote(name), Problem: err.Error()}
		}
	}
	return nil
}

// Submit creates a Pending batch for sub, once its profile is known to
// the queue and its payload is one the profile's daemons fetch, and
// publishes its submission (→ Pending, under the batch's arrival ID; the
// actor is who submits).
func (s *Service) Submit(ctx context.Context, sub queue.Submission) (*queue.Batch, error) {
	if err := s.CheckProfile(ctx, sub); err != nil {
		return nil, err
	}
	b, err := s.Q.CreateBatch(ctx, sub)
	if err != nil {
		return nil, err
	}
	s.publish(events.Event{Kind: events.KindBatch, ID: b.ArrivalID(), BatchID: b.ID, To: string(b.State()), Actor: s.actor(ctx),
		Attrs: map[string]any{"action": "submit", "uuid": b.UUID(), "profile": b.Profile(), "submitter": sub.Submitter}})
	return b, nil
}

// CheckProfile refuses a submission for a profile no daemon has published.
// Pass-through payloads (tests and benchmarks) need none.
func (s *Service) CheckProfile(ctx context.Context, sub queue.Submission) error {
	name := sub.Profile
	if strings.HasPrefix(sub.PayloadURL, reactor.PassThroughScheme) {
		return nil
	}
	if err := profile.ValidName(name); err != nil {
		return invalid(fmt.Sprintf("submit: profile name %v", err))
	}
	prof, ok, err := profile.Known(ctx, s.Q, name)
	if err != nil {
		return fmt.Errorf("reading the profile registry: %w", err)
	}
	if !ok {
		return invalid(fmt.Sprintf("submit: unknown profile %q: no daemon on this queue has published it (published: %s; "+
			"ingestq serve publishes the profiles of its --profiles folder at start)", name, s.published(ctx, nil)))
	}
	served, err := s.servedProfiles(ctx)
	if err != nil {
		return fmt.Errorf("reading the live daemons: %w", err)
	}
	if len(served) > 0 && !slices.ContainsFunc(served, func(h reactor.HostInfo) bool { return slices.Contains(h.Profiles, name) }) {
		says := make([]string, len(served))
		for i, h := range served {
			says[i] = fmt.Sprintf("%s serves %s", h.Name, strings.Join(h.Profiles, ", "))
		}
		return invalid(fmt.Sprintf("submit: profile %q: no live daemon of this queue serves it (%s); a daemon that had it published it "+
			"before it was restarted without it: submit for a profile they serve, or start a daemon whose --profiles has it",
			name, strings.Join(says, "; ")))
	}
	return checkPayloadURL(prof, sub)
}

// servedProfiles are the live daemons that say which profiles they serve
// (their host nodes list them). None when no daemon runs (a batch waits
// for one), or those that run say nothing: a pass-through daemon, one
// older than the list, or another program's node (Merritt's daemons
// publish no profile). The published profiles then decide alone. The
// host nodes only, not Hosts' routes too: two ZooKeeper round trips a
// check, not four.
func (s *Service) servedProfiles(ctx context.Context) ([]reactor.HostInfo, error) {
	hosts, err := s.Q.Hosts(ctx)
	if err != nil {
		return nil, err
	}
	var served []reactor.HostInfo
	for _, h := range hosts {
		var info reactor.HostInfo
		if json.Unmarshal(h.Data, &info) == nil && len(info.Profiles) > 0 {
			info.Name = h.Name
			served = append(served, info)
		}
	}
	return served, nil
}

// checkPayloadURL refuses a payload the profile's daemons would not
// fetch: a scheme other than http and https, or a local file without the
// profile's allow_local_files; and a local file whose own name, the stored
// file's, intake refuses (checkLocalName).
func checkPayloadURL(prof *profile.Profile, sub queue.Submission) error {
	raw := sub.PayloadURL
	u, err := url.Parse(raw)
	if err != nil {
		return invalid(fmt.Sprintf("submit: payload %q: %s", redact.Location(raw), redact.In(err.Error(), raw)))
	}
	switch {
	case u.Scheme == "file" && prof.AllowLocalFiles:
		return checkLocalName(sub, u.Path)
	case slices.Contains(PayloadSchemes(prof), u.Scheme):
		return nil
	case u.Scheme == "file":
		return invalid(fmt.Sprintf("submit: %s is a local file, and profile %s does not allow local files "+
			"(allow_local_files in its profile file): serve it over http(s), or use a profile that allows them", u.Path, prof.Name))
	}
	allowed := "http, https"
	if prof.AllowLocalFiles {
		allowed += ", file or a local path"
	}
	return invalid(fmt.Sprintf("submit: payload %q: scheme %q is not fetched for profile %s (allowed: %s)",
		raw, u.Scheme, prof.Name, allowed))
}
