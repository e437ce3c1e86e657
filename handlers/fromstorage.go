package handlers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/handlers/storage"
)

// recordFromStorage is what a stored version says of its deposit, for the
// audit's repair (audit.Auditor.FromStorage): the job and batch its
// message names (depositMessage), and the local ids and ERC of the system
// files Processing wrote (writeSystemFiles). Only what storage holds: a
// version without them (an import's, another program's) has none.
func recordFromStorage(ctx context.Context, stored storage.Stored, v storage.Version) (inventory.Record, error) {
	var rec inventory.Record
	dep, _, err := depositIn(v)
	if err != nil {
		return rec, err
	}
	rec.Job, rec.Batch = dep.Job, dep.Batch
	dc, err := systemFile(ctx, stored, v, dcFile)
	if err != nil || dc == nil {
		return rec, err
	}
	var d dcRecord
	if err := xml.Unmarshal(dc, &d); err != nil {
		return rec, fmt.Errorf("version %d's %s: %w", v.Number, path.Join(systemDir, dcFile), err)
	}
	if len(d.Identifier) == 0 || d.Identifier[0] != v.ARK {
		return rec, fmt.Errorf("version %d's %s names identifiers %q, not %s first: not this object's", v.Number,
			path.Join(systemDir, dcFile), d.Identifier, v.ARK)
	}
	rec.LocalIDs = d.Identifier[1:]
	rec.Who, rec.What, rec.When = d.Creator, d.Title, d.Date
	erc, err := systemFile(ctx, stored, v, ercFile)
	if err != nil || erc == nil {
		return rec, err
	}
	// erc writes the ARK, the depositor's where unless it is the ARK, then
	// each local id as a where line: the depositor's is the one left.
	known := []string{ercValue(v.ARK)}
	for _, id := range rec.LocalIDs {
		known = append(known, ercValue(id))
	}
	sc := bufio.NewScanner(bytes.NewReader(erc))
	for sc.Scan() {
		if where, ok := strings.CutPrefix(sc.Text(), "where: "); ok && !slices.Contains(known, where) {
			rec.Where = where
			break
		}
	}
	return rec, nil
}

// maxSystemFile bounds what the repair reads of a system file: Processing
// writes a few hundred bytes, and the bytes are storage's, not trusted.
const maxSystemFile = 1 << 20

// systemFile reads system file name of version v; nil when the version
// has none.
func systemFile(ctx context.Context, stored storage.Stored, v storage.Version, name string) ([]byte, error) {
	name = path.Join(systemDir, name)
	if !slices.ContainsFunc(v.Files, func(f storage.File) bool { return f.Name == name }) {
		return nil, nil
	}
	rc, err := stored.Open(ctx, v.Number, name)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxSystemFile+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("version %d's %s: %w", v.Number, name, err)
	case len(data) > maxSystemFile:
		return nil, fmt.Errorf("version %d's %s is over %d bytes: not one Processing wrote", v.Number, name, maxSystemFile)
	}
	return data, nil
}
