package views

import (
	"encoding/json"
	"time"

	"flint/jobs"
)

// Chrome is what every page's frame needs.
type Chrome struct {
	Title string
	// Nav names the current section, for aria-current.
	Nav  string
	User string
	// Role is the signed-in person's role, shown beside Sign out.
	Role string
	CSRF string
	// MailURL is the mail catcher's web UI ("" hides the link).
	MailURL string
	Now     time.Time
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
	Counts         []jobs.StateCount
	Throughput     []jobs.ThroughputBucket
	Workers        []jobs.WorkerInfo
	RecentFailures []jobs.Failure
	DLQ            int64
	DLQCapped      bool
	CompletedHour  int64
	FailedHour     int64
}

// JobsFilter is the Jobs page's filter form.
type JobsFilter struct {
	Status string
	Type   string
	Queue  string
	Q      string
	Cursor string
}

// Narrowed reports whether the filter leaves jobs out (paging does not).
func (f JobsFilter) Narrowed() bool {
	return f.Status != "" || f.Type != "" || f.Queue != "" || f.Q != ""
}

// JobsList is a page of the Jobs, DLQ or Bin tables.
type JobsList struct {
	Kind       string // jobs, dlq, bin
	Filter     JobsFilter
	Jobs       []*jobs.Job
	NextCursor string
	HasCursor  bool // this is not the first page
	Error      string
	Types      []string
	Queues     []string
}

// JobDetail is the Job detail page.
type JobDetail struct {
	Job          *jobs.Job
	Executions   []jobs.Execution
	Dependencies jobs.Dependencies
	Audit        []jobs.AuditEntry
	// Explain says why the job is where it is.
	Explain *jobs.Explanation
	// Log is the start of the job's log (at most JobLogShown lines).
	Log []jobs.LogEntry
}

// JobLogShown is how many log lines the job page shows.
const JobLogShown = 500

// CreateForm is the Create job form, with values and errors by field.
type CreateForm struct {
	Values map[string]string
	Errors map[string]string
	Types  []string
	// Message is an error not tied to a field.
	Message string
}

// Value returns the form value for field.
func (f CreateForm) Value(field string) string { return f.Values[field] }

// Err returns the error for field.
func (f CreateForm) Err(field string) string { return f.Errors[field] }

// SettingsForm is the Settings page.
type SettingsForm struct {
	Values  map[string]string
	Errors  map[string]string
	Changes []jobs.SettingChange
	Saved   []string
	Message string
}

// BenchAlgorithms are the choices the Benchmark page offers and accepts.
var BenchAlgorithms = []string{"both", jobs.StrategyHeap, jobs.StrategyTimingWheel}

// BenchmarkPage is the Benchmark page and its results.
type BenchmarkPage struct {
	N         string
	Algorithm string
	Error     string
	Results   []jobs.BenchResult
	Ran       bool
	Elapsed   time.Duration
}

// filterVals carries a list's filters with its bulk actions, so the table
// that comes back shows the same selection of jobs.
func filterVals(l JobsList) string {
	b, _ := json.Marshal(map[string]string{"status": l.Filter.Status, "type": l.Filter.Type, "queue": l.Filter.Queue, "q": l.Filter.Q})
	return string(b)
}
