// Package db is Flint's storage: the PostgreSQL Store, the embedded
// migrations, and the notification listener. Rows are read one of two ways,
// chosen by what they are, never both for the same struct:
//
//   - Rows of the jobs table, wherever a statement selects or returns them,
//     list jobColumns and are scanned by position with pgx into jobRow
//     (collectJobs, collectOneJob). So are the other rows the hot path and
//     transactions produce: moved jobs (collectMoved), timers
//     (collectTimers) and recurring series (collectSchedules, which the
//     scheduler reads under FOR UPDATE). Claims, completions, heartbeats,
//     enqueue, COPY and LISTEN/NOTIFY use pgx throughout, as does every read
//     inside a pgx transaction, which sqlx cannot join. Scanning by position
//     is the fastest, and one column list serves every statement.
//   - Read models (executions, dependencies, settings history, dashboard
//     counts, failures and throughput, stats, audit entries, the alert
//     outbox, workers, the log of every process) are read with sqlx's SelectContext or GetContext over
//     pgx's database/sql driver, by column name into unexported row structs
//     with db tags, which are then converted to the jobs types. A column
//     that is an expression carries an alias naming its field.
//
// A single value or a single row of a value or two (QueryRow(...).Scan) is
// read with pgx.
//
// All SQL lives here, as named constants next to the method that runs them.
// Every statement that moves a job guards its from-state with the sets
// declared by the jobs package (domain.CancelFrom, domain.RetryFrom, …), and
// every write a worker makes for a running job also guards its lease
// token, so a worker whose lease expired and was taken over cannot
// complete, fail or extend the job. Time decisions (due, expired) are made
// on the database clock.
//
// db imports jobs and never handlers, workers or scheduler.
//
// # Where to start reading
//
// Start with store.go: Open and Config, the Store, and withTx, the one way
// a multi-step write runs. rows.go holds jobColumns and the scanners that
// every statement returning jobs shares. Then follow a job through its
// life, one file per step:
//
//   - Enqueue: enqueue.go (Store.Enqueue, EnqueueTx and the insert
//     statement), enqueue_deps.go (dependencies and recurring series),
//     enqueue_keys.go (idempotency keys against the history),
//     enqueue_copy.go (COPY for large batches of plain jobs) and
//     groupcommit.go (single enqueues sharing one transaction). wakeup.go
//     sends the notifications that wake workers, after the commit.
//   - Claim: claim.go (ClaimJobs, the lease and ExtendLeases). Paused and
//     limited queues are claimed through claim_flow.go, with the settings
//     queues.go loads and flow_hold.go saying what held a claim back;
//     ready.go claims the Redis ready queue's candidates by id.
//   - Finish: finish.go (FinishJobs, every outcome of a batch in one round
//     trip), with workflow.go releasing dependents and cascading failures;
//     workflow_graph.go keeps the step keys and walks a job's workflow.
//   - Reap and the other loops: maintenance.go holds what the scheduler
//     runs (ReapExpired, PromoteDue, AgeQueued, Prune, TakeTurn);
//     schedules.go the recurring series.
//   - Archive: archive.go moves finished jobs into the partitioned
//     history, unarchive.go brings them back for an operation that
//     changes them, and history_partitions.go creates and drops the day
//     partitions retention works on; history.go seeds a large history
//     for measurement.
//   - Operators: ops.go (cancel, retry, bin) and replay.go.
//
// Around the job's path: migrate.go applies migrations/ (embedded by
// embed.go); conninfo.go and redis_url.go check connection settings before
// anything connects; listener.go is the LISTEN connection; events.go the EventBus
// that carries job events to every process; redis.go the optional Redis
// fast path; registry.go and remote.go the workers; failover.go what a
// standby or a failover looks like to the pool. The read models behind
// the dashboard and the API are queries.go and list_jobs.go (jobs),
// dashboard.go, stats.go, queue_info.go and explain.go; the dashboard's
// own tables are users.go, sessions.go, apikeys.go, audit.go,
// settings.go, alertrules.go, alert_evaluation.go, alerts.go, push.go,
// joblogs.go, and process_logs.go with log_tail.go.
package db
