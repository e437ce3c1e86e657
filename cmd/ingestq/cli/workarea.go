package cli

import (
	"encoding/json"
	"maps"

	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
)

// workArea is a record of a job's (its configuration, its store or its
// inventory node) for show. Once the job has ended (ops.Removed), its
// member key, when it names the job's working folder or a hand-off URL
// into it, says in text what became of the folder (a user following it
// would get a 404), and in JSON is as the node has it. Any other record is
// v itself.
func workArea(j *queue.Job, v any, key string) any {
	if !handlers.Ended(j.State()) {
		return v
	}
	m, ok := v.(map[string]any)
	if !ok {
		data, err := json.Marshal(v)
		if err != nil || json.Unmarshal(data, &m) != nil {
			return v
		}
	}
	s, _ := m[key].(string)
	if s == "" || !ops.InWorkArea(j, s) {
		return v
	}
	m = maps.Clone(m)
	m[key] = removedValue{value: s, text: ops.WorkGone(j)}
	return m
}

// removedValue is a value a node still holds that names something gone:
// text says what became of it, JSON gives it as the node has it.
type removedValue struct{ value, text string }

func (r removedValue) String() string { return r.text }

func (r removedValue) MarshalJSON() ([]byte, error) { return json.Marshal(r.value) }
