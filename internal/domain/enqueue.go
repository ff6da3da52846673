package domain

const (
	MaxErrorLen = 16 << 10 // last_error and execution errors are cut to this
)

// MaxKnownTypes caps the job types Flint knows from workers seen in the
// last 24 hours: registering a worker that would add more is refused.
const MaxKnownTypes = 2000

const (
	MaxWorkflowJobs = 1000
)
