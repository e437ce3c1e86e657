package queue_test

import (
	"fmt"
	"testing"

	"github.com/ingestq/ingestq/reactor/queue"
)

// A batch handler cut short after writing some of a windowed batch's object
// chunks, but not its feed, writes the rest when it runs again: the chunks
// there stay, and the feed says every chunk is there.
func TestWriteObjectsAfterACutShortRun(t *testing.T) {
	r := newRun(t)
	b := r.acquiredBatch()
	objs := make([]queue.Object, 30)
	for i := range objs {
		objs[i] = queue.Object{Key: fmt.Sprintf("o%02d", i), Spec: queue.JobSpec{Priority: 5}}
	}
	_, err := r.q.WriteObjects(t.Context(), b, objs, 1) // 30 chunks
	r.ok(err)
	// The crash came before the feed was written (it is written last).
	r.ok(r.conn.Delete(r.q.Path("/batches/"+b.ID+"/feed"), -1))
	f, err := r.q.WriteObjects(t.Context(), b, objs, 1)
	if err != nil || f == nil || f.Chunks != 30 || f.Made != 0 {
		t.Fatalf("feed %+v, %v: want 30 chunks, none made", f, err)
	}
	got, err := r.q.ObjectChunk(t.Context(), b.ID, 29)
	if err != nil || len(got) != 1 || got[0].Key != "o29" {
		t.Fatalf("chunk 29: %+v, %v", got, err)
	}
}
