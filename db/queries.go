package db

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"flint/jobs"
)

// getJobSQL reads one job, binned or not, live or in the history (looked
// at only when jobs does not have it).
const getJobSQL = `(SELECT ` + jobColumns + ` FROM jobs WHERE id = $1)
UNION ALL (SELECT ` + jobColumns + ` FROM job_history WHERE id = $1 AND finished_at >= $2) LIMIT 1`

// GetJob returns one job, including a binned one.
func (s *Store) GetJob(ctx context.Context, id uuid.UUID) (*jobs.Job, error) {
	j, err := collectOneJob(s.pool.Query(ctx, getJobSQL, id, historyFloor(id)))
	if err != nil && !errors.Is(err, jobs.ErrNotFound) {
		return nil, fmt.Errorf("get job: %w", err)
	}
	return j, err
}

// getJobsSQL reads the jobs among a set of ids, binned or not, live or in
// the history.
const getJobsSQL = `SELECT ` + jobColumns + ` FROM jobs WHERE id = ANY($1::uuid[])
UNION ALL SELECT ` + jobColumns + ` FROM job_history WHERE id = ANY($1::uuid[]) AND finished_at >= $2`

// GetJobs returns the jobs among ids that exist, binned or not, in no
// particular order: one query for a set of rows a page shows.
func (s *Store) GetJobs(ctx context.Context, ids []uuid.UUID) ([]*jobs.Job, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	out, err := collectJobs(s.pool.Query(ctx, getJobsSQL, ids, historyFloor(ids...)))
	if err != nil {
		return nil, fmt.Errorf("get jobs: %w", err)
	}
	return out, nil
}

// executionRow is a job_executions row.
type executionRow struct {
	JobID      uuid.UUID `db:"job_id"`
	Seq        int       `db:"seq"`
	Attempt    int       `db:"attempt"`
	WorkerID   string    `db:"worker_id"`
	StartedAt  time.Time `db:"started_at"`
	FinishedAt time.Time `db:"finished_at"`
	Outcome    string    `db:"outcome"`
	Error      *string   `db:"error"`
	DurationMS int64     `db:"duration_ms"`
}

// executionsSQL reads a job's runs, from job_executions or, for a job in
// the history, from the runs it carries.
const executionsSQL = `
SELECT job_id, seq, attempt, worker_id, started_at, finished_at, outcome, error, duration_ms
FROM job_executions WHERE job_id = $1
UNION ALL
SELECT h.id, x.seq, x.attempt, x.worker_id, x.started_at, x.finished_at, x.outcome, x.error, x.duration_ms
FROM job_history h, jsonb_to_recordset(h.execution_rows) AS ` + executionRecord + `
WHERE h.id = $1 AND h.finished_at >= $2
ORDER BY seq`

// ListExecutions returns every recorded run of a job in order, followed by
// the run in progress when the job is running.
func (s *Store) ListExecutions(ctx context.Context, j *jobs.Job) ([]jobs.Execution, error) {
	var rows []executionRow
	if err := s.sqlx.SelectContext(ctx, &rows, executionsSQL, j.ID, historyFloor(j.ID)); err != nil {
		return nil, fmt.Errorf("list executions: %w", err)
	}
	out := make([]jobs.Execution, 0, len(rows)+1)
	for _, r := range rows {
		finished, dur := r.FinishedAt, r.DurationMS
		out = append(out, jobs.Execution{
			JobID: r.JobID, Seq: r.Seq, Attempt: r.Attempt, WorkerID: r.WorkerID,
			StartedAt: r.StartedAt, FinishedAt: &finished, Outcome: jobs.Outcome(r.Outcome),
			Error: r.Error, DurationMS: &dur,
		})
	}
	if j.Status == jobs.StateRunning && j.StartedAt != nil {
		worker := ""
		if j.WorkerID != nil {
			worker = *j.WorkerID
		}
		out = append(out, jobs.Execution{
			JobID: j.ID, Seq: j.Executions, Attempt: j.Attempt, WorkerID: worker,
			StartedAt: *j.StartedAt, Outcome: jobs.OutcomeRunning,
		})
	}
	return out, nil
}

// cursor is the position after the last row of a page. Live listings are
// ordered by id (UUIDv7: creation order), newest first; the bin by deletion
// time, most recent first.
type cursor struct {
	ID        uuid.UUID  `json:"id"`
	DeletedAt *time.Time `json:"d,omitempty"`
}

func (c cursor) encode() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (cursor, error) {
	var c cursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil || c.ID == uuid.Nil {
		return c, jobs.Invalid("cursor", "is not a cursor this server returned; start again without one")
	}
	return c, nil
}

// ListJobs returns one page of jobs, newest first. It never counts the whole
// table: each page is one index range scan.
func (s *Store) ListJobs(ctx context.Context, p jobs.ListParams) (jobs.Page, error) {
	limit := p.Limit
	if limit == 0 {
		limit = 50
	}
	if limit < 1 || limit > jobs.MaxListLimit {
		return jobs.Page{}, jobs.Invalid("limit", "must be between 1 and %d", jobs.MaxListLimit)
	}
	for _, f := range []struct{ name, v string }{{"type", p.Type}, {"queue", p.Queue}, {"q", p.Q}} {
		if len(f.v) > 200 || !jobs.CleanText(f.v) {
			return jobs.Page{}, jobs.Invalid(f.name, "must be at most 200 characters of text without control characters")
		}
	}
	var (
		where []string
		args  []any
	)
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if p.InBin {
		where = append(where, "deleted_at IS NOT NULL")
	} else {
		where = append(where, "deleted_at IS NULL")
	}
	switch len(p.Statuses) {
	case 0:
	case 1:
		where = append(where, "status = "+arg(string(p.Statuses[0])))
	default:
		where = append(where, "status = ANY("+arg(stateStrings(p.Statuses))+"::text[])")
	}
	if p.Type != "" {
		where = append(where, "type = "+arg(p.Type))
	}
	if p.Queue != "" {
		where = append(where, "queue = "+arg(p.Queue))
	}
	if q := strings.TrimSpace(p.Q); q != "" {
		if id, err := uuid.Parse(q); err == nil {
			where = append(where, "id = "+arg(id))
		} else {
			like := escapeLike(q)
			where = append(where, "(idempotency_key = "+arg(q)+" OR type LIKE "+arg(like+"%")+
				" OR last_error ILIKE "+arg("%"+like+"%")+")")
		}
	}
	if p.Cursor != "" {
		c, err := decodeCursor(p.Cursor)
		if err != nil {
			return jobs.Page{}, err
		}
		if p.InBin {
			if c.DeletedAt == nil {
				return jobs.Page{}, jobs.Invalid("cursor", "belongs to a different listing; start again without one")
			}
			where = append(where, "(deleted_at, id) < ("+arg(*c.DeletedAt)+", "+arg(c.ID)+")")
		} else {
			where = append(where, "id < "+arg(c.ID))
		}
	}
	query := listJobsSQL(strings.Join(where, " AND "), arg(limit+1), p)
	js, err := collectJobs(s.pool.Query(ctx, query, args...))
	if err != nil {
		return jobs.Page{}, fmt.Errorf("list jobs: %w", err)
	}
	page := jobs.Page{Jobs: js}
	if len(js) > limit {
		last := js[limit-1]
		page.Jobs = js[:limit:limit]
		page.NextCursor = cursor{ID: last.ID, DeletedAt: last.DeletedAt}.encode()
	}
	return page, nil
}

// listJobsFrom starts every listing statement.
const listJobsFrom = `SELECT ` + jobColumns + ` FROM jobs WHERE `

// listJobsSQL is the listing statement for the conditions cond, returning
// up to lim rows (a parameter placeholder): the live listing, merged with
// the history's when finished jobs are asked for.
func listJobsSQL(cond, lim string, p jobs.ListParams) string {
	live := listLiveSQL(cond, lim, p)
	if p.InBin || !listsHistory(p.Statuses) {
		return live
	}
	// Each day partition's index gives its newest first; the history
	// merges them, and its merge with jobs stops at the page's end.
	return `(` + live + `) UNION ALL (SELECT ` + jobColumns + ` FROM job_history WHERE ` + cond +
		` ORDER BY id DESC LIMIT ` + lim + `) ORDER BY id DESC LIMIT ` + lim
}

// listsHistory reports whether a listing of these states (none: every
// state) can show jobs from the history.
func listsHistory(states []jobs.State) bool {
	if len(states) == 0 {
		return true
	}
	for _, s := range states {
		if slices.Contains(historyStates, s) {
			return true
		}
	}
	return false
}

// listLiveSQL is the listing statement over jobs alone.
func listLiveSQL(cond, lim string, p jobs.ListParams) string {
	switch {
	case p.InBin:
		return listJobsFrom + cond + ` ORDER BY deleted_at DESC, id DESC LIMIT ` + lim
	case !slices.Contains(p.Statuses, jobs.StateRunning) && len(p.Statuses) > 0:
		// The listing indexes leave running jobs out; saying so lets the
		// planner use them for states it only learns at run time.
		return listNotRunning(cond, lim, p)
	default:
		// Running jobs (through the lease index: at most as many as
		// workers) merged with the others (through the listing indexes).
		return `(` + listNotRunning(cond, lim, p) + `)` +
			` UNION ALL (` + listJobsFrom + cond + ` AND status = 'running' ORDER BY id DESC LIMIT ` + lim + `)` +
			` ORDER BY id DESC LIMIT ` + lim
	}
}

// listNotRunning is the listing of the jobs that are not running that
// match cond, newest first. Filtered by type or queue, it first picks the
// ids (an index-only scan of that column's listing index, which holds
// type or queue then id descending) and then reads those rows. Asked for
// whole rows at once, the planner preferred to read the primary key
// backwards and filter, expecting the filtered column's jobs to be spread
// evenly over time; with ten million jobs, a queue whose latest jobs lay
// behind a million of a busier queue's took 350 ms to list, against 1 ms.
func listNotRunning(cond, lim string, p jobs.ListParams) string {
	if p.Type == "" && p.Queue == "" {
		return listJobsFrom + cond + ` AND status <> 'running' ORDER BY id DESC LIMIT ` + lim
	}
	return listJobsFrom + `id IN (SELECT id FROM jobs WHERE ` + cond + ` AND status <> 'running' ORDER BY id DESC LIMIT ` + lim +
		`) ORDER BY id DESC`
}

// escapeLike escapes LIKE wildcards so user text matches literally.
func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}
