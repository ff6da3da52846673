package handlers

import (
	"context"
	"encoding/json"

	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// Store is what the JSON API (and the dashboard's job, queue, recurring and
// settings pages) need from storage: the union of one small interface per
// area, each of which names only what its routes call. *db.Store implements
// it. The dashboard, alerts, the pull API, people and keys, logs and the
// audit trail have interfaces of their own, given in Config
// (DashboardStore, AlertStore, WorkStore, AccessStore, LogSource,
// AuditStore), so that a caller serving only the API needs none of them.
type Store interface {
	StatusStore
	JobStore
	BatchStore
	DurableStore
	JobActionStore
	DLQStore
	QueueStore
	ScheduleStore
	SettingsStore
	TypeStore
}

// TypeStore is what job types' payload schemas need: storing them (a
// worker's registration, a push queue's settings) and showing them.
type TypeStore interface {
	// RecordSchemas stores schemas as the ones in force for their types,
	// by whom, adding a version where one changed, and returns the types
	// whose schema changed. Every process learns of a change at once.
	RecordSchemas(ctx context.Context, schemas map[string]*jobs.PayloadSchema, by domain.SchemaAuthor) ([]string, error)
	// SchemaHistory returns every kept version of jobType's schema, the
	// one in force first.
	SchemaHistory(ctx context.Context, jobType string) ([]domain.SchemaVersion, error)
}

// StatusStore is what the health endpoints and the counts need: /healthz,
// /readyz, /api/v1/stats and the dashboard's overview.
type StatusStore interface {
	// Ping checks that the database answers.
	Ping(ctx context.Context) error
	// Server says which database server the pool is on, for /readyz: its
	// address and whether it takes writes.
	Server(ctx context.Context) (domain.DatabaseServer, error)
	// Stats counts jobs per state, queue and type, with the last hour of
	// throughput. Callers that poll it cache the result (see cached).
	Stats(ctx context.Context) (*domain.Stats, error)
}

// BatchStore is what the batches API and pages need.
type BatchStore interface {
	// CreateBatch creates a batch with its first members and callbacks in
	// one transaction (closed unless p.Open).
	CreateBatch(ctx context.Context, p domain.BatchParams) (*domain.Batch, []jobs.Enqueued, error)
	// AddToBatch adds members to an open batch: domain.ErrNotFound,
	// domain.ErrBatchClosed.
	AddToBatch(ctx context.Context, id uuid.UUID, params []jobs.EnqueueParams) (*domain.Batch, []jobs.Enqueued, error)
	// CloseBatch closes a batch (a closed one stays as it is).
	CloseBatch(ctx context.Context, id uuid.UUID) (*domain.Batch, error)
	// GetBatch returns a batch with its counts and callbacks, or
	// domain.ErrNotFound.
	GetBatch(ctx context.Context, id uuid.UUID) (*domain.Batch, error)
	// ListBatches returns a page of batches, newest first.
	ListBatches(ctx context.Context, cursor string, limit int) (domain.BatchPage, error)
}

// DurableStore is what steps, signals and events need (api_durable.go).
type DurableStore interface {
	// RecordStep records a step of the attempt whose lease is l: the step
	// as stored and whether this call wrote it; domain.ErrLeaseLost.
	RecordStep(ctx context.Context, l domain.Lease, step jobs.StepRecord) (jobs.StepRecord, bool, error)
	// ForgetSteps drops the steps and signals a dead-letter job recorded
	// (a replay that starts over); other jobs keep theirs.
	ForgetSteps(ctx context.Context, id uuid.UUID) error
	// JobSteps returns a job's recorded steps in their order.
	JobSteps(ctx context.Context, id uuid.UUID) ([]jobs.StepRecord, error)
	// SendSignal delivers a signal to a job (kept when it does not wait
	// for it yet): whether it was new, and whether it resumed the job.
	SendSignal(ctx context.Context, id uuid.UUID, name, dedupeID string, body []byte) (fresh, resumed bool, err error)
	// SendEvent resumes every job waiting for event name (in queues, when
	// not nil) and returns how many.
	SendEvent(ctx context.Context, name string, body []byte, queues []string) (int, error)
}

// JobStore is what enqueueing and reading jobs need: the jobs API, the job
// page, the job lists and the live streams that refresh them.
type JobStore interface {
	// Enqueue inserts jobs in one transaction, in order, each of which has
	// passed jobs.EnqueueParams.Validate. An entry whose idempotency key
	// matched an existing job comes back with Inserted false.
	Enqueue(ctx context.Context, params ...jobs.EnqueueParams) ([]jobs.Enqueued, error)
	// GetJob returns one job, binned or in the history included;
	// domain.ErrNotFound when there is none.
	GetJob(ctx context.Context, id uuid.UUID) (*jobs.Job, error)
	// GetJobs returns the jobs among ids that exist, in no particular
	// order: one query for the rows a page shows.
	GetJobs(ctx context.Context, ids []uuid.UUID) ([]*jobs.Job, error)
	// ListJobs returns one page of jobs, newest first unless p says
	// otherwise. Filters it cannot apply are a *jobs.ValidationError.
	ListJobs(ctx context.Context, p domain.ListParams) (domain.Page, error)
	// ListExecutions returns every recorded run of j in order, followed
	// by the run in progress when j is running.
	ListExecutions(ctx context.Context, j *jobs.Job) ([]domain.Execution, error)
	// Dependencies returns the jobs a job waits for and the jobs waiting
	// for it.
	Dependencies(ctx context.Context, id uuid.UUID) (domain.Dependencies, error)
	// WorkflowGraph returns the workflow a job belongs to: every job
	// connected to it through dependencies, nearest first, at most
	// domain.MaxGraphSteps of them, with the edges between them.
	WorkflowGraph(ctx context.Context, id uuid.UUID) (domain.WorkflowGraph, error)
	// ExplainFacts reads what domain.Explain needs to say why a job is where
	// it is.
	ExplainFacts(ctx context.Context, id uuid.UUID) (domain.ExplainFacts, error)
	// ExplainFactsFor is ExplainFacts for a job the caller has just read,
	// so that it is not read twice.
	ExplainFactsFor(ctx context.Context, j *jobs.Job) (domain.ExplainFacts, error)
	// JobLogs returns up to limit of a job's stored log lines whose
	// sequence number is above after, oldest first.
	JobLogs(ctx context.Context, id uuid.UUID, after int64, limit int) ([]domain.LogEntry, error)
	// JobData returns what a job received from its parents and added to
	// its workflow, and the batch it belongs to.
	JobData(ctx context.Context, j *jobs.Job) (domain.JobData, error)
	// CancelAudit returns the operator action on the audit trail that
	// cancelled the job, or nil when the trail has none.
	CancelAudit(ctx context.Context, id uuid.UUID) (*domain.AuditEntry, error)
}

// JobActionStore is what the operator's actions on one job need, from the
// API and the dashboard alike (actions.go). A job whose state does not
// allow the action is domain.ErrInvalidTransition; a missing one
// domain.ErrNotFound.
type JobActionStore interface {
	// CancelJob cancels a waiting job, or asks the worker of a running one
	// to stop it (the job comes back with CancelRequested set).
	CancelJob(ctx context.Context, id uuid.UUID) (*jobs.Job, error)
	// RetryJob replays a dead-letter job or runs a scheduled one now.
	RetryJob(ctx context.Context, id uuid.UUID) (*jobs.Job, error)
	// DeleteJob moves a job to the bin, from where RestoreJob brings it
	// back.
	DeleteJob(ctx context.Context, id uuid.UUID) (*jobs.Job, error)
	// RestoreJob brings a job back from the bin.
	RestoreJob(ctx context.Context, id uuid.UUID) (*jobs.Job, error)
	// RestoreJobs, CancelJobs, RetryJobs and DeleteJobs act on many jobs
	// in one transaction as their one-job forms do, and return the jobs
	// they changed: those whose state does not allow it are left out.
	RestoreJobs(ctx context.Context, ids []uuid.UUID) ([]*jobs.Job, error)
	CancelJobs(ctx context.Context, ids []uuid.UUID) ([]*jobs.Job, error)
	RetryJobs(ctx context.Context, ids []uuid.UUID) ([]*jobs.Job, error)
	DeleteJobs(ctx context.Context, ids []uuid.UUID) ([]*jobs.Job, error)
	// PurgeJob deletes a job from the bin for good.
	PurgeJob(ctx context.Context, id uuid.UUID) error
	// EditAndReplay replaces a dead-letter job's payload and replays it,
	// recording by with the payload before and after on the audit trail
	// in the same transaction. It returns the payload it replaced and the
	// replayed job. payload must have passed jobs.Registry.CheckPayload.
	EditAndReplay(ctx context.Context, id uuid.UUID, payload json.RawMessage, by domain.AuditEntry) (json.RawMessage, *jobs.Job, error)
}

// DLQStore is what the dead-letter queue's and the bin's own actions and
// views need.
type DLQStore interface {
	// RetryDLQ replays the given dead-letter jobs, or every one when ids
	// is nil, and returns the replayed jobs.
	RetryDLQ(ctx context.Context, ids []uuid.UUID) ([]*jobs.Job, error)
	// DeleteDLQ moves the given dead-letter jobs, or every one when ids is
	// nil, to the bin and returns their ids.
	DeleteDLQ(ctx context.Context, ids []uuid.UUID) ([]uuid.UUID, error)
	// DLQGroups groups the dead-letter queue by type and first line of the
	// error, largest group first, up to limit groups.
	DLQGroups(ctx context.Context, limit int) ([]domain.ErrorGroup, error)
	// CountDeadLetter counts the dead-letter jobs of a queue and a type
	// ("" for any), exactly.
	CountDeadLetter(ctx context.Context, queue, typ string) (int64, error)
	// CountBin counts the jobs in the bin of a queue and a type ("" for
	// any), exactly.
	CountBin(ctx context.Context, queue, typ string) (int64, error)
}

// QueueStore is what the queues API and pages need: flow control (pause,
// limits) and push queues.
type QueueStore interface {
	// ListQueues returns every queue that has live jobs or settings, by
	// name.
	ListQueues(ctx context.Context) ([]domain.QueueInfo, error)
	// GetQueue returns one queue; a queue with neither jobs nor settings
	// is domain.ErrNotFound.
	GetQueue(ctx context.Context, name string) (domain.QueueInfo, error)
	// UpdateQueue applies change to the settings of queue under the
	// queue's lock, recording by, and returns the new settings. Every
	// process learns of the change at once.
	UpdateQueue(ctx context.Context, queue, by string, change func(domain.QueueSettings) domain.QueueSettings) (domain.QueueSettings, error)
	// RotatePushSecret makes and returns a new signing secret for queue's
	// pushes; the one it replaces goes on signing until RevokePushSecret.
	// A queue whose replaced secret still signs is domain.ErrPreviousSecret.
	RotatePushSecret(ctx context.Context, queue, by string) (string, error)
	// RevokePushSecret stops signing with the secret the last rotation
	// replaced.
	RevokePushSecret(ctx context.Context, queue, by string) error
	// PushDeliveries returns up to limit of queue's latest push
	// deliveries, newest first.
	PushDeliveries(ctx context.Context, queue string, limit int) ([]domain.PushDelivery, error)
}

// ScheduleStore is what the recurring series' API and page need.
type ScheduleStore interface {
	// ListSchedules returns every recurring series, newest first.
	ListSchedules(ctx context.Context) ([]*domain.Schedule, error)
	// GetSchedule returns one series; domain.ErrNotFound when there is
	// none.
	GetSchedule(ctx context.Context, id uuid.UUID) (*domain.Schedule, error)
	// PauseSchedule stops a series until it is resumed, cancelling its
	// pending occurrence, whose id it returns for the audit trail.
	PauseSchedule(ctx context.Context, id uuid.UUID) (*domain.Schedule, []uuid.UUID, error)
	// ResumeSchedule restarts a paused series from now on.
	ResumeSchedule(ctx context.Context, id uuid.UUID) (*domain.Schedule, error)
	// RunScheduleNow enqueues an extra occurrence of a series to run at
	// once; the pending occurrence keeps its time.
	RunScheduleNow(ctx context.Context, id uuid.UUID) (*jobs.Job, error)
	// DeleteSchedule ends a series for good, cancelling its pending
	// occurrence, whose id it returns for the audit trail.
	DeleteSchedule(ctx context.Context, id uuid.UUID) ([]uuid.UUID, error)
}

// SettingsStore is what the runtime settings' API and page need.
type SettingsStore interface {
	// GetSettings returns the stored settings over the defaults.
	GetSettings(ctx context.Context) (domain.Settings, error)
	// UpdateSettings validates and applies a partial update (JSON values
	// by setting key), records each change with by, and notifies every
	// process. It returns the new settings and the keys that changed.
	UpdateSettings(ctx context.Context, patch map[string]json.RawMessage, by string) (domain.Settings, []string, error)
	// ListSettingsChanges returns up to limit changes, most recent first.
	ListSettingsChanges(ctx context.Context, limit int) ([]domain.SettingChange, error)
}
