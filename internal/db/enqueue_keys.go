package db

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/jobs"
)

// existingByKeySQL reads the jobs that hold idempotency keys, live or in
// the history (a key is in one of them, never both).
const existingByKeySQL = `SELECT ` + jobColumns + ` FROM jobs WHERE idempotency_key = ANY($1::text[])
UNION ALL SELECT ` + jobColumns + ` FROM job_history
WHERE id IN (SELECT job_id FROM job_history_keys WHERE idempotency_key = ANY($1::text[]))`

// archivedKeysSQL finds which of the keys new jobs were just inserted with
// belong to a job in the history. It runs after the insert, in its
// transaction: the archiver moves a job by deleting it from jobs, so an
// insert that found no conflict there either came after the move (and this
// statement, with a later snapshot, sees the history row) or the key is
// new.
const archivedKeysSQL = `SELECT idempotency_key FROM job_history_keys WHERE idempotency_key = ANY($1::text[])`

// dropDuplicatesSQL removes jobs inserted in this transaction whose key
// turned out to be taken by a job in the history.
const dropDuplicatesSQL = `DELETE FROM jobs WHERE id = ANY($1::uuid[])`

// dropArchivedKeys removes from inserted (and from the database) the new
// jobs whose idempotency key belongs to a job in the history: that job
// stands for them.
func dropArchivedKeys(ctx context.Context, q DBTX, inserted []*jobs.Job) ([]*jobs.Job, error) {
	var keys []string
	for _, j := range inserted {
		if j.IdempotencyKey != nil {
			keys = append(keys, *j.IdempotencyKey)
		}
	}
	if len(keys) == 0 {
		return inserted, nil
	}
	rows, err := q.Query(ctx, archivedKeysSQL, keys)
	if err != nil {
		return nil, err
	}
	taken, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(taken) == 0 {
		return inserted, err
	}
	isTaken := make(map[string]bool, len(taken))
	for _, k := range taken {
		isTaken[k] = true
	}
	kept := inserted[:0:0]
	var dup []uuid.UUID
	for _, j := range inserted {
		if j.IdempotencyKey != nil && isTaken[*j.IdempotencyKey] {
			dup = append(dup, j.ID)
		} else {
			kept = append(kept, j)
		}
	}
	if _, err := q.Exec(ctx, dropDuplicatesSQL, dup); err != nil {
		return nil, err
	}
	return kept, nil
}
