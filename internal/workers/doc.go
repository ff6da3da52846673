// Package workers runs jobs: the Pool claims due jobs in batches, runs each
// in one of its worker goroutines under a context that carries cancellation,
// timeout and shutdown, keeps the leases alive with batched heartbeats, and
// records outcomes in batches. Beside the pool it holds the Pusher, which
// POSTs the jobs of push queues to their endpoints; Presence, which keeps
// this process's entry in the worker registry; the AlertSender; and the SMTP
// Mailer that send_email jobs and alerts use.
//
// Invariants:
//   - Every write for a running job carries the job's lease token, so once a
//     lease is lost (the reaper took the job back) nothing this process does
//     can change the job.
//   - A lease is extended only while its handler goroutine is alive and has
//     not overrun its timeout by more than a grace period: a handler that
//     ignores its context is eventually given up and reaped, not kept alive
//     forever.
//   - On shutdown the pool stops claiming, lets running jobs finish within
//     the drain timeout, then cancels the rest and hands them back to the
//     queue without charging an attempt.
//
// # Where to start reading
//
// pool.go has the Pool, its Config and Run, which starts the other
// goroutines and drains; then follow one job: claim.go (produce and claim,
// sized by the claim-ahead), execute.go (run the handler, turn its return
// into an outcome), heartbeat.go (renew leases, act on cancel requests and
// lost leases) and finish.go (write outcomes in batches). The pusher is
// pusher.go, push_deliver.go and push_finish.go, in the same order; the
// mailer is mailer.go, mailer_url.go and mailer_send.go.
//
// workers imports jobs and logs only; the stores it needs are interfaces
// (Store, PushStore, PresenceStore) that *db.Store satisfies.
package workers
