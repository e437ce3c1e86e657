package handlers

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/internal/durable"
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
	premisLog  = "premis-events.json"
	premisFile = "mrt-premis.xml"
)

// eventNS scopes the ids of ingestq's events.
var eventNS = uuid.MustParse("6f1e9a52-3c1b-4b9e-9d59-0d6b5c3e7a11")

// event makes an event of job jid about key (a file name, a copy's target,
// or "" for the object).
func (p *Pipeline) event(jid, typ, file, key, detail string) inventory.Event {
	return inventory.Event{ID: eventID(jid, typ, file, key), Type: typ, At: p.q.Now().UTC().Truncate(time.Microsecond),
		Outcome: inventory.OutcomeSuccess, Agent: p.cfg.Agent, Detail: detail, File: file}
}

// eventID is the id of job jid's event of type typ about file or key.
func eventID(jid, typ, file, key string) string {
	return uuid.NewSHA1(eventNS, []byte(strings.Join([]string{jid, typ, file, key}, "\x00"))).String()
}

// logEvents adds evs to the job's event log, keeping any event already
// there, and returns the whole log.
func (p *Pipeline) logEvents(j *queue.Job, evs ...inventory.Event) ([]inventory.Event, error) {
	path := filepath.Join(p.workDir(j), premisLog)
	var all []inventory.Event
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(data, &all); err != nil {
			return nil, fmt.Errorf("PREMIS event log %s: %w", path, err)
		}
	case !errors.Is(err, os.ErrNotExist):
		return nil, err
	}
	have := make(map[string]bool, len(all))
	for _, e := range all {
		have[e.ID] = true
	}
	added := false
	for _, e := range evs {
		if !have[e.ID] {
			all, added, have[e.ID] = append(all, e), true, true
		}
	}
	if added {
		data, _ := json.MarshalIndent(all, "", " ")
		if err := durable.WriteFile(path, data); err != nil {
			return nil, err
		}
	}
	return all, nil
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
