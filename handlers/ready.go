package handlers

import (
	"context"
	"errors"
	"fmt"

	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/handlers/storage"
)

// probeARK names an object no repository has. Asking a back end for it is
// the cheapest question each must answer: a stat in a folder, a GET of one
// S3 key, one request to a service, one indexed query.
const probeARK = "ark:/99999/ingestq-readiness-probe"

// CheckStorage tells whether the daemon's storage targets (--storage, not a
// profile's own) answer; "not found" is an answer.
func (p *Pipeline) CheckStorage(ctx context.Context) error {
	var errs []error
	for i, t := range p.cfg.Storage {
		if _, _, err := p.inStorage(ctx, t, probeARK); err != nil {
			errs = append(errs, fmt.Errorf("target %d of %d: %w", i+1, len(p.cfg.Storage), err))
		}
	}
	return errors.Join(errs...)
}

// CheckInventory tells whether the daemon's inventory (--inventory, not a
// profile's own) answers; "not found" is an answer.
func (p *Pipeline) CheckInventory(ctx context.Context) error {
	_, err := inInventory(ctx, p.inventory, probeARK)
	return err
}

// CheckWork tells whether the working storage has room: at least
// --space-margin free. Below it, steps writing there find it full and wait
// (workFull), and Provisioning admits no job. It reads the disk as
// Provisioning does (Config.Space), so the two never disagree.
func (p *Pipeline) CheckWork(context.Context) error {
	free, _, err := p.cfg.Space(p.work)
	if err != nil {
		return fmt.Errorf("the working storage %s: %w", p.work, err)
	}
	if free < uint64(p.cfg.Margin) {
		return fmt.Errorf("the working storage %s has %d MiB free, below --space-margin (%d MiB): steps writing there wait for room",
			p.work, free>>20, p.cfg.Margin>>20)
	}
	return nil
}

// inStorage tells whether storage target holds ark, and its latest
// version; "not found" is an answer, any other error is not.
func (p *Pipeline) inStorage(ctx context.Context, target, ark string) (storage.Version, bool, error) {
	var v storage.Version
	st, err := p.store(ctx, target)
	if err == nil {
		v, err = st.Latest(ctx, ark)
	}
	if errors.Is(err, storage.ErrNotFound) {
		return v, false, nil
	}
	return v, err == nil, err
}

// inInventory tells whether inv holds ark; "not found" is an answer, any
// other error is not.
func inInventory(ctx context.Context, inv inventory.Inventory, ark string) (bool, error) {
	_, err := inv.Object(ctx, ark)
	if errors.Is(err, inventory.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}
