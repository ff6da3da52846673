package handlers

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// The pull API: workers in any language register, claim jobs (long
// polling), heartbeat, log and finish them, and deregister. They share
// the lease model of in-process pools — a claim charges an attempt and
// mints a lease token, heartbeats extend it, a finish whose token no
// longer matches changes nothing and says lease_lost — so crash recovery,
// retries, the DLQ, flow control and the dashboard treat their jobs like
// any other.

// WorkStore is what the pull API needs from storage; *db.Store
// implements it.
type WorkStore interface {
	// WorkerHeartbeat registers w (or refreshes its entry) for ttl and
	// returns the state an operator asked of it (domain.WorkerRunning,
	// WorkerQuiet or WorkerTerminate).
	WorkerHeartbeat(ctx context.Context, w domain.WorkerInfo, ttl time.Duration) (state string, err error)
	// RemoteWorkerHeartbeat is WorkerHeartbeat for a registered remote
	// worker only: one that is not registered (any more) is
	// domain.ErrNotFound and is not added.
	RemoteWorkerHeartbeat(ctx context.Context, w domain.WorkerInfo, ttl time.Duration) (state string, err error)
	// GetWorker returns a registered worker; domain.ErrNotFound when there
	// is none.
	GetWorker(ctx context.Context, id string) (domain.WorkerInfo, error)
	// SetWorkerState asks a remote worker to keep running, quiet down or
	// terminate; it learns on its next heartbeat.
	SetWorkerState(ctx context.Context, id, state string) error
	// ReleaseWorker hands every job a worker holds back to its queue
	// without charging the attempt, removes the worker from the registry
	// and returns the jobs it moved.
	ReleaseWorker(ctx context.Context, id, reason string) ([]domain.Moved, error)
	// ClaimJobs leases up to p.Limit queued jobs for p.WorkerID, in claim
	// order.
	ClaimJobs(ctx context.Context, p domain.ClaimParams) ([]*jobs.Job, error)
	// ExtendLeasesWithin extends the leases of beats that holder holds by
	// ttl, except those of jobs past their timeout plus grace, and says
	// which are still held.
	ExtendLeasesWithin(ctx context.Context, beats []domain.Heartbeat, ttl, grace time.Duration, holder string) ([]domain.LeaseStatus, error)
	// FinishJobs records the end of a batch of attempts: finished has one
	// entry per input, in order (an empty Status where the lease was
	// lost), cascaded the other jobs that moved as a consequence.
	FinishJobs(ctx context.Context, batch []domain.Finish) (finished, cascaded []domain.Moved, err error)
	// ClaimedBy says, of the jobs ids still in the live table, which the
	// worker has claimed and at which attempt they stand.
	ClaimedBy(ctx context.Context, workerID string, ids []uuid.UUID) (map[uuid.UUID]domain.Claimed, error)
	// LeaseHolder says who holds the lease l names; domain.ErrLeaseLost
	// when it holds none.
	LeaseHolder(ctx context.Context, l domain.Lease) (domain.LeaseHolder, error)
	// InsertJobLogs stores job log lines in one statement.
	InsertJobLogs(ctx context.Context, lines []domain.LogEntry) error
}

// WorkConfig configures the pull API.
type WorkConfig struct {
	// Store is where remote workers' registrations, claims and finishes
	// go. Required.
	Store WorkStore
	// Hub holds waiting claims; nil means a hub of its own (woken only by
	// its poll).
	Hub *WorkHub
	// LeaseTTL is the lease a claim takes and a heartbeat renews; zero
	// means 30 s. HeartbeatInterval is what workers are told to
	// heartbeat at; zero means 5 s. TimeoutGrace is how long past its
	// timeout a job's lease is still extended; zero means 10 s.
	LeaseTTL, HeartbeatInterval, TimeoutGrace time.Duration
	// PollInterval is how often waiting claims look for work without a
	// notification; zero means 1 s.
	PollInterval time.Duration
	// OnMoved, if set, is told of the jobs finishes moved (the DLQ alert).
	OnMoved func([]domain.Moved)
}

func (c *WorkConfig) fill() {
	if c.Hub == nil {
		c.Hub = NewWorkHub(0)
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = 30 * time.Second
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = 5 * time.Second
	}
	if c.TimeoutGrace <= 0 {
		c.TimeoutGrace = 10 * time.Second
	}
	if c.PollInterval <= 0 {
		c.PollInterval = time.Second
	}
}

// Limits of the pull API.
const (
	maxClaim         = 100
	maxWaitSeconds   = 30
	maxWorkerTypes   = 200
	maxWorkerQueues  = 100
	maxLeasesPerBeat = 10000
	maxOutcomes      = 1000
	maxLogLines      = 1000
	maxLogMessage    = 64 << 10
	// remoteWorkerTTL is how long a remote worker stays in the registry
	// after its last heartbeat, in heartbeat intervals.
	remoteWorkerTTL = 3
)

// workers is the pull API's state in one process.
type workAPI struct {
	cfg   WorkConfig
	cache sync.Map // worker id → cachedWorker
}

type cachedWorker struct {
	info domain.WorkerInfo
	at   time.Time
}

// workerCacheTTL is how long a worker's registry entry is trusted without
// reading it again (its state arrives fresh with every heartbeat).
const workerCacheTTL = 5 * time.Second
