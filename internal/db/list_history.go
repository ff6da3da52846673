package db

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/internal/domain"
)

// A listing's text search of the history, a day at a time.

// historySearchSQL finds, in the history jobs that finished in [$n+1,
// $n+2), those matching the listing's conditions (%s) and, by type ($n+3:
// the types the text starts) or by a part of the last error ($n+4,
// through its trigram index), newest first, up to $n+5.
const historySearchSQL = `SELECT id, finished_at FROM job_history
WHERE finished_at >= $%[2]d AND finished_at < $%[3]d AND %[1]s
  AND (type = ANY($%[4]d::text[]) OR last_error ILIKE $%[5]d)
ORDER BY id DESC LIMIT $%[6]d`

// historyKeySQL finds the job in the history that holds idempotency key
// $n+1 if it matches the listing's conditions (%s).
const historyKeySQL = `SELECT id, finished_at FROM job_history
WHERE id = ANY(ARRAY(SELECT job_id FROM job_history_keys WHERE idempotency_key = $%[2]d)) AND %[1]s`

// historyTypesSQL finds the types in the history that start with $1.
const historyTypesSQL = `SELECT DISTINCT type FROM job_history_counts WHERE type LIKE $1`

// historyHit is a job the history's search found: its id and when it
// finished, which names its partition.
type historyHit struct {
	ID         uuid.UUID
	FinishedAt time.Time
}

// historyHits is what searchHistory found: the ids, and the range of
// their finish times (zero when nothing was found), so that reading the
// rows prunes the history to the partitions that hold them. Without the
// range, planning the read considered every partition, ~20 ms a page at
// 800 partitions.
type historyHits struct {
	IDs    []uuid.UUID
	lo, hi *time.Time
}

// collectHits turns hits, newest first, into historyHits.
func collectHits(hits []historyHit) historyHits {
	var h historyHits
	for _, x := range hits {
		h.IDs = append(h.IDs, x.ID)
		if h.lo == nil || x.FinishedAt.Before(*h.lo) {
			h.lo = &x.FinishedAt
		}
		if h.hi == nil || x.FinishedAt.After(*h.hi) {
			h.hi = &x.FinishedAt
		}
	}
	return h
}

// searchHistory finds, newest first, up to limit jobs in the
// history that match a text search and the listing's other conditions
// (cond, with args). It searches a day of the history at a time, newest
// day first, each through the type and trigram indexes of that day's
// partitions, and stops once it holds limit ids all newer than any job of
// the days it has not searched can have: a job finishes after it is
// created, so one that finished on an older day has an older id. Asked of
// the whole history at once, the newest-first merge read every day
// without a match to its end: 2.3 s over ten million jobs.
func (s *Store) searchHistory(ctx context.Context, p domain.ListParams, text, cond string, args []any, limit int) (historyHits, error) {
	var hits []historyHit
	n := len(args)
	rows, err := s.pool.Query(ctx, fmt.Sprintf(historyKeySQL, cond, n+1), append(slices.Clone(args), text)...)
	if err == nil {
		hits, err = pgx.CollectRows(rows, pgx.RowToStructByPos[historyHit])
	}
	if err != nil {
		return historyHits{}, err
	}
	var types []string
	if rows, err = s.pool.Query(ctx, historyTypesSQL, escapeLike(text)+"%"); err == nil {
		types, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		return historyHits{}, err
	}
	parts, err := s.HistoryPartitions(ctx)
	if err != nil {
		return historyHits{}, err
	}
	var days []time.Time
	for _, hp := range parts {
		if (len(p.Statuses) == 0 || slices.Contains(p.Statuses, hp.State)) && !slices.ContainsFunc(days, hp.Day.Equal) {
			days = append(days, hp.Day)
		}
	}
	slices.SortFunc(days, func(a, b time.Time) int { return b.Compare(a) })
	q := fmt.Sprintf(historySearchSQL, cond, n+1, n+2, n+3, n+4, n+5)
	part := "%" + escapeLike(text) + "%"
	// The newest day first, then two, four, eight days at once: a term
	// found at once costs one day, one found nowhere a handful of
	// statements rather than one per day.
	for i, width := 0, 1; i < len(days); i, width = i+width, width*2 {
		newest, oldest := days[i], days[min(i+width, len(days))-1]
		// Every job not searched yet finished before the end of newest's
		// day, so was created before it (an hour of slack for the
		// enqueuer's clock): once the page's last id is newer than that,
		// nothing older can enter.
		if floor := uuidV7Floor(newest.Add(25 * time.Hour)); len(hits) >= limit && bytes.Compare(hits[limit-1].ID[:], floor[:]) > 0 {
			break
		}
		rows, err := s.pool.Query(ctx, q, append(slices.Clone(args), oldest, newest.Add(24*time.Hour), types, part, limit)...)
		if err != nil {
			return historyHits{}, err
		}
		found, err := pgx.CollectRows(rows, pgx.RowToStructByPos[historyHit])
		if err != nil {
			return historyHits{}, err
		}
		hits = append(hits, found...)
		slices.SortFunc(hits, func(a, b historyHit) int { return bytes.Compare(b.ID[:], a.ID[:]) })
		hits = slices.CompactFunc(hits, func(a, b historyHit) bool { return a.ID == b.ID })
		if len(hits) > limit {
			hits = hits[:limit]
		}
	}
	return collectHits(hits), nil
}
