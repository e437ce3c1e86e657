package storage

import (
	"context"
	"testing"
)

// A storage service keeps the message of the version a Put makes and
// answers it, to the Put and to Latest, as OCFL does: a deposit then tells
// its own version from another's there too. A Put of the same content with
// another message makes no version and answers the version's own message.
// A client of the previous release sends none (what a Put without one
// sends): the version has none.
func TestServiceKeepsTheVersionMessage(t *testing.T) {
	ctx := context.Background()
	srv, l, _ := newServer(t)
	h := NewHTTP(srv.URL, testClient())
	files := sampleFiles(t)
	const msg = "ingestq: job jid0000000007 of batch bid0000000003, created 2026-11-27T13:00:00.123Z"

	v, err := h.Put(ctx, Object{ARK: testARK, Files: files, Message: msg})
	if err != nil || !v.Changed || v.Message != msg {
		t.Fatalf("put = %+v, %v; want a new version with message %q", v, err, msg)
	}
	again, err := h.Put(ctx, Object{ARK: testARK, Files: files, Message: "another deposit"})
	if err != nil || again.Changed || again.Message != msg {
		t.Fatalf("put of the same content = %+v, %v; want version 1 unchanged, its message %q", again, err, msg)
	}
	for what, store := range map[string]Store{"the service": h, "its folder": l} {
		if latest, err := store.Latest(ctx, testARK); err != nil || latest.Message != msg {
			t.Errorf("latest from %s: message %q (%v), want %q", what, latest.Message, err, msg)
		}
	}

	const old = "ark:/99999/fk4old"
	if v, err := h.Put(ctx, Object{ARK: old, Files: files}); err != nil || !v.Changed || v.Message != "" {
		t.Fatalf("put without a message = %+v, %v; want a new version without one", v, err)
	}
	if latest, err := h.Latest(ctx, old); err != nil || latest.Message != "" {
		t.Errorf("latest of a version put without a message: %q (%v), want none", latest.Message, err)
	}
}

// A service of the previous release keeps no message and answers none: a
// Put that sends one still stores, and the version's message is "", which
// the pipeline takes as "cannot say whose" (as before).
func TestServiceOfThePreviousReleaseAnswersNoMessage(t *testing.T) {
	ctx := context.Background()
	s := newFakeStorage(t) // keeps no message, as the previous release's service
	h := NewHTTP(s.srv.URL, testClient())
	files := sampleFiles(t)
	v, err := h.Put(ctx, Object{ARK: testARK, Files: files, Message: "ingestq: job jid0000000007 of batch bid0000000003"})
	if err != nil || !v.Changed || v.Message != "" {
		t.Fatalf("put = %+v, %v; want a new version, no message answered", v, err)
	}
	checkStored(t, s, testARK, files)
	if latest, err := h.Latest(ctx, testARK); err != nil || latest.Message != "" {
		t.Errorf("latest: message %q (%v), want none", latest.Message, err)
	}
	if _, violations := s.counts(); violations != "" {
		t.Errorf("the service saw a body it could not read: %s", violations)
	}
}
