// Package jobs is Flint's domain model: the Job, its states and the state
// machine that connects them, the Handler interface and the Registry that maps
// a job type to its handler, the retry policy, validation of enqueue requests,
// and the built-in job types. It is the package a program that runs its own
// jobs reads first.
//
// # Handlers
//
// A Handler runs the jobs of one type: its Work method gets the Job (its
// Payload is the JSON the job was enqueued with) and a context that ends
// when the job is cancelled, times out, loses its lease or the process
// shuts down. What Work returns decides the job's fate:
//
//   - a result and a nil error: the job completes, and the result (any
//     value encoding/json accepts, up to MaxResultBytes) is stored with it;
//   - an error: the attempt fails and the job is retried with backoff while
//     retries are left, then goes to the dead-letter queue;
//   - Permanent(err): the job fails for good, straight to the dead-letter
//     queue, whatever retries are left;
//   - Cancel(err): the job is cancelled.
//
// A panic fails the attempt with its stack trace. Inside Work,
// ReportProgress reports progress to the dashboard and Logger(ctx) returns
// a logger whose lines are kept with the job.
//
// A plain function becomes a Handler with HandlerFunc. Typed is the usual
// way: it decodes the payload into a struct of the handler's own before
// calling it, and refuses at enqueue, with a 422 naming the field, a
// payload that does not fit the struct or whose Validate method (see
// ArgsValidator) fails:
//
//	type ResizeArgs struct {
//		URL   string `json:"url"`
//		Width int    `json:"width"`
//	}
//
//	h := jobs.Typed(func(ctx context.Context, job *jobs.Job, args ResizeArgs) (any, error) {
//		return map[string]int{"width": args.Width}, nil
//	})
//
// # Registering and running
//
// A program registers its handlers with app.App.Handle, which puts them in
// the Registry of every process it runs (the worker pool looks handlers up
// there, the API validates payloads with them), and starts the roles with
// app.App.Main or app.App.Run; the app package's documentation shows the
// whole program. A Registry of one's own (NewRegistry, Register) is for
// tests and for code that wires the packages by hand.
//
// # Where to start reading
//
// registry.go (Handler, Registry) and typed.go are the contract with
// handler authors; job.go is the Job they receive; errors.go holds the
// errors a handler returns (Permanent, Cancel) and the ValidationError an
// enqueue is refused with; steps.go, spawn.go and parents.go are durable
// execution (Step, Sleep, WaitForSignal, Spawn, ParentsOf); progress.go and
// joblog.go report progress and keep log lines with the job; state.go is
// the state machine below; enqueue.go validates what callers enqueue;
// clock.go is the one source of time.
//
// This package is only what handler authors and embedders use. The values
// Flint's own layers exchange (leases, stats, settings, alert rules, the
// catalog of accepted types, workflow graphs) and the built-in job types'
// handlers are in the internal domain package, which imports this one.
//
// It imports only the standard library, small pure libraries and Flint's
// internal JSON helpers. It never touches SQL, Redis, HTTP serving or the
// environment: the db package enforces the state machine in its SQL guards
// using the tables declared here, and the workers package runs handlers
// from the Registry.
//
// # States
//
//	enqueue ──► queued (due now) | scheduled (run_at later) | blocked (waiting on dependencies)
//	blocked   ──► queued | scheduled      every dependency completed          (dependency release)
//	scheduled ──► queued                   run_at <= now                       (promoter, "retry now")
//	queued    ──► running                  claim: lease taken, attempt+1      (worker pool)
//	running   ──► completed                handler succeeded                   (worker pool)
//	running   ──► scheduled                handler failed, retries left        (worker pool)
//	running   ──► dead_letter              failed with no retries left, or     (worker pool, reaper)
//	                                       interrupted too many times
//	running   ──► queued                   drain on shutdown, lease expiry:    (worker pool, reaper)
//	                                       attempt refunded
//	running   ──► cancelled                cancel requested and acknowledged   (worker pool, reaper)
//	queued|scheduled|blocked ──► cancelled at once                            (API)
//	dead_letter ──► queued                 DLQ replay, attempts reset          (API)
//	cancelled ──► blocked                  re-armed: the dependency whose      (API, with the replay)
//	                                       failure cancelled it was replayed
//
// The specification draws a separate "claimed" state between queued and
// running. Flint folds it into running: the pool claims only as many jobs as
// it has idle slots, so a claimed job's handler starts microseconds later, and
// writing the distinction would cost one more row version per job on the hot
// path. The lease, the attempt increment and the execution sequence are all
// taken by the claim itself.
//
// Soft deletion is orthogonal to the state: a binned job keeps its state,
// is never claimed or promoted, and comes back unchanged when restored.
package jobs
