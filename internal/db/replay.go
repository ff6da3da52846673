package db

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// lockPayloadSQL reads the payload being replaced and holds the row, so
// that the payload the audit trail records as the original is the one the
// replay overwrote.
const lockPayloadSQL = `
SELECT payload FROM jobs WHERE id = $1 AND deleted_at IS NULL AND status = ANY($2::text[]) FOR UPDATE`

const setPayloadSQL = `UPDATE jobs SET payload = $2::jsonb WHERE id = $1`

// EditAndReplay replaces a dead-letter job's payload and replays it (as
// RetryJob does: attempts reset, downstream jobs its failure cancelled
// re-armed), and records by on the audit trail with the payload before and
// after, all in one transaction: the original payload cannot be lost. It
// returns the payload it replaced and the replayed job. payload must have
// passed Registry.CheckPayload.
func (s *Store) EditAndReplay(ctx context.Context, id uuid.UUID, payload json.RawMessage, by domain.AuditEntry) (old json.RawMessage, j *jobs.Job, err error) {
	var rearmed []domain.Moved
	err = s.withTx(ctx, func(tx pgx.Tx) error {
		if err := unarchive(ctx, tx, []uuid.UUID{id}); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, lockPayloadSQL, id, stateStrings(domain.ReplayFrom)).Scan(&old); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return domain.ErrNotFound
			}
			return err
		}
		if _, err := tx.Exec(ctx, setPayloadSQL, id, string(payload)); err != nil {
			return err
		}
		var err error
		if j, err = collectOneJob(tx.Query(ctx, retrySQL, []uuid.UUID{id}, stateStrings(domain.ReplayFrom))); err != nil {
			return err
		}
		if rearmed, err = collectMoved(tx.Query(ctx, rearmSQL, []uuid.UUID{id})); err != nil {
			return err
		}
		details, err := json.Marshal(map[string]json.RawMessage{"payload_before": old, "payload_after": payload})
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, insertAuditSQL, truncate(by.Actor, 300), by.Source, truncate(by.IP, 64), domain.AuditEditReplay,
			[]uuid.UUID{id}, string(details))
		return err
	})
	if errors.Is(err, domain.ErrNotFound) {
		return nil, nil, s.explain(ctx, id, "edit and replay", domain.ReplayFrom)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("edit and replay job: %w", err)
	}
	s.publish([]*jobs.Job{j}, rearmed)
	return old, j, nil
}
