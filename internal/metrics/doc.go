// Package metrics exposes Flint's Prometheus metrics, built with the official
// client library on a registry of its own (never the global default).
//
// A Metrics is fed from three kinds of places:
//
//   - hot-path observations: ObserveEvents (every state change this process
//     commits, best wired through Tee around the store's event sink) and
//     ObserveRun (one call per finished handler run);
//   - maintenance loops: ObserveReaped (the reaper's moves) and
//     ObservePromoted (the promoter's count);
//   - values read at scrape time from callbacks: jobs per state and queue
//     (SetStateSource, cached for 2 s so that frequent scrapes cannot hammer
//     the database), Redis health (SetRedisState), the event bus counters
//     (SetEventCounters) and the worker pool's load (SetPoolState).
//
// Every Observe method is safe for concurrent use and cheap: label children
// are resolved once and kept in a copy-on-write map, so a steady-state
// observation is one map lookup and one atomic add.
//
// # Series
//
//	flint_jobs{state,queue}                       gauge, read from the state source
//	flint_metrics_source_errors_total             counter, failed state-source calls
//	flint_jobs_enqueued_total{type,queue}         counter
//	flint_jobs_finished_total{type,queue,outcome} counter
//	flint_job_duration_seconds{type,outcome}      histogram, 1 ms .. 10 min
//	flint_job_pickup_latency_seconds{queue}       histogram, 0.5 ms .. 60 s
//	flint_lease_expiries_total                    counter
//	flint_reaper_moved_total{to_state}            counter
//	flint_promoter_promoted_total                 counter
//	flint_redis_up                                gauge, absent when Redis is disabled
//	flint_events_published_total                  counter (read from the event bus)
//	flint_events_dropped_total                    counter (read from the event bus)
//	flint_worker_busy, flint_worker_capacity      gauges (read from the pool)
//	flint_build_info{version}                     gauge, always 1
//
// plus the standard go_* and process_* collectors.
//
// # Labels
//
// Labels carry only values the deployment bounds: job types (the handler
// registry), queue names, states and outcomes. Job ids never become labels.
// Queue names are chosen by API clients, so as a safety net each labelled
// family holds at most MaxSeriesPerFamily label combinations; observations
// beyond that are counted under the value "_other" instead of creating new
// series.
//
// # What the event stream can and cannot tell
//
// Events carry a job's new state and attempt count, not its previous state,
// so ObserveEvents applies these rules:
//
//	running (a claim)            pickup latency = event time - run_at
//	completed                    finished{outcome="succeeded"}
//	dead_letter                  finished{outcome="dead_letter"}
//	cancelled                    finished{outcome="cancelled"}
//	scheduled with attempt > 0   finished{outcome="retried"}
//	queued with attempt == 0     enqueued
//
// An enqueue is counted when a job becomes queued (due) with no attempt
// charged, not when it is inserted. Counting every attempt-0 waiting state
// (queued, scheduled or blocked) would count each delayed job twice (inserted
// scheduled, then promoted to queued), each recurring occurrence twice and
// each dependent job two or three times (blocked, released to scheduled,
// promoted). With the chosen rule each job is counted once, when it becomes
// due, with these known errors:
//
//   - a run of attempt 1 that is handed back (drain on shutdown, or reaped
//     after its worker died) returns the job to queued with attempt 0, and it
//     is counted again; so is a DLQ replay (attempts are reset), which is
//     arguably a new enqueue;
//   - a job cancelled, binned or purged while still scheduled or blocked is
//     never counted as enqueued (but is counted as finished{cancelled});
//   - a delayed job is counted when it becomes due, not when it was created.
//
// flint_jobs_finished_total counts job-level transitions, not runs: a job
// replayed from the DLQ that then succeeds counts dead_letter once and
// succeeded once, and cancelling a waiting job counts cancelled although it
// never ran. A failed attempt shows as retried or dead_letter (the event
// cannot say failed), and outcome="interrupted" counts the jobs the reaper
// returned to the queue (ObserveReaped); runs handed back by a draining pool
// appear only in flint_job_duration_seconds{outcome="interrupted"}. Per-run
// outcomes (succeeded, failed, cancelled, interrupted) are exactly the
// _count series of flint_job_duration_seconds.
//
// Events are counted by the process that committed the change. Feed
// ObserveEvents from this process's own sink (Tee), never from the events
// delivered from other processes, or every API process would count every
// change again.
//
// # Where to start reading
//
// metrics.go has Metrics, New (every family it registers) and the
// /metrics handler; observe.go the Observe methods and Tee; gauges.go the
// values read at scrape time; family.go the capped, lock-free label
// families the hot path goes through; tables.go the table-health gauges.
package metrics
