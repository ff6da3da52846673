package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// StepSink records a job's steps for its handler; the worker pool puts one
// in every handler's context (WithSteps).
type StepSink interface {
	// RecordStep records the step under the attempt's lease and returns
	// the record as stored: the one given, or one recorded before under
	// the same name. ErrLeaseLost when the lease is gone.
	RecordStep(ctx context.Context, step StepRecord) (StepRecord, error)
	// Now is the worker's clock.
	Now() time.Time
}

// ErrStepOutsideWorker is returned by Step, Sleep and the waits called
// outside a job's handler.
var ErrStepOutsideWorker = errors.New("durable step: not called from a job's handler")

// stepRun is one attempt's view of its job's steps: what earlier attempts
// recorded, and how far this attempt has gone.
type stepRun struct {
	sink StepSink
	job  *Job
	mu   sync.Mutex
	seq  int                   // steps reached so far in this attempt
	seen map[string]bool       // names reached in this attempt
	byN  map[string]StepRecord // recorded, by name
	// suspended is the wait the attempt asked for; steps after it are
	// refused with it (the handler must return it).
	suspended *SuspendError
}

type stepsKey struct{}

// WithSteps returns ctx carrying the step state of j's attempt, recorded
// through sink.
func WithSteps(ctx context.Context, j *Job, sink StepSink) context.Context {
	r := &stepRun{sink: sink, job: j, seen: map[string]bool{}, byN: make(map[string]StepRecord, len(j.Steps))}
	for _, s := range j.Steps {
		r.byN[s.Name] = s
	}
	return context.WithValue(ctx, stepsKey{}, r)
}

func stepsFrom(ctx context.Context) *stepRun {
	r, _ := ctx.Value(stepsKey{}).(*stepRun)
	return r
}

// reach moves the attempt to its next step, name: it returns the step's
// number and its record when an earlier attempt recorded it, or a
// *StepOrderError (as a Permanent failure) when the recorded history
// disagrees with the code.
func (r *stepRun) reach(name string) (int, *StepRecord, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.suspended != nil {
		return 0, nil, r.suspended
	}
	if r.seen[name] {
		return 0, nil, Permanent(fmt.Errorf("step %q is used twice in one run; step names must be unique within a job", name))
	}
	r.seen[name] = true
	r.seq++
	seq := r.seq
	if seq <= len(r.job.Steps) {
		rec := r.job.Steps[seq-1]
		if rec.Name != name {
			return 0, nil, Permanent(&StepOrderError{JobID: r.job.ID, Seq: seq, Recorded: rec.Name, Asked: name})
		}
		return seq, &rec, nil
	}
	if _, ok := r.byN[name]; ok {
		return 0, nil, Permanent(&StepOrderError{JobID: r.job.ID, Seq: seq, Asked: name})
	}
	return seq, nil, nil
}

// Step runs fn once for the job, whatever happens to its attempts: when fn
// returns without error its result is recorded (in PostgreSQL, fenced by
// the attempt's lease) before Step returns it, and when the job runs
// again (a retry, a lost lease, a replay that keeps recorded steps, a
// resume after Sleep or a wait) Step returns the recorded result without
// calling fn. A step that fails returns fn's error: the handler returns
// it and the job's retry policy runs the job again from its first step
// not recorded.
//
// The name is the step's identity, unique within the job. Steps must be
// reached in the same order on every run: a run whose names or order
// differ from what was recorded fails for good with a *StepOrderError.
// The result is encoded as JSON (at most MaxStepResultBytes) and decoded
// into T on later runs, so T must survive a JSON round trip.
func Step[T any](ctx context.Context, name string, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	r := stepsFrom(ctx)
	if r == nil {
		return zero, ErrStepOutsideWorker
	}
	if err := CheckStepName("step", name); err != nil {
		return zero, Permanent(err)
	}
	seq, rec, err := r.reach(name)
	if err != nil {
		return zero, err
	}
	if rec != nil {
		traceStep(ctx, r.job, name, seq, true)
		return decodeStep[T](name, rec.Result)
	}
	started := r.sink.Now()
	sctx, end := traceStep(ctx, r.job, name, seq, false)
	v, err := fn(sctx)
	if end != nil {
		end(err)
	}
	if err != nil {
		return zero, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return zero, Permanent(fmt.Errorf("step %q: its result cannot be encoded as JSON: %v", name, err))
	}
	if len(b) > MaxStepResultBytes {
		return zero, Permanent(fmt.Errorf("step %q: its result is %d bytes; the limit is %d", name, len(b), MaxStepResultBytes))
	}
	got, err := r.sink.RecordStep(ctx, StepRecord{Name: name, Seq: seq, Attempt: r.job.Attempt, Result: b, StartedAt: started})
	if err != nil {
		return zero, fmt.Errorf("record step %q: %w", name, err)
	}
	return decodeStep[T](name, got.Result)
}

func decodeStep[T any](name string, raw json.RawMessage) (T, error) {
	var v T
	if len(raw) == 0 {
		raw = json.RawMessage("null")
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, Permanent(fmt.Errorf("step %q: the recorded result does not decode into %T: %v", name, v, err))
	}
	return v, nil
}

// sleepResult is a sleep's recorded step.
type sleepResult struct {
	WakeAt time.Time `json:"wake_at"`
}

// Sleep suspends the job for d: the first time the job reaches the sleep
// named name, it records it (as a step) and returns a *SuspendError that
// the handler must return. The worker then ends the attempt without
// charging a retry; the job waits (status waiting, waiting_for kind
// "sleep") holding no worker slot, goroutine or connection, and the
// scheduler queues it again at the wake time. On that run (and every
// later one) Sleep returns nil at once. d is between 1 ms and MaxWait.
func Sleep(ctx context.Context, name string, d time.Duration) error {
	r := stepsFrom(ctx)
	if r == nil {
		return ErrStepOutsideWorker
	}
	if err := CheckStepName("sleep", name); err != nil {
		return Permanent(err)
	}
	if d <= 0 || d > MaxWait {
		return Permanent(fmt.Errorf("sleep %q: the duration %s is out of range (more than 0, at most %s)", name, d, MaxWait))
	}
	seq, rec, err := r.reach(name)
	if err != nil {
		return err
	}
	now := r.sink.Now()
	if rec != nil {
		var s sleepResult
		if json.Unmarshal(rec.Result, &s) != nil || !now.Before(s.WakeAt) {
			return nil
		}
		// Woken early (the job was run by hand): sleep out the rest.
		return r.suspend(&SuspendError{Wait: WaitingFor{Kind: WaitSleep, Name: name, Until: s.WakeAt}})
	}
	wake := now.Add(d)
	res, _ := json.Marshal(sleepResult{WakeAt: wake.UTC()})
	return r.suspend(&SuspendError{
		Wait: WaitingFor{Kind: WaitSleep, Name: name, Until: wake},
		Step: &StepRecord{Name: name, Seq: seq, Attempt: r.job.Attempt, Result: res, StartedAt: now},
	})
}

func (r *stepRun) suspend(s *SuspendError) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.suspended == nil {
		r.suspended = s
	}
	return r.suspended
}

// WaitForSignal returns the signal name sent to the job (POST
// /api/v1/jobs/{id}/signals/{name}; SignalJob in the Go client). When none has
// arrived yet it returns a *SuspendError that the handler must return:
// the attempt ends without charging a retry, the job waits (status
// waiting, waiting_for kind "signal") with no worker held, and it runs
// again when the signal arrives, or when timeout passes (0: MaxWait);
// WaitForSignal then returns the signal, or one whose TimedOut is true.
// A signal sent before the job waits is kept for it. The first signal of
// a name is the one every later run sees.
func WaitForSignal(ctx context.Context, name string, timeout time.Duration) (Signal, error) {
	return waitFor(ctx, WaitSignal, name, timeout)
}

// WaitForEvent is WaitForSignal for a named event (POST /api/v1/events),
// which reaches every job waiting for it when it is sent. An event is not
// kept: a job that starts waiting after it was sent waits for the next
// one (or its timeout).
func WaitForEvent(ctx context.Context, name string, timeout time.Duration) (Signal, error) {
	return waitFor(ctx, WaitEvent, name, timeout)
}

func waitFor(ctx context.Context, kind, name string, timeout time.Duration) (Signal, error) {
	r := stepsFrom(ctx)
	if r == nil {
		return Signal{}, ErrStepOutsideWorker
	}
	if err := CheckSignalName(kind, name); err != nil {
		return Signal{}, Permanent(err)
	}
	if timeout < 0 || timeout > MaxWait {
		return Signal{}, Permanent(fmt.Errorf("wait for %s %q: the timeout %s is out of range (0 to %s)", kind, name, timeout, MaxWait))
	}
	if s, ok := r.job.Signals[name]; ok {
		return s, nil
	}
	if timeout == 0 {
		timeout = MaxWait
	}
	return Signal{}, r.suspend(&SuspendError{Wait: WaitingFor{Kind: kind, Name: name, Until: r.sink.Now().Add(timeout)}})
}
