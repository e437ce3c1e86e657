package handlers

import (
	"context"
	"os"

	"github.com/ingestq/ingestq/handlers/notify"
	"github.com/ingestq/ingestq/reactor"
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

// notify calls the profile's callback (the HTTP client retries; a callback
// still failing after that fails the job), then forgets the job's minting
// record and removes its working folder: the object is stored and recorded.
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
		if err := notify.Callback(ctx, p.http.HTTP(), prof.Callback, cb); err != nil {
			if ctx.Err() != nil {
				return reactor.Result{}, ctx.Err()
			}
			return reactor.Result{}, reactor.Fatal(err) // "callback URL: …"
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
