// Package db is Flint's storage: the PostgreSQL Store, the embedded dbmate
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
// declared by the jobs package (jobs.CancelFrom, jobs.RetryFrom, …), and
// every write a worker makes for a running job also guards its lease
// token, so a worker whose lease expired and was taken over cannot
// complete, fail or extend the job. Time decisions (due, expired) are made
// on the database clock.
//
// db imports jobs and never handlers, workers or scheduler.
package db
