// Package jobs is Flint's domain model: the Job, its states and the state
// machine that connects them, the Handler interface and the Registry that maps
// a job type to its handler, the retry policy, validation of enqueue requests,
// and the built-in job types.
//
// It imports only the standard library and small pure libraries. It never
// touches SQL, Redis, HTTP serving or the environment (the http_request job
// is an HTTP client, by nature, with its SSRF guard): the db package enforces the
// state machine in its SQL guards using the tables declared here, and the
// workers package runs handlers from the Registry.
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
