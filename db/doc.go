// Package db is Flint's storage: the PostgreSQL Store (pgx for the hot
// path — claims, completions, heartbeats, COPY and LISTEN/NOTIFY — and sqlx
// over pgx's database/sql driver for read queries), the embedded dbmate
// migrations, and the notification listener.
//
// All SQL lives here, as named constants next to the method that runs them.
// Every statement that moves a job guards its from-state with the sets
// declared by the jobs package (jobs.Sources), and every write a worker makes
// for a running job also guards its lease token, so a worker whose lease
// expired and was taken over cannot complete, fail or extend the job. Time
// decisions (due, expired) are made on the database clock.
//
// db imports jobs and never handlers, workers or scheduler.
package db
