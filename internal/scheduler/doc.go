// Package scheduler holds the loops that move jobs by time and keep the
// system tidy. `flint scheduler` runs them all (as does `flint serve`):
//
//	Promoter   scheduled → queued when run_at comes, from an in-memory index
//	           (heap or timing wheel, the scheduler_strategy setting) fed by
//	           NOTIFY, with a table sweep every FLINT_PROMOTE_INTERVAL as the
//	           backstop
//	Reaper     running → queued when the lease expired (attempt refunded, run
//	           recorded as interrupted; DLQ after too many), every
//	           FLINT_REAP_INTERVAL
//	Recurrer   the next occurrence of each recurring series (interval or cron)
//	Ager       raises the effective priority of jobs that waited long, once
//	           per aging_interval_seconds across the cluster
//	Archiver   moves jobs finished history_after_minutes ago to the
//	           history, every 5 s in batches of 2,000 per state
//	Pruner     retention: drops the history's days past their state's
//	           retention, deletes finished jobs still in the live table, the
//	           bin, the audit trail and the log entries of every process
//	           (log_retention_days) past their settings' ages, in small SKIP
//	           LOCKED batches
//	Alerter    the DLQ alert email, once per cooldown across the cluster,
//	           and the alert rules, evaluated once per interval across the
//	           cluster, their notifications sent from an outbox
//	Vacuumer   VACUUM (ANALYZE) of jobs when its dead row versions pass
//	           20,000 + 5% of its live rows and no VACUUM ran for a minute
//	           (autovacuum off or behind), checked every 30 s across the
//	           cluster
//
// Every loop is safe to run in any number of processes at once: each pass
// takes its rows with FOR UPDATE SKIP LOCKED and decides on the database
// clock, so no leader election is needed for correctness.
//
// scheduler imports jobs, logs (to scrub error text in alert emails) and
// internal/minheap; the store is an interface that *db.Store satisfies.
package scheduler
