package views

import (
	"encoding/json"
	"time"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// Chrome is what every page's frame needs.
type Chrome struct {
	// Title is the page's title, before " · Flint".
	Title string
	// Nav names the current section, for aria-current.
	Nav string
	// User is the signed-in person's email.
	User string
	// Role is the signed-in person's role, shown beside Sign out.
	Role string
	// CSRF is the session's token, which every HTMX request sends.
	CSRF string
	// MailURL is the mail catcher's web UI ("" hides the link).
	MailURL string
	// Now is the server's clock as the page was rendered; relative times
	// in the browser count from it.
	Now time.Time
	// Live marks a page that updates live: it shows the live indicator.
	Live bool
}

// csrfHeaders is the hx-headers value that sends the CSRF token with every
// HTMX request of the page.
func csrfHeaders(token string) string {
	b, _ := json.Marshal(map[string]string{"X-CSRF-Token": token})
	return string(b)
}

// Overview is the Overview page.
type Overview struct {
	Counts         []domain.StateCount       // jobs by state
	Throughput     []domain.ThroughputBucket // finished runs over Range
	Workers        []domain.WorkerInfo       // the live workers
	RecentFailures []domain.Failure          // the latest failed runs
	// DLQ is the dead-letter queue's size; DLQCapped says counting stopped
	// at the cap, so it is at least that.
	DLQ           int64
	DLQCapped     bool
	CompletedHour int64 // runs that succeeded in the last hour
	FailedHour    int64 // runs that failed in the last hour
	// Retrying counts the scheduled jobs that wait for a retry (shown
	// apart from the scheduled count), up to the count cap.
	Retrying       int64
	RetryingCapped bool // Retrying stopped at the cap
	// Sleeping counts the waiting jobs that sleep (shown apart from those
	// that wait for a signal or an event).
	Sleeping       int64
	SleepingCapped bool // Sleeping stopped at the cap
	// Firing are the alerts firing now.
	Firing []domain.Alert
	// Queues are the busiest queues, for the per-queue summary.
	Queues []domain.QueueInfo
	// Range is the throughput chart's span; RangeError says a range asked
	// for was not one the chart has.
	Range      ChartRange
	RangeError string
}

// JobsFilter is the Jobs page's filter form.
type JobsFilter struct {
	Status string // a job state, or "" for all
	Type   string // a job type, or "" for all
	Queue  string // a queue, or "" for all
	Q      string // search text: an id, idempotency key, type or error text
	// Series is a recurring series' id: its runs.
	Series string
	// Batch is a batch's id: its members.
	Batch string
	// Sort is one of the list's orders (ListOrders); Before
	// ("2006-01-02T15:04", UTC) starts a list ordered latest first at jobs
	// created (failed, started, finished: the order's time) before it.
	Sort   string
	Before string
	// Page is the page number jumped to ("" for none).
	Page string
	// Cursor is the position of the page shown, from the previous page's
	// NextCursor ("" for the first page).
	Cursor string
}

// Narrowed reports whether the filter leaves jobs out (paging does not).
func (f JobsFilter) Narrowed() bool {
	return f.Status != "" || f.Type != "" || f.Queue != "" || f.Q != "" || f.Series != "" || f.Batch != "" || f.Sort != "" || f.Before != ""
}

// JobsList is a page of the Jobs, DLQ or Bin tables.
type JobsList struct {
	Kind       string // jobs, dlq, bin
	Filter     JobsFilter
	Jobs       []*jobs.Job
	NextCursor string // where the next page starts; "" on the last page
	HasCursor  bool   // this is not the first page
	// Page is the page's number when known (a jump, or a page after
	// one); zero otherwise.
	Page   int
	Error  string   // why the list could not be read, shown instead
	Types  []string // the job types known, for the filter
	Queues []string // the queues known, for the filter
	// Now is when the list was read.
	Now time.Time
	// Total is how many jobs the list's filter shows (at least, when
	// TotalCapped: a search counted so far); QueueTotal is the size of the
	// dead-letter queue or the bin.
	Total       int64
	TotalCapped bool
	QueueTotal  int64
	// HasTotal says Total was read: the list offers its actions on every
	// job it shows.
	HasTotal bool
	// Groups, when set, show the list grouped by error instead.
	Groups []domain.ErrorGroup
	// Counts are the jobs per state within the list's queue or type
	// filter (the Jobs list; nil when its filter cannot be counted that
	// way: a search, a series, a batch, or a queue and a type at once).
	Counts []StatusCount
}

// JobDetail is the Job detail page.
type JobDetail struct {
	Job        *jobs.Job
	Executions []domain.Execution // the job's runs
	// Workflow is the workflow the job belongs to, empty when it has no
	// dependencies either way.
	Workflow domain.WorkflowGraph
	Audit    []domain.AuditEntry // what people and the API did to it
	// Explain says why the job is where it is.
	Explain *domain.Explanation
	// Log is the start of the job's log (at most JobLogShown lines).
	Log []domain.LogEntry
	// Data is what the job received from its parents and added to its
	// workflow; Batch is the batch it belongs to (member or callback).
	Data  domain.JobData
	Batch *domain.Batch
	// Steps are the steps the job recorded, in their order.
	Steps []jobs.StepRecord
}

// JobLogShown is how many log lines the job page shows.
const JobLogShown = 500

// CreateForm is the Create job form, with values and errors by field.
type CreateForm struct {
	Values map[string]string // by field name, as typed
	Errors map[string]string // by field name
	Types  []string          // the job types offered
	// Message is an error not tied to a field.
	Message string
	// Schema is the payload's fields from the chosen type's schema
	// (SchemaOf), with what was typed into them and their errors.
	Schema   []SchemaField
	SchemaOf string
}

// Value returns the form value for field.
func (f CreateForm) Value(field string) string { return f.Values[field] }

// Err returns the error for field.
func (f CreateForm) Err(field string) string { return f.Errors[field] }

// SettingsForm is the Settings page.
type SettingsForm struct {
	Values  map[string]string      // by setting key, as shown or typed
	Errors  map[string]string      // by setting key
	Changes []domain.SettingChange // the latest changes, who made them and when
	Saved   []string               // the keys the last save changed
	Message string                 // an error not tied to a setting
}

// BenchAlgorithms are the choices the Benchmark page offers and accepts.
var BenchAlgorithms = []string{"both", domain.StrategyHeap, domain.StrategyTimingWheel}

// BenchmarkPage is the Benchmark page and its results.
type BenchmarkPage struct {
	N         string               // entries, as typed
	Algorithm string               // one of BenchAlgorithms
	Error     string               // why N was refused
	Results   []domain.BenchResult // of the run, when Ran
	Ran       bool                 // a run finished: show Results
	Elapsed   time.Duration        // how long the run took
}

// filterVals carries a list's filters with its bulk actions, so the table
// that comes back shows the same selection of jobs.
func filterVals(l JobsList) string {
	b, _ := json.Marshal(map[string]string{"status": l.Filter.Status, "type": l.Filter.Type, "queue": l.Filter.Queue, "q": l.Filter.Q, "series": l.Filter.Series,
		"batch": l.Filter.Batch, "sort": l.Filter.Sort, "before": l.Filter.Before})
	return string(b)
}

// StatusCount is how many jobs are in one state ("retrying" for scheduled
// jobs waiting for a retry; Merged says scheduled counts them too).
type StatusCount struct {
	Status string
	N      int64
	Merged bool
}
