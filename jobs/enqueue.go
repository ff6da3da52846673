package jobs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Limits on enqueue requests. They keep absurd input out of the database and
// give the caller a clear error instead.
const (
	MaxPayloadBytes      = 1 << 20 // 1 MiB of JSON per job
	MaxTypeLen           = 100
	MaxQueueLen          = 64
	MaxIdempotencyKeyLen = 255
	MaxConcurrencyKeyLen = 255
	MaxRetriesLimit      = 100
	MaxTimeoutSeconds    = 7 * 24 * 3600
	MaxDelay             = 10 * 365 * 24 * time.Hour
	MaxResultBytes       = 1 << 20
)

// earliestRunAt is the oldest run_at accepted; anything earlier is a mistake
// (a zero date, seconds taken for milliseconds) rather than "run now".
var earliestRunAt = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// ValidType reports whether name can name a job type: 1 to MaxTypeLen
// letters, digits or _ . : / -.
func ValidType(name string) bool {
	return len(name) <= MaxTypeLen && nameOf(name, true)
}

// ValidQueue reports whether name can name a queue: 1 to MaxQueueLen
// letters, digits or _ . : -.
func ValidQueue(name string) bool {
	return len(name) <= MaxQueueLen && nameOf(name, false)
}

// nameOf reports whether s is one or more ASCII letters, digits or
// _ . : - (and / when slash). Checked for every job enqueued, so a loop
// rather than a regular expression, which cost a batch request about 3%
// of its CPU.
func nameOf(s string, slash bool) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '_', c == '.', c == ':', c == '-':
		case c == '/' && slash:
		default:
			return false
		}
	}
	return true
}

// EnqueueParams describes a job to create. Zero values mean the defaults.
type EnqueueParams struct {
	// Type names the handler that runs the job. Required.
	Type    string
	Queue   string          // "" means DefaultQueue
	Payload json.RawMessage // nil means {}
	// Priority is 1 (high), 2 (medium) or 3 (low); 0 means DefaultPriority.
	Priority int
	// RunAt, when set, is when the job becomes due. Delay, when set, is
	// added to the database clock instead. At most one may be set.
	RunAt *time.Time
	Delay time.Duration
	// MaxRetries nil means the default (3).
	MaxRetries *int
	// TimeoutSeconds 0 means no time limit beyond the lease.
	TimeoutSeconds int
	// IdempotencyKey, when set, makes enqueue return the existing job with
	// that key instead of creating a second one.
	IdempotencyKey string
	// ConcurrencyKey, when set, groups the job with others of its queue
	// (a tenant, a customer) for the queue's per-key limit and fairness.
	ConcurrencyKey string
	// ID, when set, is the new job's id (workflows assign ids up front so
	// that jobs of one submission can depend on each other); zero means a
	// fresh UUIDv7.
	ID uuid.UUID
	// DependsOn lists jobs that must complete before this one runs; the job
	// waits in blocked until they have.
	DependsOn []uuid.UUID
	// StepKey names the job within its workflow (the key it was submitted
	// with); the dashboard labels the job's node of the workflow graph
	// with it. At most MaxStepKeyLen bytes of text.
	StepKey string
	// WorkflowID names the workflow StepKey is a key of (a submission,
	// and what its jobs spawned); a key names one job of a workflow.
	WorkflowID uuid.UUID
	// BatchID makes the job a member of a batch (the batch store sets it).
	BatchID uuid.UUID
	// SpawnedBy is the job whose completion spawned this one (see Spawn).
	SpawnedBy uuid.UUID
	// IntervalSeconds or Cron (with Timezone, default UTC) make the job a
	// recurring series: each occurrence is a new job.
	IntervalSeconds int64
	// Cron is a cron expression: five fields or a descriptor such as
	// @daily (see ParseCron).
	Cron string
	// Timezone is the IANA zone Cron is read in; "" means UTC.
	Timezone string
	// Traceparent is the W3C trace context the job's attempts continue.
	// The store sets it from the enqueue's span when tracing is on and it
	// is empty; a malformed one is dropped, never refused.
	Traceparent string
}

// Recurring reports whether p creates a recurring series.
func (p *EnqueueParams) Recurring() bool { return p.IntervalSeconds != 0 || p.Cron != "" }

// unknownType is the error for a type nothing accepts: short whatever
// the number of known types, naming the few most like the one given.
func unknownType(typ string, known []string) error {
	msg := fmt.Sprintf("unknown job type %q: no handler here, no worker seen in the last 24 hours serves it, "+
		"and FLINT_JOB_TYPES does not name it", typ)
	if like := similarTypes(typ, known, 5); len(like) > 0 {
		msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(like, ", "))
	}
	return Invalid("type", "%s; %d types are known (GET /api/v1/workers lists who serves them)", msg, len(known))
}

// similarTypes returns up to n of known closest to typ by edit distance
// (at most a third of its length, and at least 2), closest first.
func similarTypes(typ string, known []string, n int) []string {
	limit := max(len(typ)/3, 2)
	type scored struct {
		name string
		d    int
	}
	var found []scored
	for _, k := range known {
		if k == typ || abs(len(k)-len(typ)) > limit {
			continue
		}
		if d := editDistance(typ, k, limit); d <= limit {
			found = append(found, scored{k, d})
		}
	}
	slices.SortStableFunc(found, func(a, b scored) int { return a.d - b.d })
	out := make([]string, 0, min(n, len(found)))
	for _, f := range found[:min(n, len(found))] {
		out = append(out, f.name)
	}
	return out
}

func abs(n int) int { return max(n, -n) }

// editDistance is the Levenshtein distance of a and b (bytes: type names
// are ASCII), or limit+1 once it is sure to exceed limit.
func editDistance(a, b string, limit int) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		best := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			best = min(best, cur[j])
		}
		if best > limit {
			return limit + 1
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Limits on dependencies and recurrence.
const (
	MaxDependencies    = 100
	MaxStepKeyLen      = 100
	MaxIntervalSeconds = 366 * 24 * 3600
)

// Validate checks p against the types types accepts (and the payload
// against the handler it has for p's type, if any) and the limits above,
// and fills defaults. It returns a *ValidationError naming the first bad
// field. now is used only to bound run_at.
func (p *EnqueueParams) Validate(types TypeSource, now time.Time) error {
	switch {
	case p.Type == "":
		return Invalid("type", "is required")
	case len(p.Type) > MaxTypeLen:
		return Invalid("type", "must be at most %d characters", MaxTypeLen)
	case !nameOf(p.Type, true):
		return Invalid("type", "may contain only letters, digits and _ . : / -")
	}
	if p.Queue == "" {
		p.Queue = DefaultQueue
	}
	if !ValidQueue(p.Queue) {
		return Invalid("queue", "must be 1-%d letters, digits or _ . : -", MaxQueueLen)
	}
	if !types.Accepts(p.Type, p.Queue) {
		return unknownType(p.Type, types.Known())
	}
	h, _ := types.Lookup(p.Type)
	if err := validatePayload(p); err != nil {
		return err
	}
	if v, ok := h.(PayloadValidator); ok {
		if err := v.ValidatePayload(p.Payload); err != nil {
			return Invalid("payload", "%s", err.Error())
		}
	}
	if ss, ok := types.(SchemaSource); ok {
		if sch := ss.Schema(p.Type); sch != nil {
			if err := sch.Validate(p.Payload); err != nil {
				return err
			}
		}
	}
	if p.Priority == 0 {
		p.Priority = DefaultPriority
	}
	if p.Priority < PriorityHigh || p.Priority > PriorityLow {
		return Invalid("priority", "must be 1 (high), 2 (medium) or 3 (low)")
	}
	if p.RunAt != nil && p.Delay != 0 {
		return Invalid("run_at", "give run_at or delay_seconds, not both")
	}
	if p.Delay < 0 || p.Delay > MaxDelay {
		return Invalid("delay_seconds", "must be between 0 and %d", int64(MaxDelay/time.Second))
	}
	if p.RunAt != nil {
		if p.RunAt.Before(earliestRunAt) || p.RunAt.After(now.Add(MaxDelay)) {
			return Invalid("run_at", "must be between 2000-01-01 and ten years from now")
		}
	}
	if p.MaxRetries != nil && (*p.MaxRetries < 0 || *p.MaxRetries > MaxRetriesLimit) {
		return Invalid("max_retries", "must be between 0 and %d", MaxRetriesLimit)
	}
	if p.TimeoutSeconds < 0 || p.TimeoutSeconds > MaxTimeoutSeconds {
		return Invalid("timeout_seconds", "must be between 1 and %d (or omitted for none)", MaxTimeoutSeconds)
	}
	if p.IdempotencyKey != "" {
		if len(p.IdempotencyKey) > MaxIdempotencyKeyLen || !CleanText(p.IdempotencyKey) {
			return Invalid("idempotency_key", "must be valid UTF-8 text of at most %d bytes without NUL or control characters", MaxIdempotencyKeyLen)
		}
	}
	if p.ConcurrencyKey != "" {
		if len(p.ConcurrencyKey) > MaxConcurrencyKeyLen || !CleanText(p.ConcurrencyKey) {
			return Invalid("concurrency_key", "must be valid UTF-8 text of at most %d bytes without NUL or control characters", MaxConcurrencyKeyLen)
		}
	}
	if p.Traceparent != "" { // malformed trace context is dropped, never refused
		p.Traceparent = cleanTraceparent(p.Traceparent)
	}
	if p.StepKey != "" && (len(p.StepKey) > MaxStepKeyLen || !CleanText(p.StepKey)) {
		return Invalid("key", "must be at most %d characters of text", MaxStepKeyLen)
	}
	return p.validateGraphAndRecurrence()
}

func (p *EnqueueParams) validateGraphAndRecurrence() error {
	if len(p.DependsOn) > MaxDependencies {
		return Invalid("depends_on", "lists %d jobs; the limit is %d", len(p.DependsOn), MaxDependencies)
	}
	seen := make(map[uuid.UUID]bool, len(p.DependsOn))
	for i, d := range p.DependsOn {
		switch {
		case d == uuid.Nil:
			return Invalid(fmt.Sprintf("depends_on[%d]", i), "must be a job id")
		case d == p.ID && p.ID != uuid.Nil:
			return Invalid(fmt.Sprintf("depends_on[%d]", i), "a job cannot depend on itself")
		case seen[d]:
			return Invalid(fmt.Sprintf("depends_on[%d]", i), "lists %s twice", d)
		}
		seen[d] = true
	}
	if p.IntervalSeconds != 0 && p.Cron != "" {
		return Invalid("cron", "give interval_seconds or cron, not both")
	}
	if p.IntervalSeconds < 0 || p.IntervalSeconds > MaxIntervalSeconds {
		return Invalid("interval_seconds", "must be between 1 and %d", MaxIntervalSeconds)
	}
	if p.Timezone != "" && p.Cron == "" {
		return Invalid("timezone", "applies to cron schedules only")
	}
	if p.Cron != "" {
		if _, err := ParseCron(p.Cron, p.Timezone); err != nil {
			field := "cron"
			if strings.Contains(err.Error(), "time zone") {
				field = "timezone"
			}
			return Invalid(field, "%s", err.Error())
		}
	}
	if p.Recurring() && len(p.DependsOn) > 0 {
		return Invalid("depends_on", "a recurring job cannot have dependencies")
	}
	return nil
}

func validatePayload(p *EnqueueParams) error {
	raw := bytes.TrimSpace(p.Payload)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		p.Payload = json.RawMessage(`{}`)
		return nil
	}
	if len(raw) > MaxPayloadBytes {
		return Invalid("payload", "is %d bytes; the limit is %d", len(raw), MaxPayloadBytes)
	}
	if raw[0] != '{' {
		return Invalid("payload", "must be a JSON object")
	}
	if !json.Valid(raw) {
		return Invalid("payload", "is not valid JSON")
	}
	// What PostgreSQL's jsonb cannot hold (NUL, invalid UTF-8, lone
	// surrogates, numbers past numeric) and what nobody can render
	// (unbounded nesting) is refused here, naming the field.
	if err := checkJSONText("payload", raw); err != nil {
		return err
	}
	p.Payload = json.RawMessage(raw)
	return nil
}
