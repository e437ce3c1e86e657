package cli

import (
	"encoding/json"
	"maps"

	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
)

// workRemoved is what became of a Completed job's working folder: Notify
// removes it (a daemon's sweep at its start removes one left behind), and
// with it what the job's hand-off URLs served.
const workRemoved = "removed when the job completed"

// workArea is a record of a job's (its configuration, its store or its
// inventory node) for show. Once the job is Completed, its member key, when
// it names the job's working folder or a hand-off URL into it, says in text
// that it is removed (a user following it would get a 404), and in JSON is
// as the node has it. Any other record is v itself.
func workArea(j *queue.Job, v any, key string) any {
	if j.State() != queue.Completed {
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
	m[key] = removedValue(s)
	return m
}

// removedValue is a value a node still holds that names something gone:
// text says it is removed, JSON gives it as the node has it.
type removedValue string

func (removedValue) String() string { return workRemoved }

func (r removedValue) MarshalJSON() ([]byte, error) { return json.Marshal(string(r)) }
