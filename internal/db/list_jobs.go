package db

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// cursor is the position after the last row of a page. Live listings are
// ordered by id (UUIDv7: creation order), newest first; the bin by deletion
// time, most recent first.
type cursor struct {
	ID        uuid.UUID  `json:"id"`
	DeletedAt *time.Time `json:"d,omitempty"`
	// By, At and Null place a page ordered by a time (domain.ListParams.By):
	// the order, and the last row's time, or that it had none.
	By   domain.SortKey `json:"b,omitempty"`
	At   *time.Time     `json:"t,omitempty"`
	Null bool           `json:"n,omitempty"`
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
// table: each page is one index range scan. Parameters out of range come
// back as a jobs validation error naming the field.
func (s *Store) ListJobs(ctx context.Context, p domain.ListParams) (domain.Page, error) {
	limit, err := listLimit(p)
	if err != nil {
		return domain.Page{}, err
	}
	if err := checkOrder(p); err != nil {
		return domain.Page{}, err
	}
	q := &listQuery{}
	q.filter(p)
	if p.By != domain.SortCreated {
		err = q.afterSorted(p)
	} else {
		err = q.after(p)
	}
	if err != nil {
		return domain.Page{}, err
	}
	cond := strings.Join(q.where, " AND ")
	histCond := cond
	if q.text != "" && !p.InBin && listsHistory(p.Statuses) && p.By != domain.SortCreated {
		// Only the dead-letter history is searched in place (it is small,
		// and its errors have a trigram index).
		if !slices.Equal(p.Statuses, []jobs.State{jobs.StateDeadLetter}) {
			return domain.Page{}, jobs.Invalid("sort", "ordering by start or finish time works without a text search of finished jobs; order by creation, or narrow by status")
		}
		histCond = strings.Replace(cond, searchMark, q.searchLive, 1)
	} else if q.text != "" && !p.InBin && listsHistory(p.Statuses) {
		if p.Oldest {
			return domain.Page{}, jobs.Invalid("sort", "oldest first works without a text search of finished jobs; search newest first, or narrow by type or queue instead")
		}
		hits, err := s.searchHistory(ctx, p, q.text, strings.Replace(cond, searchMark, q.searchNone, 1), q.args, limit+1)
		if err != nil {
			return domain.Page{}, fmt.Errorf("list jobs: %w", err)
		}
		histCond = strings.Replace(cond, searchMark, "id = ANY("+q.arg(hits.IDs)+"::uuid[]) AND finished_at BETWEEN "+
			q.arg(hits.lo)+"::timestamptz AND "+q.arg(hits.hi)+"::timestamptz", 1)
	}
	live := strings.Replace(cond, searchMark, q.searchLive, 1)
	// A jump by page number reads the pages before it and drops them
	// (at most domain.MaxListOffset rows): every order can jump, and the
	// next page continues from the page's last row as after any other.
	lim := q.arg(limit + 1 + p.Offset)
	query := listJobsSQL(live, histCond, lim, p)
	if p.By != domain.SortCreated {
		query = listSortedSQL(live, histCond, lim, p)
	}
	js, err := collectJobs(s.pool.Query(ctx, query, q.args...))
	if err != nil {
		return domain.Page{}, fmt.Errorf("list jobs: %w", err)
	}
	js = js[min(p.Offset, len(js)):]
	page := domain.Page{Jobs: js}
	if len(js) > limit {
		last := js[limit-1]
		page.Jobs = js[:limit:limit]
		c := cursor{ID: last.ID, DeletedAt: last.DeletedAt, By: p.By}
		if p.By != domain.SortCreated {
			c.At = sortTime(last, p.By)
			c.Null = c.At == nil
		}
		page.NextCursor = c.encode()
	}
	return page, nil
}

// listLimit checks a listing's page size and free-text fields and returns
// the page size, 50 when none was asked for.
func listLimit(p domain.ListParams) (int, error) {
	limit := p.Limit
	if limit == 0 {
		limit = 50
	}
	if limit < 1 || limit > domain.MaxListLimit {
		return 0, jobs.Invalid("limit", "must be between 1 and %d", domain.MaxListLimit)
	}
	for _, f := range []struct{ name, v string }{{"type", p.Type}, {"queue", p.Queue}, {"q", p.Q}} {
		if len(f.v) > 200 || !jobs.CleanText(f.v) {
			return 0, jobs.Invalid(f.name, "must be at most 200 characters of text without control characters")
		}
	}
	return limit, nil
}

// listQuery collects a listing's conditions and their arguments, numbered
// in the order they are added.
type listQuery struct {
	where []string
	args  []any
	// text is the text search (not an id), empty when there is none; the
	// conditions then hold searchMark, which searchLive replaces on jobs
	// and searchNone when only naming the arguments for the history.
	text                   string
	searchLive, searchNone string
}

// arg adds v to the arguments and returns its placeholder.
func (q *listQuery) arg(v any) string {
	q.args = append(q.args, v)
	return "$" + strconv.Itoa(len(q.args))
}

// filter adds the conditions that pick which jobs are listed.
func (q *listQuery) filter(p domain.ListParams) {
	if p.InBin {
		q.where = append(q.where, "deleted_at IS NOT NULL")
	} else {
		q.where = append(q.where, "deleted_at IS NULL")
	}
	q.statuses(p.Statuses)
	if p.Type != "" {
		q.where = append(q.where, "type = "+q.arg(p.Type))
	}
	if p.Queue != "" {
		q.where = append(q.where, "queue = "+q.arg(p.Queue))
	}
	if p.Retrying != nil {
		if *p.Retrying {
			q.where = append(q.where, "attempt > 0")
		} else {
			q.where = append(q.where, "attempt = 0")
		}
	}
	if p.Sleeping != nil {
		if *p.Sleeping {
			q.where = append(q.where, "wait_kind = 'sleep'")
		} else {
			q.where = append(q.where, "wait_kind IS DISTINCT FROM 'sleep'")
		}
	}
	if p.ScheduleID != nil {
		q.where = append(q.where, "schedule_id = "+q.arg(*p.ScheduleID))
	}
	if p.BatchID != nil {
		// Members are created after their batch: their ids (UUIDv7) are
		// no older than the batch's, which bounds the scan.
		q.where = append(q.where, "batch_id = "+q.arg(*p.BatchID), "id >= "+q.arg(uuidV7Floor(uuidTime(*p.BatchID))))
	}
	if text := strings.TrimSpace(p.Q); text != "" {
		q.search(text)
	}
}

// search adds the condition for p.Q: a job id, or else a text matched
// against the idempotency key, the start of the type and the last error.
func (q *listQuery) search(text string) {
	if id, err := uuid.Parse(text); err == nil {
		q.where = append(q.where, "id = "+q.arg(id))
		return
	}
	q.text = text
	like := escapeLike(text)
	q.where = append(q.where, searchMark)
	key, prefix, part := q.arg(text), q.arg(like+"%"), q.arg("%"+like+"%")
	q.searchLive = "(idempotency_key = " + key + " OR type LIKE " + prefix + " OR last_error ILIKE " + part
	if isShortID(text) {
		// The eight hex digits the dashboard prints for a job
		// (domain.ShortID). Checked on the rows the search reads anyway.
		q.searchLive += " OR right(id::text, 8) = lower(" + key + ")"
	}
	q.searchLive += ")"
	// The history's statements search their own way but take the same
	// arguments; this names the search's with their type and is true.
	q.searchNone = "(" + key + "::text IS NULL OR " + prefix + "::text IS NULL OR " + part + "::text IS NULL OR true)"
}

// after adds the condition that starts the page: past the cursor, or
// before a time for a first page newest first.
func (q *listQuery) after(p domain.ListParams) error {
	if p.Cursor == "" {
		if p.Before != nil && !p.Oldest && !p.InBin {
			q.where = append(q.where, "id < "+q.arg(uuidV7Floor(*p.Before)))
		}
		return nil
	}
	c, err := decodeCursor(p.Cursor)
	if err != nil {
		return err
	}
	if c.By != p.By {
		return jobs.Invalid("cursor", "belongs to a listing in another order; start again without one")
	}
	switch {
	case p.InBin:
		if c.DeletedAt == nil {
			return jobs.Invalid("cursor", "belongs to a different listing; start again without one")
		}
		q.where = append(q.where, "(deleted_at, id) < ("+q.arg(*c.DeletedAt)+", "+q.arg(c.ID)+")")
	case p.Oldest:
		q.where = append(q.where, "id > "+q.arg(c.ID))
	default:
		q.where = append(q.where, "id < "+q.arg(c.ID))
	}
	return nil
}

// listJobsFrom starts every listing statement.
const listJobsFrom = `SELECT ` + jobColumns + ` FROM jobs WHERE `

// searchMark stands for a text search among a listing's conditions: the
// live table and the history search differently.
const searchMark = "/*search*/"

// listJobsSQL is the listing statement for the conditions cond (on jobs)
// and histCond (on job_history), returning up to lim rows (a parameter
// placeholder): the live listing, merged with the history's when finished
// jobs are asked for.
func listJobsSQL(cond, histCond, lim string, p domain.ListParams) string {
	live := listLiveSQL(cond, lim, p)
	if p.InBin || !listsHistory(p.Statuses) {
		return live
	}
	// Each day partition's index gives its newest first; the history
	// merges them, and its merge with jobs stops at the page's end.
	dir := order(p)
	return `(` + live + `) UNION ALL (SELECT ` + jobColumns + ` FROM job_history WHERE ` + histCond +
		` ORDER BY id ` + dir + ` LIMIT ` + lim + `) ORDER BY id ` + dir + ` LIMIT ` + lim
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
func listLiveSQL(cond, lim string, p domain.ListParams) string {
	switch {
	case p.InBin:
		return listJobsFrom + cond + ` ORDER BY deleted_at DESC, id DESC LIMIT ` + lim
	case !slices.Contains(p.Statuses, jobs.StateRunning) && !slices.Contains(p.Statuses, jobs.StateClaimed) && len(p.Statuses) > 0:
		// The listing indexes leave running jobs out; saying so lets the
		// planner use them for states it only learns at run time.
		return listNotRunning(cond, lim, p)
	default:
		// Running jobs (through the lease index: at most as many as
		// workers) merged with the others (through the listing indexes).
		dir := order(p)
		return `(` + listNotRunning(cond, lim, p) + `)` +
			` UNION ALL (` + listJobsFrom + cond + ` AND status = 'running' ORDER BY id ` + dir + ` LIMIT ` + lim + `)` +
			` ORDER BY id ` + dir + ` LIMIT ` + lim
	}
}

// listNotRunning is the listing of the jobs that are not running that
// match cond, newest first. Filtered by type or queue, it first picks the
// ids (an index-only scan of that column's listing index, which holds
// type or queue then id, read backwards for newest first) and then reads
// those rows. Asked for whole rows at once, the planner preferred to read
// the primary key backwards and filter, expecting the filtered column's
// jobs to be spread evenly over time; with ten million jobs, a queue whose
// latest jobs lay behind a million of a busier queue's took 350 ms to
// list, against 1 ms.
func listNotRunning(cond, lim string, p domain.ListParams) string {
	dir := order(p)
	if p.Type == "" && p.Queue == "" {
		return listJobsFrom + cond + ` AND status <> 'running' ORDER BY id ` + dir + ` LIMIT ` + lim
	}
	return listJobsFrom + `id IN (SELECT id FROM jobs WHERE ` + cond + ` AND status <> 'running' ORDER BY id ` + dir + ` LIMIT ` + lim +
		`) ORDER BY id ` + dir
}

// order is a listing's direction: newest first unless Oldest.
func order(p domain.ListParams) string {
	if p.Oldest {
		return "ASC"
	}
	return "DESC"
}

// escapeLike escapes LIKE wildcards so user text matches literally.
func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}
