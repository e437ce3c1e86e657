package handlers

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/ingestq/ingestq/handlers/internal/durable"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/reactor/queue"
)

// PREMIS events: what happened to an object on its way in, kept in the
// job's working folder from step to step (premisLog), written into the
// object as system/mrt-premis.xml at Processing, and recorded with the
// version in the inventory at Recording (with the copies Storing made).
//
// An event's id is derived from the job, the event type and what it is
// about, so a step run again (a retry, a requeue, another daemon) finds
// its events already logged and keeps the first ones: the PREMIS file of
// a job is the same bytes on every run, and the inventory adds each event
// once.

const (
	premisLog   = "premis-events.jsonl" // one event per line, each step's appended (decision 220)
	premisLogV1 = "premis-events.json"  // the log as one array, rewritten by each step: read, never written
	premisFile  = "mrt-premis.xml"
)

// eventNS scopes the ids of ingestq's events.
var eventNS = uuid.MustParse("6f1e9a52-3c1b-4b9e-9d59-0d6b5c3e7a11")

// event makes an event of job jid about key (a file name, a copy's target,
// or "" for the object).
func (p *Pipeline) event(jid, typ, file, key, detail string) inventory.Event {
	id := uuid.NewSHA1(eventNS, []byte(strings.Join([]string{jid, typ, file, key}, "\x00")))
	return inventory.Event{ID: id.String(), Type: typ, At: p.q.Now().UTC().Truncate(time.Microsecond),
		Outcome: inventory.OutcomeSuccess, Agent: p.cfg.Agent, Detail: detail, File: file}
}

// logEvents adds evs to the job's event log, keeping any event already
// there, and returns the whole log. The log is appended to and synced, not
// rewritten: a step adds a few events to a log of thousands (a large
// object's digests), and an append makes no new file, where each new file
// costs this project's hosts about a millisecond (PERFORMANCE.md).
func (p *Pipeline) logEvents(j *queue.Job, evs ...inventory.Event) ([]inventory.Event, error) {
	work := p.workDir(j)
	all, whole, err := readEventLog(work)
	if err != nil {
		return nil, err
	}
	var add []inventory.Event
	if whole < 0 { // the earlier log's: written into the new one with the first events added
		add, whole = slices.Clone(all), 0
	}
	have := make(map[string]bool, len(all))
	for _, e := range all {
		have[e.ID] = true
	}
	n := len(add)
	for _, e := range evs {
		if !have[e.ID] {
			add, have[e.ID] = append(add, e), true
		}
	}
	if len(add) > n {
		if err := appendEvents(filepath.Join(work, premisLog), whole, add); err != nil {
			return nil, fmt.Errorf("PREMIS event log: %w", err)
		}
	}
	return append(all, add[n:]...), nil
}

// readEventLog reads a working folder's event log: its events, and the
// length of its whole lines. A last line without its newline is an append
// a crash cut short (its step is run again) and is left out; any other
// line that is not an event is an error naming it. A folder with only
// the earlier log (one array, rewritten whole: a job begun before an
// upgrade) gives its events, and whole -1.
func readEventLog(work string) (all []inventory.Event, whole int64, err error) {
	path := filepath.Join(work, premisLog)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		v1 := filepath.Join(work, premisLogV1)
		if data, err = os.ReadFile(v1); err == nil {
			if err := json.Unmarshal(data, &all); err != nil {
				return nil, 0, fmt.Errorf("PREMIS event log %s: %w", v1, err)
			}
			return all, -1, nil
		}
	}
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, 0, nil
	case err != nil:
		return nil, 0, err
	}
	for n := 1; len(data) > 0; n++ {
		line, rest, complete := bytes.Cut(data, []byte("\n"))
		if !complete {
			break // cut short
		}
		var e inventory.Event
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, 0, fmt.Errorf("PREMIS event log %s, line %d: %w", path, n, err)
		}
		all, whole, data = append(all, e), whole+int64(len(line))+1, rest
	}
	return all, whole, nil
}

// appendEvents appends evs, a line each, to the log at path after its
// first whole bytes (dropping an append cut short), and syncs it; the
// folder too when the log is new.
func appendEvents(path string, whole int64, evs []inventory.Event) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b) // a line each
	for _, e := range evs {
		if err := enc.Encode(e); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(b.Bytes(), whole)
	if err == nil {
		err = f.Truncate(whole + int64(b.Len()))
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && errors.Is(statErr, os.ErrNotExist) {
		err = durable.SyncDir(filepath.Dir(path))
	}
	return err
}

// premisXML is the object's PREMIS 3 description: its identifier, and the
// events of its ingest so far, each linked to the agent.
func premisXML(ark, agent string, evs []inventory.Event) []byte {
	type idOf struct {
		Type  string `xml:"objectIdentifierType"`
		Value string `xml:"objectIdentifierValue"`
	}
	type evID struct {
		Type  string `xml:"eventIdentifierType"`
		Value string `xml:"eventIdentifierValue"`
	}
	type link struct {
		Type  string `xml:"linkingAgentIdentifierType"`
		Value string `xml:"linkingAgentIdentifierValue"`
	}
	type linkObj struct {
		Type  string `xml:"linkingObjectIdentifierType"`
		Value string `xml:"linkingObjectIdentifierValue"`
	}
	type event struct {
		ID      evID      `xml:"eventIdentifier"`
		Type    string    `xml:"eventType"`
		At      string    `xml:"eventDateTime"`
		Detail  string    `xml:"eventDetailInformation>eventDetail"`
		Outcome string    `xml:"eventOutcomeInformation>eventOutcome"`
		Agent   link      `xml:"linkingAgentIdentifier"`
		Objects []linkObj `xml:"linkingObjectIdentifier"`
	}
	type doc struct {
		XMLName xml.Name `xml:"premis"`
		NS      string   `xml:"xmlns,attr"`
		XSI     string   `xml:"xmlns:xsi,attr"`
		Version string   `xml:"version,attr"`
		Object  struct {
			Type string `xml:"xsi:type,attr"`
			ID   idOf   `xml:"objectIdentifier"`
		} `xml:"object"`
		Events []event `xml:"event"`
		Agent  struct {
			ID   link   `xml:"agentIdentifier"`
			Name string `xml:"agentName"`
			Type string `xml:"agentType"`
		} `xml:"agent"`
	}
	d := doc{NS: "http://www.loc.gov/premis/v3", XSI: "http://www.w3.org/2001/XMLSchema-instance", Version: "3.0"}
	d.Object.Type = "intellectualEntity"
	d.Object.ID = idOf{"ARK", ark}
	for _, e := range evs {
		objs := []linkObj{{"ARK", ark}}
		if e.File != "" {
			objs = append(objs, linkObj{"local", e.File})
		}
		d.Events = append(d.Events, event{ID: evID{"UUID", e.ID}, Type: e.Type, At: e.At.Format(time.RFC3339Nano),
			Detail: e.Detail, Outcome: e.Outcome, Agent: link{"local", e.Agent}, Objects: objs})
	}
	d.Agent.ID, d.Agent.Name, d.Agent.Type = link{"local", agent}, agent, "software"
	out, _ := xml.MarshalIndent(d, "", "  ") // only strings: cannot fail
	return append([]byte(xml.Header), append(out, '\n')...)
}
