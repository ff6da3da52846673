package domain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/flinthq/flint/jobs"
)

// Limits on queue settings: large enough for any real deployment, small
// enough that arithmetic on them cannot overflow.
const (
	MaxQueueConcurrency = 100_000
	MaxRateLimit        = 1_000_000
	MaxRatePeriod       = 86_400 // seconds
)

// RateLimit allows at most Limit starts per PeriodSeconds across every
// process. Tokens accrue evenly over the period, so starts are spread over
// it instead of coming in a burst at its start.
type RateLimit struct {
	Limit         int `json:"limit"`          // starts per period, at least 1
	PeriodSeconds int `json:"period_seconds"` // the period, in seconds
}

// Interval is the time one token takes to accrue.
func (r RateLimit) Interval() time.Duration {
	return time.Duration(float64(r.PeriodSeconds) * float64(time.Second) / float64(r.Limit))
}

// Burst is how many tokens the bucket holds at most: a fifth of the
// period's worth, at least one. Any window of one period therefore sees at
// most Limit plus Burst starts, and a queue idle for a while starts with a
// small burst rather than a whole period's worth; in exchange, a claim
// that comes up to a fifth of a period late loses no tokens.
func (r RateLimit) Burst() float64 { return max(1, float64(r.Limit)/5) }

// String is the limit as people write it: "20/s", "100 per 60 s".
func (r RateLimit) String() string {
	if r.PeriodSeconds == 1 {
		return fmt.Sprintf("%d/s", r.Limit)
	}
	return fmt.Sprintf("%d per %d s", r.Limit, r.PeriodSeconds)
}

// QueueSettings is what an operator has set for a queue. A queue nobody
// configured is unpaused and unlimited.
type QueueSettings struct {
	Name   string `json:"name"`
	Paused bool   `json:"paused"`
	// Concurrency caps the jobs of the queue running at once across every
	// process; nil means no cap.
	Concurrency *int `json:"concurrency"`
	// RateLimit caps starts per period across every process; nil means none.
	RateLimit *RateLimit `json:"rate_limit"`
	// PerKeyConcurrency caps the running jobs of each concurrency key and
	// makes claims rotate across keys; nil means neither.
	PerKeyConcurrency *int `json:"per_key_concurrency"`
	// Push, when set, makes Flint POST each job of the queue to an HTTP
	// endpoint instead of waiting for a worker; nil means workers take
	// them.
	Push      *PushTarget `json:"push"`
	UpdatedAt time.Time   `json:"updated_at,omitzero"`
	UpdatedBy string      `json:"updated_by,omitempty"`
}

// Limited reports whether any limit applies: claims of the queue then take
// the flow-controlled path.
func (q *QueueSettings) Limited() bool {
	return q.Concurrency != nil || q.RateLimit != nil || q.PerKeyConcurrency != nil
}

// Constrained reports whether claims of the queue cannot take the plain
// path: it is paused, limited, or pushed (workers never take its jobs).
func (q *QueueSettings) Constrained() bool { return q.Paused || q.Limited() || q.Push != nil }

// QueueInfo is a queue as the API and the Queues page show it: its
// settings and what it holds now.
type QueueInfo struct {
	QueueSettings
	// Counts holds the live jobs per state (states with none left out);
	// scheduled jobs waiting for a retry are counted apart, under
	// CountRetrying, not under scheduled.
	Counts map[jobs.State]int64 `json:"counts"`
	// OldestQueuedAt is the run time of the queued job that has waited
	// longest; OldestWaitSeconds is how long it has waited.
	OldestQueuedAt    *time.Time `json:"oldest_queued_at,omitempty"`
	OldestWaitSeconds float64    `json:"oldest_wait_seconds"`
	// Throughput counts runs finished per outcome over the last
	// ThroughputMinutes minutes; PerMinute is their rate.
	ThroughputMinutes int              `json:"throughput_minutes"`
	Throughput        map[string]int64 `json:"throughput"`
	PerMinute         float64          `json:"per_minute"`
	// RecentDeliveries are a push queue's latest pushes, newest first
	// (GET of one queue only).
	RecentDeliveries []PushDelivery `json:"recent_deliveries,omitempty"`
}

// QueuePatch is a change to a queue's limits. A nil Set* field leaves the
// setting alone; a set one with a nil value removes the limit.
type QueuePatch struct {
	// SetPush with a nil Push turns pushing off.
	SetPush              bool
	Push                 *PushConfig
	SetConcurrency       bool
	Concurrency          *int
	SetRateLimit         bool
	RateLimit            *RateLimit
	SetPerKeyConcurrency bool
	PerKeyConcurrency    *int
}

// Apply returns q with p applied.
func (p QueuePatch) Apply(q QueueSettings) QueueSettings {
	if p.SetConcurrency {
		q.Concurrency = p.Concurrency
	}
	if p.SetRateLimit {
		q.RateLimit = p.RateLimit
	}
	if p.SetPerKeyConcurrency {
		q.PerKeyConcurrency = p.PerKeyConcurrency
	}
	if p.SetPush {
		if p.Push == nil {
			q.Push = nil
		} else {
			t := PushTarget{}
			if q.Push != nil {
				t = *q.Push
			}
			t.URL, t.TimeoutSeconds, t.PausedAt, t.PausedReason, t.HeldUntil = p.Push.URL, p.Push.TimeoutSeconds, nil, "", nil
			q.Push = &t
		}
	}
	return q
}

// Changes lists the fields p sets, for the audit trail.
func (p QueuePatch) Changes() map[string]any {
	out := map[string]any{}
	if p.SetConcurrency {
		out["concurrency"] = p.Concurrency
	}
	if p.SetRateLimit {
		out["rate_limit"] = p.RateLimit
	}
	if p.SetPerKeyConcurrency {
		out["per_key_concurrency"] = p.PerKeyConcurrency
	}
	if p.SetPush {
		if p.Push == nil {
			out["push"] = nil
		} else {
			push := map[string]any{"url": p.Push.URL, "timeout_seconds": p.Push.TimeoutSeconds}
			if len(p.Push.Schemas) > 0 {
				push["schemas"] = slices.Sorted(maps.Keys(p.Push.Schemas))
			}
			out["push"] = push
		}
	}
	return out
}

var queuePatchFields = []string{"concurrency", "per_key_concurrency", "rate_limit", "push"}

// ParseQueuePatch decodes and checks the body of PATCH /api/v1/queues/{name}:
// a JSON object with any of concurrency, rate_limit and per_key_concurrency,
// each null to remove the limit. It returns a *ValidationError naming the
// field at fault.
func ParseQueuePatch(body []byte) (QueuePatch, error) {
	var p QueuePatch
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil || raw == nil {
		return p, jobs.Invalid("body", "must be a JSON object with any of %s", strings.Join(queuePatchFields, ", "))
	}
	for k := range raw {
		if !slices.Contains(queuePatchFields, k) {
			return p, jobs.Invalid(k, "is not a queue setting (known: %s)", strings.Join(queuePatchFields, ", "))
		}
	}
	if len(raw) == 0 {
		return p, jobs.Invalid("body", "changes nothing: give any of %s", strings.Join(queuePatchFields, ", "))
	}
	var err error
	if v, ok := raw["concurrency"]; ok {
		p.SetConcurrency = true
		if p.Concurrency, err = parseLimit("concurrency", v, MaxQueueConcurrency); err != nil {
			return p, err
		}
	}
	if v, ok := raw["per_key_concurrency"]; ok {
		p.SetPerKeyConcurrency = true
		if p.PerKeyConcurrency, err = parseLimit("per_key_concurrency", v, MaxQueueConcurrency); err != nil {
			return p, err
		}
	}
	if v, ok := raw["rate_limit"]; ok {
		p.SetRateLimit = true
		if p.RateLimit, err = parseRateLimit(v); err != nil {
			return p, err
		}
	}
	if v, ok := raw["push"]; ok {
		p.SetPush = true
		if p.Push, err = parsePush(v); err != nil {
			return p, err
		}
	}
	return p, nil
}

func isNull(v json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(v), []byte("null")) }

// parseLimit reads a positive whole number up to maxN, or null.
func parseLimit(field string, v json.RawMessage, maxN int) (*int, error) {
	if isNull(v) {
		return nil, nil
	}
	var f float64
	if err := json.Unmarshal(v, &f); err != nil || f != float64(int64(f)) || f < 1 || f > float64(maxN) {
		return nil, jobs.Invalid(field, "must be a whole number from 1 to %d, or null for no limit", maxN)
	}
	n := int(f)
	return &n, nil
}

func parseRateLimit(v json.RawMessage) (*RateLimit, error) {
	if isNull(v) {
		return nil, nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(v, &raw); err != nil || raw == nil {
		return nil, jobs.Invalid("rate_limit", `must be an object such as {"limit": 20, "period_seconds": 1}, or null for none`)
	}
	for k := range raw {
		if k != "limit" && k != "period_seconds" {
			return nil, jobs.Invalid("rate_limit."+k, "is not part of a rate limit (give limit and period_seconds)")
		}
	}
	lv, ok := raw["limit"]
	if !ok {
		return nil, jobs.Invalid("rate_limit.limit", "is required: the number of starts allowed per period")
	}
	pv, ok := raw["period_seconds"]
	if !ok {
		return nil, jobs.Invalid("rate_limit.period_seconds", "is required: the length of the period in seconds")
	}
	limit, err := parseLimit("rate_limit.limit", lv, MaxRateLimit)
	if err != nil || limit == nil {
		return nil, jobs.Invalid("rate_limit.limit", "must be a whole number from 1 to %d", MaxRateLimit)
	}
	period, err := parseLimit("rate_limit.period_seconds", pv, MaxRatePeriod)
	if err != nil || period == nil {
		return nil, jobs.Invalid("rate_limit.period_seconds", "must be a whole number of seconds from 1 to %d", MaxRatePeriod)
	}
	return &RateLimit{Limit: *limit, PeriodSeconds: *period}, nil
}

// QueueFacts is what the database says about a queued job's queue when
// flow control may hold it back: the input of the flow-control reasons of
// Explain.
type QueueFacts struct {
	Settings QueueSettings
	// Running counts the queue's running jobs (leases not yet reaped
	// included: their slots come back when the reaper returns them).
	Running int
	// Tokens is the rate limit's bucket now; NextTokenAt is when it next
	// holds a whole token, if it does not.
	Tokens      float64
	NextTokenAt *time.Time
	// KeyRunning counts the running jobs sharing the job's concurrency key.
	KeyRunning int
}

// CountRetrying is the key of QueueInfo.Counts for scheduled jobs waiting
// for a retry after a failed attempt. It is not a state: such a job's
// status is scheduled.
const CountRetrying jobs.State = "retrying"
