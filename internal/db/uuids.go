package db

import (
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// uuid.UUID implements driver.Valuer, so pgx encodes each element of a
// []uuid.UUID parameter through its text form, after first trying (and
// failing, with an error allocated each time) the plans that do not apply:
// 6% of an API process's CPU while it enqueues batches. pgx writes [16]byte
// and pgtype.UUID in binary directly; these convert the arrays that hot
// statements send.

// uuidArray converts ids for a uuid[] parameter.
func uuidArray(ids []uuid.UUID) [][16]byte {
	out := make([][16]byte, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

// nullableUUIDArray converts ids, nil entries to NULL, for a uuid[] parameter.
func nullableUUIDArray(ids []*uuid.UUID) []pgtype.UUID {
	out := make([]pgtype.UUID, len(ids))
	for i, id := range ids {
		if id != nil {
			out[i] = pgtype.UUID{Bytes: *id, Valid: true}
		}
	}
	return out
}
