package metrics

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/reactor/stalled"
	"github.com/ingestq/ingestq/zkwatch"
)

// scanTimeout bounds the queue's reading at a scrape (Prometheus gives up
// on a scrape after 10 s by default).
const scanTimeout = 8 * time.Second

var (
	jobsDesc = prometheus.NewDesc("ingestq_jobs",
		"Jobs in the queue (every daemon's view of the whole queue: aggregate with max, not sum), by state and profile.",
		[]string{"state", "profile"}, nil)
	oldestDesc = prometheus.NewDesc("ingestq_oldest_job_age_seconds",
		"How long the job longest in each pipeline state (and Held) has been there; 0 when none is.",
		[]string{"state"}, nil)
	stalledDesc = prometheus.NewDesc("ingestq_stalled_jobs",
		"Jobs in each state past its --stalled-after threshold (ingestq ls jobs --stalled says why).",
		[]string{"state"}, nil)
)

// queueView reads the queue's numbers at each scrape. Listing the state
// folders is a few requests whatever the queue's size; what a listing does
// not say is read once and kept: a job's profile (which never changes), and
// when each ref was made (a ref's name is fixed while the job stays). Only
// the jobs that may count as stalled, and each state's oldest, are read
// again at each scrape: a job that left a state and came back between two
// scrapes has a new ref under the same name.
type queueView struct {
	q       *queue.Queue
	session *zkwatch.Session
	th      stalled.Thresholds
	log     *slog.Logger

	mu      sync.Mutex           // one scrape reads at a time
	profile map[string]string    // jid → profile, of the jobs listed at the last scrape
	entered map[string]time.Time // "folder/ref" → when it was made, of the refs listed at the last scrape
}

func newQueueView(q *queue.Queue, s *zkwatch.Session, th stalled.Thresholds, log *slog.Logger) *queueView {
	return &queueView{q: q, session: s, th: th, log: log, profile: map[string]string{}, entered: map[string]time.Time{}}
}

func (v *queueView) Describe(ch chan<- *prometheus.Desc) {
	ch <- jobsDesc
	ch <- oldestDesc
	ch <- stalledDesc
}

// Collect reads the queue and sends its numbers. While ZooKeeper is away
// they are left out (ingestq_zookeeper_connected says why, and the session
// logs the outage); a read that fails is logged, and they are left out.
func (v *queueView) Collect(ch chan<- prometheus.Metric) {
	if v.q == nil || v.session != nil && v.session.State() != zk.StateHasSession {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), scanTimeout)
	defer cancel()
	v.mu.Lock()
	defer v.mu.Unlock()
	snap, err := v.scan(ctx, time.Now())
	if err != nil {
		v.log.Warn("metrics: the queue could not be read; its numbers are left out of this scrape", "err", err)
		return
	}
	for k, n := range withZeros(snap.jobs) {
		ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(n), k.state, cmpProfile(k.profile))
	}
	for _, s := range stalled.States {
		ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, snap.oldest[s].Seconds(), s.Folder())
		ch <- prometheus.MustNewConstMetric(stalledDesc, prometheus.GaugeValue, float64(snap.stalled[s]), s.Folder())
	}
}

// cmpProfile labels jobs with no profile.
func cmpProfile(p string) string {
	if p == "" {
		return "none"
	}
	return p
}

type stateProfile struct{ state, profile string }

// snapshot is one scrape's numbers.
type snapshot struct {
	jobs    map[stateProfile]int
	oldest  map[queue.State]time.Duration
	stalled map[queue.State]int
}

// scan lists every job state folder and works out the numbers.
func (v *queueView) scan(ctx context.Context, now time.Time) (snapshot, error) {
	snap := snapshot{jobs: map[stateProfile]int{}, oldest: map[queue.State]time.Duration{}, stalled: map[queue.State]int{}}
	listed := map[queue.State][]string{}
	for _, s := range queue.JobMachine.States {
		refs, _, err := v.q.Refs(ctx, s) // names that are no refs are `ingestq check`'s business
		if err != nil {
			return snap, err
		}
		listed[s] = refs
	}
	if err := v.readProfiles(ctx, listed); err != nil {
		return snap, err
	}
	for s, refs := range listed {
		for _, ref := range refs {
			snap.jobs[stateProfile{s.Folder(), v.profile[jidOf(ref)]}]++
		}
	}
	if err := v.readEntered(ctx, listed, now); err != nil {
		return snap, err
	}
	for _, s := range stalled.States {
		for _, ref := range listed[s] {
			at, ok := v.entered[s.Folder()+"/"+ref]
			if !ok {
				continue // gone since the listing
			}
			if v.th.Over(s, at, now) {
				snap.stalled[s]++
			}
			snap.oldest[s] = max(snap.oldest[s], now.Sub(at))
		}
	}
	return snap, nil
}

// readProfiles reads the profiles of the jobs seen for the first time and
// forgets those of jobs no longer listed.
func (v *queueView) readProfiles(ctx context.Context, listed map[queue.State][]string) error {
	seen := map[string]bool{}
	var missing []string
	for _, refs := range listed {
		for _, ref := range refs {
			jid := jidOf(ref)
			seen[jid] = true
			if _, ok := v.profile[jid]; !ok {
				missing = append(missing, jid)
			}
		}
	}
	got, err := v.q.JobProfiles(ctx, missing)
	if err != nil {
		return err
	}
	for jid := range v.profile {
		if !seen[jid] {
			delete(v.profile, jid)
		}
	}
	for jid, p := range got {
		v.profile[jid] = p
	}
	return nil
}

// readEntered keeps when each ref of the states a job can stall in was
// made: new refs are read, and so are, again, the refs that would count
// as stalled and each state's oldest, which a job that left and came back
// since the last scrape would show too old.
func (v *queueView) readEntered(ctx context.Context, listed map[queue.State][]string, now time.Time) error {
	keep := map[string]bool{}
	for _, s := range stalled.States {
		var read []string
		var oldest string
		for _, ref := range listed[s] {
			key := s.Folder() + "/" + ref
			keep[key] = true
			at, ok := v.entered[key]
			if !ok || v.th.Over(s, at, now) {
				read = append(read, ref)
			} else if oldest == "" || at.Before(v.entered[s.Folder()+"/"+oldest]) {
				oldest = ref
			}
		}
		if oldest != "" {
			read = append(read, oldest)
		}
		if err := v.reread(ctx, s, read); err != nil {
			return err
		}
	}
	for key := range v.entered {
		if !keep[key] {
			delete(v.entered, key)
		}
	}
	return nil
}

// reread reads when state s's refs were made, forgetting those gone.
func (v *queueView) reread(ctx context.Context, s queue.State, refs []string) error {
	if len(refs) == 0 {
		return nil
	}
	times, err := v.q.RefTimes(ctx, s, refs)
	if err != nil {
		return err
	}
	for _, ref := range refs {
		key := s.Folder() + "/" + ref
		if at, ok := times[ref]; ok {
			v.entered[key] = at
		} else {
			delete(v.entered, key)
		}
	}
	return nil
}

func jidOf(ref string) string {
	_, jid, _ := strings.Cut(ref, "-")
	return jid
}

// withZeros adds a 0 for every job state with no job of a profile that has
// jobs elsewhere (profile none when the queue is empty), so that every
// state has its series, as the other gauges do, and a state emptied shows
// 0, not a series gone.
func withZeros(jobs map[stateProfile]int) map[stateProfile]int {
	profiles := map[string]bool{}
	for k := range jobs {
		profiles[k.profile] = true
	}
	if len(profiles) == 0 {
		profiles[""] = true
	}
	out := make(map[stateProfile]int, len(jobs))
	for _, s := range queue.JobMachine.States {
		for p := range profiles {
			out[stateProfile{s.Folder(), p}] = jobs[stateProfile{s.Folder(), p}]
		}
	}
	return out
}
