package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ingestq/ingestq/handlers/notify"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// Callback is the JSON a profile's callback receives when a job completes.
type Callback struct {
	Status    string   `json:"status"` // "completed"
	JobID     string   `json:"job_id"`
	BatchID   string   `json:"batch_id"`
	BatchUUID string   `json:"batch_uuid,omitempty"`
	Profile   string   `json:"profile"`
	ARK       string   `json:"ark"`
	LocalIDs  []string `json:"local_ids,omitempty"`
	Mode      string   `json:"mode,omitempty"` // add or update
	// Unchanged says that the deposit changed nothing: Version of the
	// object, stored by an earlier deposit, already held its content, and
	// no version was made.
	Unchanged bool `json:"unchanged,omitempty"`
	Version   int  `json:"version,omitempty"`
}

// notify calls the profile's callback, then forgets the job's minting
// record and removes its working folder: the object is stored and recorded.
// A callback failing for a while (5xx, 429, 408, a network error, no answer
// in time) is retried by the HTTP client, then by the reactor with its
// attempts and backoff; one refused for good (another 4xx, a bad URL)
// fails the job at once. Either way the job's message says that the object
// is stored and recorded and that a requeue only sends the callback again.
// Run again after a crash, the callback is sent again: at least once.
func (p *Pipeline) notify(ctx context.Context, s *reactor.Step) (reactor.Result, error) {
	j := s.Job
	prof, ark, err := p.identified(j)
	if err != nil {
		return reactor.Result{}, err
	}
	if prof.Callback != "" {
		cb := Callback{Status: "completed", JobID: j.ID, BatchID: j.BatchID, BatchUUID: j.Config.BatchUUID,
			Profile: prof.Name, ARK: ark, LocalIDs: j.Identifiers.LocalIDs}
		if j.Store != nil {
			cb.Mode = j.Store.Mode
		}
		if j.Inventory != nil && j.Inventory.Unchanged {
			cb.Unchanged, cb.Version = true, j.Inventory.Version
		}
		if err := notify.Callback(ctx, p.operator.HTTP(), prof.Callback, cb); err != nil {
			if ctx.Err() != nil {
				return reactor.Result{}, ctx.Err()
			}
			err = &undeliveredError{err: err, job: j.ID, ark: ark, version: storedNumber(p.workDir(j), j)}
			if notify.Permanent(err) {
				return reactor.Result{}, reactor.Fatal(err)
			}
			return reactor.Result{}, err
		}
	}
	if err := p.minter.Forget(ctx, j.ID); err != nil {
		p.log.Warn("notify: minting record not removed", "job", j.ID, "err", err)
	}
	if err := os.RemoveAll(p.workDir(j)); err != nil {
		p.log.Warn("notify: working folder not removed", "job", j.ID, "err", err)
	}
	res := reactor.Result{Attrs: map[string]any{"ark": ark, "callback": prof.Callback != ""}}
	if note := unchangedNote(j); note != "" {
		res.Change.Message = note // the Completed job's message
	}
	return res, nil
}

// undeliveredError is a callback that failed after the object was stored
// and recorded. Its message says so, and what to do, so that nobody
// deposits the object again: "callback URL: HTTP 500 … (5 requests), body
// "…"; the object ark:/… IS stored and recorded (version 1): only its
// callback failed. …".
type undeliveredError struct {
	err      error
	job, ark string
	version  int // 0: not known here
}

func (e *undeliveredError) Error() string {
	v := ""
	if e.version > 0 {
		v = fmt.Sprintf(" (version %d)", e.version)
	}
	return fmt.Sprintf("%v; the object %s IS stored and recorded%s: only its callback failed. "+
		"Do not deposit it again: `ingestq requeue %s` (or POST /api/v1/jobs/%s/requeue) sends the callback again and redoes nothing else",
		e.err, e.ark, v, e.job, e.job)
}

func (e *undeliveredError) Unwrap() error { return e.err }

// storedNumber is the number of the object's version the job stored or
// found: the inventory node's for a deposit that changed nothing, else the
// stored version's record in the working folder; 0 when neither is here
// (Storing and Recording ran on another host).
func storedNumber(work string, j *queue.Job) int {
	if j.Inventory != nil && j.Inventory.Version > 0 {
		return j.Inventory.Version
	}
	var kept storedVersion
	data, err := os.ReadFile(filepath.Join(work, storedRecord))
	if err != nil || json.Unmarshal(data, &kept) != nil {
		return 0
	}
	return kept.Number
}
