package db

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
)

const insertAuditSQL = `
INSERT INTO audit_log (actor, source, ip, action, job_id, details)
SELECT $1, $2, $3, $4, unnest($5::uuid[]), $6::jsonb`

const insertAuditNoJobSQL = `
INSERT INTO audit_log (actor, source, ip, action, details) VALUES ($1, $2, $3, $4, $5::jsonb)`

// RecordAudit stores an operator action, once per job it touched (or once
// when it touched none).
func (s *Store) RecordAudit(ctx context.Context, e domain.AuditEntry, jobIDs ...uuid.UUID) error {
	details := e.Details
	if len(details) == 0 {
		details = json.RawMessage(`{}`)
	}
	actor := truncate(e.Actor, 300)
	ip := truncate(e.IP, 64)
	var err error
	if len(jobIDs) == 0 {
		_, err = s.pool.Exec(ctx, insertAuditNoJobSQL, actor, e.Source, ip, e.Action, string(details))
	} else {
		_, err = s.pool.Exec(ctx, insertAuditSQL, actor, e.Source, ip, e.Action, jobIDs, string(details))
	}
	if err != nil {
		return fmt.Errorf("record audit entry: %w", err)
	}
	return nil
}

// auditRow is an audit_log row.
type auditRow struct {
	ID      int64      `db:"id"`
	At      time.Time  `db:"at"`
	Actor   string     `db:"actor"`
	Source  string     `db:"source"`
	IP      string     `db:"ip"`
	Action  string     `db:"action"`
	JobID   *uuid.UUID `db:"job_id"`
	Details []byte     `db:"details"`
}

const listAuditSQL = `
SELECT id, at, actor, source, ip, action, job_id, details FROM audit_log
WHERE ($1::uuid IS NULL OR job_id = $1) AND ($2::bigint = 0 OR id < $2)
ORDER BY id DESC
LIMIT $3`

// ListAudit returns the audit entries q selects, newest first, q.Limit of
// them (100 when it is zero or above 500).
func (s *Store) ListAudit(ctx context.Context, q domain.AuditQuery) ([]domain.AuditEntry, error) {
	limit := q.Limit
	if limit <= 0 || limit > 500 {
		limit = 100
	}
	var rows []auditRow
	if err := s.sqlx.SelectContext(ctx, &rows, listAuditSQL, q.JobID, q.Before, limit); err != nil {
		return nil, fmt.Errorf("list audit entries: %w", err)
	}
	out := make([]domain.AuditEntry, len(rows))
	for i, r := range rows {
		out[i] = r.entry()
	}
	return out, nil
}

func (r auditRow) entry() domain.AuditEntry {
	return domain.AuditEntry{ID: r.ID, At: r.At, Actor: r.Actor, Source: r.Source, IP: r.IP,
		Action: r.Action, JobID: r.JobID, Details: r.Details}
}

const pruneAuditSQL = `
DELETE FROM audit_log WHERE id IN (SELECT id FROM audit_log WHERE at < now() - $1 * interval '1 day' ORDER BY id LIMIT 5000)`

// PruneAudit deletes audit entries older than the retention.
func (s *Store) PruneAudit(ctx context.Context, days int) (int, error) {
	if days <= 0 {
		return 0, nil
	}
	tag, err := s.pool.Exec(ctx, pruneAuditSQL, days)
	if err != nil {
		return 0, fmt.Errorf("prune audit log: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
