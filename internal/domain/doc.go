// Package domain holds the half of Flint's domain that users of the library
// never see: the values and rules the internal layers (db, workers,
// scheduler, handlers, views, app) exchange, and the built-in job types'
// implementations. Package jobs keeps what handler authors and embedders
// use: the Job, its State, Handler and Typed, enqueue parameters, the
// durable-execution API, the errors handlers return, Clock.
//
// domain imports jobs, never the other way round, so everything here may
// use the public types; jobs itself compiles without this package. Like
// jobs it does no I/O of its own (the http_request and send_email job types
// and the SSRF-guarded client are clients by nature): no SQL, no Redis, no
// HTTP serving, no environment.
//
// # Where to start reading
//
// lease.go holds the values the worker pool and the store exchange (claim,
// lease, heartbeat, finish, moved jobs); query.go the list, page and stats
// values of the read side; event.go the events the bus carries and the
// worker registry's entries; settings.go and queues.go the runtime
// settings and per-queue limits; workflow.go and batch.go the shapes of
// workflows and batches; catalog.go the job types a process accepts, with
// their schemas; explain.go why a job waits; alert*.go the alert rules and
// their evaluation; builtin.go, http_request*.go, send_email.go and ssrf*.go
// the built-in job types.
package domain
