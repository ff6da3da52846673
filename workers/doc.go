// Package workers runs jobs: the Pool claims due jobs in batches, runs each
// in one of its worker goroutines under a context that carries cancellation,
// timeout and shutdown, keeps the leases alive with batched heartbeats, and
// records outcomes in batches. It also holds the SMTP Mailer that send_email
// jobs and alerts use.
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
// workers imports jobs only; the store it needs is an interface that
// *db.Store satisfies.
package workers
