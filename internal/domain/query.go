package domain

import (
	"time"

	"github.com/flinthq/flint/jobs"
	"github.com/google/uuid"
)

// ListParams filters and pages a job listing.
type ListParams struct {
	// Statuses keeps jobs in any of these states; empty keeps all.
	Statuses []jobs.State
	// Type and Queue, when set, keep jobs of that type and queue.
	Type  string
	Queue string
	// Q searches: a job id, an idempotency key, a type prefix or error text.
	Q string
	// Retrying, if set, keeps only scheduled jobs waiting for a retry
	// (true) or only those not yet tried (false).
	Retrying *bool
	// Sleeping, if set, keeps only waiting jobs that sleep until a set
	// time (true) or only those waiting for a signal or an event (false).
	Sleeping *bool
	// ScheduleID keeps the runs of one recurring series.
	ScheduleID *uuid.UUID
	// BatchID keeps the members of one batch.
	BatchID *uuid.UUID
	// InBin lists the bin (soft-deleted jobs) instead of live jobs.
	InBin bool
	// Cursor continues a previous listing (its NextCursor).
	Cursor string
	// Before starts the listing at jobs created before this time (a jump
	// into a long list); Oldest lists oldest first, then Before is ignored.
	Before *time.Time
	Oldest bool
	// By is the time a listing is ordered by: SortCreated (the default),
	// SortStarted or SortFinished. Jobs without that time (not started,
	// not finished yet) come first newest first and last oldest first.
	By SortKey
	// Offset skips this many jobs of the first page (a jump to a page by
	// number), at most MaxListOffset; not with a Cursor.
	Offset int
	// Limit is the page size, 1 to MaxListLimit; zero means 50.
	Limit int
}

// SortKey is the time a listing is ordered by.
type SortKey string

// The orders a listing offers.
const (
	SortCreated  SortKey = ""
	SortStarted  SortKey = "started"
	SortFinished SortKey = "finished"
)

// MaxListOffset is how far into a listing a jump by page number reaches.
const MaxListOffset = 10_000

// MaxListLimit is the largest page a listing returns.
const MaxListLimit = 500

// Page is one page of a listing.
type Page struct {
	Jobs []*jobs.Job
	// NextCursor continues the listing; empty on the last page.
	NextCursor string
}

// Stats summarises the jobs table.
type Stats struct {
	// ByStatus counts live (not binned) jobs per state.
	ByStatus map[string]int64 `json:"by_status"`
	// ByQueue and ByType count live jobs per queue and type, then state.
	ByQueue map[string]map[string]int64 `json:"by_queue"`
	ByType  map[string]map[string]int64 `json:"by_type"`
	// Bin counts soft-deleted jobs.
	Bin int64 `json:"bin"`
	// Throughput holds finished runs per minute over the last hour, oldest
	// first, by outcome.
	Throughput []ThroughputBucket `json:"throughput"`
}

// ThroughputBucket is one minute of finished runs.
type ThroughputBucket struct {
	Minute   time.Time        `json:"minute"`
	Outcomes map[string]int64 `json:"outcomes"`
}

// StateCount is the number of live jobs in a state, counted up to a cap;
// Capped means "at least Count".
type StateCount struct {
	State  jobs.State
	Count  int64
	Capped bool
	// Estimate, when Capped, is PostgreSQL's estimate of the whole count
	// from its statistics (zero when it has none): shown as an estimate,
	// never as a count.
	Estimate int64
}

// Failure is a recent run that did not succeed.
type Failure struct {
	JobID    uuid.UUID
	Type     string
	Queue    string
	Attempt  int
	Error    string
	At       time.Time
	Outcome  Outcome
	JobState jobs.State
	// Failures is how many of the job's recent runs failed (1 or more).
	Failures int
}

// ErrorGroup is one group of the dead-letter queue: its jobs of one type
// that failed with the same error (its first line).
type ErrorGroup struct {
	Type   string    `json:"type"`
	Error  string    `json:"error"`
	Count  int       `json:"count"`
	Latest time.Time `json:"latest"`
}

// DatabaseServer is the PostgreSQL server a process's pool is on, as
// /readyz reports it.
type DatabaseServer struct {
	// Address is the server's address and port as it reports them
	// (inet_server_addr, inet_server_port).
	Address string `json:"address"`
	// ReadOnly is true when the server cannot take writes: a standby, or
	// transaction_read_only on.
	ReadOnly bool `json:"read_only"`
	// InRecovery is true on a standby (pg_is_in_recovery).
	InRecovery bool `json:"in_recovery"`
}
