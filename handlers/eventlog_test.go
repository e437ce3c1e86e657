package handlers

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/handlers/internal/durable"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/reactor/queue"
)

func ev(id string) inventory.Event { return inventory.Event{ID: id, Type: "t", Detail: "d " + id} }

func ids(evs []inventory.Event) string {
	var s []string
	for _, e := range evs {
		s = append(s, e.ID)
	}
	return strings.Join(s, ",")
}

// logEvents appends each step's new events to the log, a line each, and
// keeps an event already there: the log is the events of every step once.
func TestEventLogAppends(t *testing.T) {
	p, j := &Pipeline{work: t.TempDir()}, &queue.Job{ID: "jid0000000001"}
	for _, step := range [][]inventory.Event{{ev("a"), ev("b")}, {ev("b"), ev("c")}, {ev("a")}} {
		if _, err := p.logEvents(j, step...); err != nil {
			t.Fatal(err)
		}
	}
	all, err := p.logEvents(j)
	if err != nil || ids(all) != "a,b,c" {
		t.Fatalf("log %s (%v), want a,b,c", ids(all), err)
	}
	data, err := os.ReadFile(filepath.Join(p.work, j.ID, premisLog))
	if err != nil || strings.Count(string(data), "\n") != 3 {
		t.Fatalf("log file %q (%v), want 3 lines", data, err)
	}
}

// An append that a crash cut short is dropped and written over by the next
// step's; a line in the middle that is not an event is an error naming it.
func TestEventLogCutShortAndCorrupt(t *testing.T) {
	p, j := &Pipeline{work: t.TempDir()}, &queue.Job{ID: "jid0000000001"}
	if _, err := p.logEvents(j, ev("a")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(p.work, j.ID, premisLog)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"id":"b","ty`); err != nil { // cut short
		t.Fatal(err)
	}
	f.Close()
	all, err := p.logEvents(j, ev("c"))
	if err != nil || ids(all) != "a,c" {
		t.Fatalf("after a cut-short append: %s (%v), want a,c", ids(all), err)
	}
	if all, err = p.logEvents(j); err != nil || ids(all) != "a,c" {
		t.Fatalf("read again: %s (%v), want a,c", ids(all), err)
	}

	if err := os.WriteFile(path, []byte("{\"id\":\"a\"}\nnot json\n{\"id\":\"c\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := p.logEvents(j, ev("d")); err == nil || !strings.Contains(err.Error(), path+", line 2") {
		t.Fatalf("corrupt line: %v, want an error naming %s, line 2", err, path)
	}
}

// A job begun before the log was appended to has the earlier log, one
// array: its events are kept, and the first new events carry them over.
func TestEventLogFromTheEarlierArray(t *testing.T) {
	p, j := &Pipeline{work: t.TempDir()}, &queue.Job{ID: "jid0000000001"}
	old, _ := json.Marshal([]inventory.Event{ev("a"), ev("b")})
	if err := os.MkdirAll(filepath.Join(p.work, j.ID), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.work, j.ID, premisLogV1), old, 0o644); err != nil {
		t.Fatal(err)
	}
	if all, err := p.logEvents(j, ev("b"), ev("c")); err != nil || ids(all) != "a,b,c" {
		t.Fatalf("first step after the upgrade: %s (%v), want a,b,c", ids(all), err)
	}
	if all, err := p.logEvents(j, ev("d")); err != nil || ids(all) != "a,b,c,d" {
		t.Fatalf("the step after: %s (%v), want a,b,c,d", ids(all), err)
	}
}

// BenchmarkEventLog: a step adding two events to the log of a 1,000-file
// object (its digests' events), as logEvents appends them, beside the log
// rewritten whole and durably (a new file renamed into place), as before
// decision 220.
//
//	go test -run '^$' -bench EventLog -benchtime 200x -count 3 ./handlers/
func BenchmarkEventLog(b *testing.B) {
	start := make([]inventory.Event, 1000)
	for i := range start {
		start[i] = inventory.Event{ID: fmt.Sprint("e", i), Type: inventory.EventMessageDigestCalculation,
			File: fmt.Sprintf("producer/d%02d/f%05d.bin", i/100, i), Detail: "sha256 " + strings.Repeat("0", 64)}
	}
	step := func(i int) []inventory.Event {
		return []inventory.Event{ev(fmt.Sprint("s", i, "a")), ev(fmt.Sprint("s", i, "b"))}
	}
	b.Run("append", func(b *testing.B) {
		p, j := &Pipeline{work: b.TempDir()}, &queue.Job{ID: "jid0000000001"}
		if _, err := p.logEvents(j, start...); err != nil {
			b.Fatal(err)
		}
		for i := range b.N {
			if _, err := p.logEvents(j, step(i)...); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("rewrite", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), premisLogV1)
		data, _ := json.MarshalIndent(start, "", " ")
		if err := durable.WriteFile(path, data); err != nil {
			b.Fatal(err)
		}
		for i := range b.N {
			var all []inventory.Event
			data, err := os.ReadFile(path)
			if err == nil {
				err = json.Unmarshal(data, &all)
			}
			if err != nil {
				b.Fatal(err)
			}
			data, _ = json.MarshalIndent(append(all, step(i)...), "", " ")
			if err := durable.WriteFile(path, data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
