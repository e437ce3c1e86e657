package handlers_test

import (
	"testing"

	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/internal/s3test"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// Processing's check of names against each target (checkFits) asks a
// target it has open nothing when every name fits at any version, and so
// does not name it to the reactor: a Processing that succeeded while the
// S3 replica was stopped told the reactor the replica answered, ending its
// outage (the jobs waiting for it at Storing let go to find it out again)
// with each job processed. Once the replica is back, both jobs complete.
func TestProcessingDoesNotEndAReplicasOutage(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t) // not parallel: the AWS_* variables are the process's
	replica := srv.URL(srv.Addr, "ocfl")
	stop := freezer(t, srv.Stop) // before the first Storing, its stores open
	obs := processedWatch{clearedBackEnds{watchBackEnds(t), make(chan string, 100)}, make(chan struct{}, 10)}
	r := newRig(t, nil, withStorage(t.TempDir(), replica),
		func(_ *handlers.Config, rc *reactor.Config) { rc.Observer = obs },
		beforeStep(queue.Storing, func(*queue.Job) { stop() }))
	first := r.submitObject("/first.checkm", object{"a.txt": []byte("alpha\n")})
	obs.waited(t, queue.Storing, 1, "storage target "+replica)
	second := r.submitObject("/second.checkm", object{"b.txt": []byte("beta\n")})
	for range 2 { // both moved on from Processing, the second with the replica stopped
		<-obs.processed
	}
	select {
	case what := <-obs.cleared:
		t.Errorf("with the replica stopped, the daemon found %q back: a Processing that asked it nothing ended its outage", what)
	default:
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	for _, b := range []*queue.Batch{first, second} {
		if b := r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
			t.Fatalf("batch %s (%s) once the replica is back; want Completed", b.State(), b.Status.Message)
		}
	}
}

// processedWatch is clearedBackEnds that also says when a job moved on
// from Processing.
type processedWatch struct {
	clearedBackEnds
	processed chan struct{}
}

func (o processedWatch) Moved(kind string, from queue.State, outcome string) {
	if kind == "job" && from == queue.Processing && outcome == queue.Storing.Folder() {
		o.processed <- struct{}{}
	}
}
