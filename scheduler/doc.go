// Package scheduler holds the maintenance loops that move jobs by time:
//
//	Promoter  every 1 s (PromoterConfig.Interval)  scheduled → queued when run_at has come
//	Reaper    every 5 s (ReaperConfig.Interval)    running → queued when the lease expired
//	                                               (attempt refunded, run recorded as
//	                                               interrupted; DLQ after too many)
//
// Every loop is safe to run in any number of processes at once: each pass
// takes its rows with FOR UPDATE SKIP LOCKED and decides on the database
// clock, so no leader election is needed for correctness.
//
// scheduler imports jobs only; the store is an interface that *db.Store
// satisfies.
package scheduler
