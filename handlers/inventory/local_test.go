package inventory

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestLocalConformance(t *testing.T) {
	runConformance(t, func(t *testing.T) Inventory { l, _ := openTemp(t); return l })
}

// Versions, which only Local has, lists what Record wrote.
func TestLocalVersions(t *testing.T) {
	ctx := context.Background()
	l, _ := openTemp(t)
	r := record(arkA, 1, "one", "loc-2", "loc-1")
	mustRecord(t, l, r)
	mustRecord(t, l, record(arkB, 1, "bee"))

	vs, err := l.Versions(ctx, arkA)
	if err != nil || len(vs) != 1 || !reflect.DeepEqual(vs[0], mustNormalize(t, r)) {
		t.Fatalf("Versions = %+v, %v; want the record", vs, err)
	}
	if vs, err := l.Versions(ctx, "ark:/99999/none"); err != nil || len(vs) != 0 {
		t.Fatalf("Versions of an unknown ark = %v, %v", vs, err)
	}
}

func TestReopenKeepsData(t *testing.T) {
	ctx := context.Background()
	l, path := openTemp(t)
	r := record(arkA, 1, "one", "loc-1")
	r.Events = []Event{event(EventIngestion, 1)}
	mustRecord(t, l, r)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, err := OpenLocal(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if ark, ok, err := l2.LookupLocalID(ctx, profile, "loc-1"); err != nil || !ok || ark != arkA {
		t.Fatalf("after reopening, lookup = %q, %v, %v", ark, ok, err)
	}
	if d := mustObject(t, l2, arkA); len(d.Versions) != 1 || !reflect.DeepEqual(d.Versions[0], mustNormalize(t, r)) {
		t.Fatalf("after reopening, Object = %+v", d)
	}
}

func TestSecondOpenIsLocked(t *testing.T) {
	_, path := openTemp(t)
	second, err := OpenLocalTimeout(path, 50*time.Millisecond)
	if err == nil {
		second.Close()
		t.Fatal("a second open of a held database succeeded")
	}
	want := fmt.Sprintf("inventory database %s is locked by another process", path)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), want) {
		t.Fatalf("second open: %v, want %q", err, want)
	}
}
