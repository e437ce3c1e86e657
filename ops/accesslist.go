package ops

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ingestq/ingestq/reactor/queue"
)

// ListAccess lists the access requests of both queues, oldest first in
// each, the small queue first; those in state only when it is given. It
// reads only the requests it lists (and, with a state, each status).
func (s *Service) ListAccess(ctx context.Context, state queue.State) ([]AccessView, []error, error) {
	out := []AccessView{}
	var problems []error
	for _, name := range queue.AccessQueues {
		w, err := s.walkAccess(ctx, name, state, "", false)
		if err != nil {
			return nil, nil, err
		}
		for {
			a, err := w.next(ctx, &problems)
			if err != nil {
				return nil, nil, err
			}
			if a == nil {
				break
			}
			out = append(out, accessView(a))
		}
	}
	return out, problems, nil
}

// AccessPage is a page of at most n access requests of both queues,
// newest first (those in state only when it is given), starting after
// the requests that after names (a previous page's next; "" for the first
// page). next is where the page after it starts ("" on the last page).
// The two queues are merged by when ZooKeeper made each request: within a
// queue that is the order of the names, so a page reads only the requests
// it shows and the next one of each queue.
func (s *Service) AccessPage(ctx context.Context, state queue.State, after string, n int) (rows []AccessView, next string, problems []error, err error) {
	last, err := parseAccessPlace(after)
	if err != nil {
		return nil, "", nil, err
	}
	walks := make([]*accessWalk, len(queue.AccessQueues))
	for i, name := range queue.AccessQueues {
		if walks[i], err = s.walkAccess(ctx, name, state, last[name], true); err != nil {
			return nil, "", nil, err
		}
	}
	heads := make([]*queue.Access, len(walks))
	rows = []AccessView{}
	for {
		pick := -1
		for i, w := range walks {
			if heads[i] == nil {
				if heads[i], err = w.next(ctx, &problems); err != nil {
					return nil, "", nil, err
				}
			}
			if heads[i] != nil && (pick < 0 || newer(heads[i], heads[pick])) {
				pick = i
			}
		}
		switch {
		case pick < 0:
			return rows, "", problems, nil
		case len(rows) == n:
			return rows, accessPlace(last), problems, nil
		}
		rows = append(rows, accessView(heads[pick]))
		last[heads[pick].Queue], heads[pick] = heads[pick].ID, nil
	}
}

// newer tells whether a was made after b; made at once (ZooKeeper's clock
// counts milliseconds), the larger ref first.
func newer(a, b *queue.Access) bool {
	return cmp.Or(a.Made.Compare(b.Made), strings.Compare(a.Ref(), b.Ref())) > 0
}

// parseAccessPlace reads where a page of requests starts: the last request
// of each queue that an earlier page showed, as refs separated by a space.
func parseAccessPlace(after string) (map[string]string, error) {
	last := map[string]string{}
	for _, ref := range strings.Fields(after) {
		name, qid, ok := strings.Cut(ref, "/")
		if !ok || checkAccessRef(ref) != nil || last[name] != "" {
			return nil, invalid(fmt.Sprintf("after %q: want the last request shown of each queue (small/qid… large/qid…)", after))
		}
		last[name] = qid
	}
	return last, nil
}

// accessPlace is the after of a page that starts below the requests last
// names.
func accessPlace(last map[string]string) string {
	var refs []string
	for _, name := range queue.AccessQueues {
		if last[name] != "" {
			refs = append(refs, name+"/"+last[name])
		}
	}
	return strings.Join(refs, " ")
}

// accessWalk goes through one access queue's requests in the order of
// their names and reads only those it hands out: with a state, each
// request's status alone first, the rest only when it is in that state.
type accessWalk struct {
	s     *Service
	name  string
	qids  []string // those still to walk, in the walk's order
	state queue.State
}

// walkAccess walks access queue name, oldest first or newest first; a
// walk newest first starts below the request below ("": at the newest).
func (s *Service) walkAccess(ctx context.Context, name string, state queue.State, below string, newest bool) (*accessWalk, error) {
	qids, err := s.Q.AccessQIDs(ctx, name)
	if err != nil {
		return nil, err
	}
	if newest {
		slices.Reverse(qids)
		if below != "" {
			qids = slices.DeleteFunc(qids, func(qid string) bool { return qid >= below })
		}
	}
	return &accessWalk{s: s, name: name, qids: qids, state: state}, nil
}

// next reads the walk's next request (nil: none is left). One that
// cannot be read is a problem, and the walk goes on; one gone since the
// listing is passed over.
func (w *accessWalk) next(ctx context.Context, problems *[]error) (*queue.Access, error) {
	for len(w.qids) > 0 {
		qid := w.qids[0]
		w.qids = w.qids[1:]
		if w.state != "" {
			states, err := w.s.Q.AccessStates(ctx, w.name, []string{qid})
			if err != nil {
				return nil, err
			}
			if st, ok := states[qid]; ok && st != w.state {
				continue // a status that does not read: the request's read says why
			}
		}
		a, err := w.s.Q.LoadAccess(ctx, w.name, qid)
		switch {
		case errors.Is(err, queue.ErrNotFound):
		case err != nil:
			*problems = append(*problems, err)
		case w.state == "" || a.State() == w.state:
			return a, nil
		}
	}
	return nil, nil
}
