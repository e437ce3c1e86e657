package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/go-zookeeper/zk"
)

// Entry is one node of a tree listing.
type Entry struct {
	Path  string // relative to the queue root
	Value any    // nil, map[string]any, int64 or string
}

// Tree lists the nodes under rel ("" or "/" for the whole queue) the way the
// mrt-zk test harness does: every node with its value, in path order, but
// leaving out /zookeeper, the queue's fixed folders (Roots), any node that
// has children and no data, and, unless asked for, the sessions' own
// nodes (/ingestq/sessions). Values are decoded as JSON objects, then
// integers, else strings; empty data is nil.
func (q *Queue) Tree(ctx context.Context, rel string) ([]Entry, error) {
	rel = strings.TrimSuffix(rel, "/")
	start := q.Path(rel)
	if start == "" {
		start = "/"
	}
	skip := map[string]bool{}
	for _, r := range Roots() {
		skip[r] = true
	}
	var out []Entry
	var walk func(p string) error
	walk = func(p string) error {
		data, st, err := q.zk.get(ctx, p)
		if errors.Is(err, zk.ErrNoNode) {
			if p == start {
				return fmt.Errorf("%s: %w", q.rel(p), ErrNotFound)
			}
			return nil // deleted while listing
		}
		if err != nil {
			return err
		}
		r := q.rel(p)
		if (r == "/zookeeper" && q.root == "") || (r == sessionsDir && p != start) {
			return nil // ZooKeeper's own; the live sessions' own nodes (deleteOwn), not the queue's state
		}
		listed := p != "/" && r != "" && !skip[r] && !(st.NumChildren > 0 && len(data) == 0)
		if listed {
			out = append(out, Entry{Path: r, Value: DecodeValue(data)})
		}
		if st.NumChildren == 0 {
			return nil
		}
		kids, err := q.zk.children(ctx, p)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		slices.Sort(kids)
		for _, k := range kids {
			if err := walk(strings.TrimSuffix(p, "/") + "/" + k); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(start); err != nil {
		return nil, err
	}
	return out, nil
}

// DecodeValue reads node data as the listing shows it.
func DecodeValue(data []byte) any {
	if len(data) == 0 {
		return nil
	}
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '{' {
		var m map[string]any
		if json.Unmarshal(t, &m) == nil {
			return m
		}
	}
	if n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64); err == nil {
		return n
	}
	return string(data)
}
