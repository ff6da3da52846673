package jobs

// Enqueued is one job returned by an enqueue. Inserted is false when an
// idempotency key matched an existing job, which is returned instead.
type Enqueued struct {
	Job      *Job
	Inserted bool
}
