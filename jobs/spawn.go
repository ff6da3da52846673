package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Self stands for the finishing job in the depends_on of the jobs it
// spawns.
const Self = "$self"

// MaxSpawnJobs is the most jobs one attempt may add to its workflow; a
// join spawned with them may depend on all of them (and on Self).
const MaxSpawnJobs = 10000

// SpawnJob is a job that a running job adds to its own workflow (Spawn).
// It is created if and only if the running job's completion commits.
type SpawnJob struct {
	// Key names the job within the workflow: required, new to the
	// workflow, and not starting with "$".
	Key string
	// Type names its handler. Required.
	Type string
	// Payload is encoded as JSON (nil: {}); a json.RawMessage is taken as
	// it is.
	Payload any
	// Queue, Priority, MaxRetries, TimeoutSeconds, ConcurrencyKey and
	// Delay are as in EnqueueParams.
	Queue          string
	Priority       int
	MaxRetries     *int
	TimeoutSeconds int
	ConcurrencyKey string
	Delay          time.Duration
	// DependsOn names jobs of the workflow the job waits for: keys of jobs
	// spawned with it, keys of jobs already in the workflow, or Self.
	DependsOn []string
}

// Spawned is a SpawnJob checked and laid out for the store: its key, the
// keys it depends on, and the parameters of the job to create (without
// dependencies: the store resolves the keys to ids).
type Spawned struct {
	Key       string
	DependsOn []string
	Params    EnqueueParams
}

type spawnKey struct{}

// WithSpawn returns ctx carrying s.
func WithSpawn(ctx context.Context, s SpawnSink) context.Context {
	return context.WithValue(ctx, spawnKey{}, s)
}

// ErrSpawnOutsideWorker is returned by Spawn called outside a worker's
// handler.
var ErrSpawnOutsideWorker = errors.New("spawn: not called from a job's handler")

// SpawnSink receives what a handler spawns until its attempt ends; the
// worker pool puts one in every handler's context.
type SpawnSink interface {
	// Spawn records jobs already checked one by one (CheckSpawned); the
	// sink checks them against what the attempt spawned before.
	Spawn(jobs []Spawned) error
	// SpawnTypes says which types a spawned job may name.
	SpawnTypes() TypeSource
	// Now is the worker's clock, for run_at bounds.
	Now() time.Time
}

// Spawn adds jobs to the running job's workflow: they are created, with
// their dependencies, in the transaction that records the job's
// completion, and not at all if the attempt fails, is interrupted or
// loses its lease (a retry that spawns them again creates them once).
// A job outside any workflow starts one, named by its own id. Each job is
// checked here (type, payload, key); a problem is returned at once, and
// the handler may carry on without them. What only the database can tell
// (a key already taken in the workflow, a dependency on a job that will
// never complete) fails the job for good when it finishes, with the
// reason.
func Spawn(ctx context.Context, specs ...SpawnJob) error {
	sink, ok := ctx.Value(spawnKey{}).(SpawnSink)
	if !ok {
		return ErrSpawnOutsideWorker
	}
	out := make([]Spawned, len(specs))
	tp := traceparentOf(ctx) // spawned jobs continue the spawning attempt's trace
	types, now := sink.SpawnTypes(), sink.Now()
	for i := range specs {
		s, sp := &specs[i], &out[i]
		err := s.checkInto(sp, types, now)
		sp.Params.Traceparent = tp
		if err != nil {
			var ve *ValidationError
			if errors.As(err, &ve) {
				return fmt.Errorf("spawn: job %d (%q): %s %s", i, s.Key, ve.Field, ve.Message)
			}
			return fmt.Errorf("spawn: job %d (%q): %w", i, s.Key, err)
		}
	}
	if err := sink.Spawn(out); err != nil {
		return fmt.Errorf("spawn: %w", err)
	}
	return nil
}

// checkInto validates s into sp.
func (s *SpawnJob) checkInto(sp *Spawned, types TypeSource, now time.Time) error {
	var payload json.RawMessage
	switch v := s.Payload.(type) {
	case nil:
	case json.RawMessage:
		payload = v
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return Invalid("payload", "cannot be encoded as JSON: %v", err)
		}
		payload = b
	}
	*sp = Spawned{Key: s.Key, DependsOn: s.DependsOn, Params: EnqueueParams{
		Type: s.Type, Queue: s.Queue, Payload: payload, Priority: s.Priority, MaxRetries: s.MaxRetries,
		TimeoutSeconds: s.TimeoutSeconds, ConcurrencyKey: s.ConcurrencyKey, Delay: s.Delay,
	}}
	return CheckSpawned(sp, types, now)
}

// CheckSpawned validates one spawned job on its own: its key, the shape
// of its dependencies and its parameters (as EnqueueParams.Validate),
// with the key as its step key. Field names in errors are the wire's
// ("key", "depends_on[2]", "payload").
func CheckSpawned(sp *Spawned, types TypeSource, now time.Time) error {
	switch {
	case sp.Key == "":
		return Invalid("key", "is required: each spawned job needs a key its dependents can name")
	case strings.HasPrefix(sp.Key, "$"):
		return Invalid("key", "%q: keys starting with $ are reserved ($self names the finishing job)", sp.Key)
	case len(sp.Key) > MaxStepKeyLen || !CleanText(sp.Key):
		return Invalid("key", "must be at most %d characters of text", MaxStepKeyLen)
	}
	if len(sp.DependsOn) > MaxSpawnJobs+1 {
		return Invalid("depends_on", "lists %d jobs; the limit is %d", len(sp.DependsOn), MaxSpawnJobs+1)
	}
	seen := make(map[string]bool, len(sp.DependsOn))
	for i, d := range sp.DependsOn {
		field := fmt.Sprintf("depends_on[%d]", i)
		switch {
		case d == "":
			return Invalid(field, "must be a key of this workflow or %s", Self)
		case d == sp.Key:
			return Invalid(field, "job %q cannot depend on itself", d)
		case strings.HasPrefix(d, "$") && d != Self:
			return Invalid(field, "%q: the only $ name is %s (the finishing job)", d, Self)
		case seen[d]:
			return Invalid(field, "lists %q twice", d)
		}
		seen[d] = true
	}
	p := &sp.Params
	p.StepKey = sp.Key
	if p.IdempotencyKey != "" {
		return Invalid("idempotency_key", "a spawned job is created once with its parent's completion; it takes no idempotency key")
	}
	if p.Recurring() {
		return Invalid("interval_seconds", "a spawned job cannot be recurring")
	}
	return p.Validate(types, now)
}
