package views

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// Waited is how long the job's last run waited from when it was due (its
// run_at, or its creation if later) to when its handler started: in the
// queue, then claimed in a worker's buffer. ok is false for a job that
// has not started.
func Waited(j *jobs.Job) (d time.Duration, ok bool) {
	if j.StartedAt == nil || j.Status.Waiting() {
		return 0, false
	}
	due := j.RunAt
	if j.CreatedAt.After(due) {
		due = j.CreatedAt
	}
	return max(j.StartedAt.Sub(due), 0), true
}

// durationKeys are attributes that slog writes as a time.Duration, in
// nanoseconds: shown as a duration.
var durationKeys = map[string]bool{"took": true, "duration": true, "elapsed": true, "drain": true, "retry_in": true,
	"drain_timeout": true, "wait": true}

// attrValue prints one attribute's value: durations (a key of
// durationKeys, or one ending in _ms) in a readable unit, whole numbers
// without an exponent.
func attrValue(k string, v any) string {
	f, ok := v.(float64)
	if !ok {
		return fmt.Sprint(v)
	}
	switch {
	case durationKeys[k]:
		return Took(time.Duration(f))
	case strings.HasSuffix(k, "_ms"):
		return Took(time.Duration(f * float64(time.Millisecond)))
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// logRuns returns which run of a job a log line written at a time belongs
// to, numbered as the job page's attempts are (#1, #2, …): a replayed job
// starts each run at attempt 1, so the attempt alone cannot tell them
// apart. A run owns the lines written after the one before it ended, up
// to its own end (its claim line comes before its start); lines after the
// last run ended belong to the next one.
func logRuns(runs []domain.Execution) func(time.Time) int {
	return func(at time.Time) int {
		for _, r := range runs {
			if r.FinishedAt == nil || !at.After(*r.FinishedAt) {
				return r.Seq
			}
		}
		if len(runs) == 0 {
			return 1
		}
		return runs[len(runs)-1].Seq + 1
	}
}
