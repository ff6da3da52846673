package db

import (
	"time"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// Listings ordered by when jobs started or finished (domain.ListParams.By).
// A job without that time sorts as the latest: first newest first, last
// oldest first, as PostgreSQL orders NULLs by default, so that the
// history's indexes on those times (every history row has finished) serve
// the order in either direction. jobs itself has no index on them: it
// holds what is alive and fresh, and an index on started_at would cost
// every start its in-place (HOT) update.

// checkOrder refuses an order or a jump a listing cannot give.
func checkOrder(p domain.ListParams) error {
	switch p.By {
	case domain.SortCreated, domain.SortStarted, domain.SortFinished:
	default:
		return jobs.Invalid("sort", "must be created, started or finished")
	}
	if p.InBin && (p.Oldest || p.By != domain.SortCreated) {
		return jobs.Invalid("sort", "the bin lists the latest deleted first only")
	}
	if p.Offset < 0 || p.Offset > domain.MaxListOffset {
		return jobs.Invalid("page", "jumps at most %d jobs into a list; narrow the filter or use the next-page links", domain.MaxListOffset)
	}
	if p.Offset > 0 && p.Cursor != "" {
		return jobs.Invalid("page", "cannot be given with a cursor")
	}
	return nil
}

// sortColumn is the column a listing is ordered by.
func sortColumn(by domain.SortKey) string {
	if by == domain.SortStarted {
		return "started_at"
	}
	return "finished_at"
}

// sortTime is j's time in the order by.
func sortTime(j *jobs.Job, by domain.SortKey) *time.Time {
	if by == domain.SortStarted {
		return j.StartedAt
	}
	return j.FinishedAt
}

// afterSorted adds the condition that starts a page ordered by a time:
// past the cursor, or, for a first page latest first, before p.Before.
func (q *listQuery) afterSorted(p domain.ListParams) error {
	col := sortColumn(p.By)
	if p.Cursor == "" {
		if p.Before != nil && !p.Oldest {
			q.where = append(q.where, col+" < "+q.arg(*p.Before))
		}
		return nil
	}
	c, err := decodeCursor(p.Cursor)
	if err != nil {
		return err
	}
	if c.By != p.By || (c.At == nil) != c.Null {
		return jobs.Invalid("cursor", "belongs to a listing in another order; start again without one")
	}
	id := q.arg(c.ID)
	switch {
	case c.Null && p.Oldest: // the jobs without the time come last
		q.where = append(q.where, "("+col+" IS NULL AND id > "+id+")")
	case c.Null:
		q.where = append(q.where, "(("+col+" IS NULL AND id < "+id+") OR "+col+" IS NOT NULL)")
	case p.Oldest:
		q.where = append(q.where, "(("+col+", id) > ("+q.arg(*c.At)+", "+id+") OR "+col+" IS NULL)")
	default:
		q.where = append(q.where, "("+col+", id) < ("+q.arg(*c.At)+", "+id+")")
	}
	return nil
}

// listSortedSQL is the listing statement ordered by a time, over jobs and,
// when finished jobs are asked for, the history.
func listSortedSQL(cond, histCond, lim string, p domain.ListParams) string {
	col, dir := sortColumn(p.By), order(p)
	by := ` ORDER BY ` + col + ` ` + dir + `, id ` + dir + ` LIMIT ` + lim
	live := listJobsFrom + cond + by
	if p.InBin || !listsHistory(p.Statuses) {
		return live
	}
	return `(` + live + `) UNION ALL (SELECT ` + jobColumns + ` FROM job_history WHERE ` + histCond + by + `)` + by
}
