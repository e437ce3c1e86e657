package handlers

import (
	"context"
	"errors"
	"fmt"

	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/reactor"
)

// givenOwn refuses, as Fatal, a depositor's primary identifier that names
// an object the inventory records in another profile: Storing would write
// a version into that object (profiles may share a storage root) that
// Recording then refuses, leaving it unrecorded on top of the other
// profile's versions, whose next deposit fails on it. The message does not
// name the other profile: a depositor scoped to prof must not learn it.
func (p *Pipeline) givenOwn(ctx context.Context, inv inventory.Inventory, prof *profile.Profile, ark string) error {
	rec, err := inv.Latest(ctx, ark)
	switch {
	case errors.Is(err, inventory.ErrNotFound):
		return nil // a new object under the depositor's ARK
	case err != nil:
		return p.inventoryOut(prof, fmt.Errorf("primary identifier %s: inventory lookup: %w", ark, err))
	}
	return ownObject(ark, rec, prof)
}

// ownObject refuses, as Fatal, object ark whose latest record (rec) is of
// another profile than prof, not naming it. Storing asks it again under
// the object's storage lock: two profiles' deposits giving one new ARK at
// once both pass givenOwn, and the later would write on top of the
// earlier's version, which its Recording then refuses.
func ownObject(ark string, rec inventory.Record, prof *profile.Profile) error {
	if rec.Profile == prof.Name {
		return nil
	}
	return reactor.Fatal(fmt.Errorf("primary identifier %s is an object of another profile: a deposit to profile %s adds versions only to its own objects; "+
		"nothing was stored (give no primary identifier to have an ARK minted, or deposit to the object's profile)", ark, prof.Name))
}
