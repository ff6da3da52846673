package db

import (
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// uuid.UUID on the wire.
//
// uuid.UUID is a driver.Valuer and a sql.Scanner, and pgx's uuid codec
// knows neither, so pgx took its generic paths for every job id Flint
// sends or reads: a parameter was formatted as text after a failed binary
// plan (an error allocated each time), parsed back and written; a column
// was formatted as text for uuid.Scan to parse. Statements used to convert
// their id arrays by hand to dodge this, and scalar ids and every read did
// not. uuidCodec writes and reads the 16 bytes directly, for every
// statement on the store's connections; every other Go type goes to pgx's
// codec as before. With it (and the event bus's copy it made of each
// batch gone), a worker running 10,000 sleepers through their sleep and
// wake allocated 317 MB instead of 401.

// registerUUID makes conn's type map use uuidCodec for uuid and uuid[].
func registerUUID(conn *pgx.Conn) {
	m := conn.TypeMap()
	t := &pgtype.Type{Name: "uuid", OID: pgtype.UUIDOID, Codec: uuidCodec{}}
	m.RegisterType(t)
	m.RegisterType(&pgtype.Type{Name: "_uuid", OID: pgtype.UUIDArrayOID, Codec: &pgtype.ArrayCodec{ElementType: t}})
}

// uuidCodec is pgx's uuid codec, with binary plans of its own for
// uuid.UUID values and *uuid.UUID targets.
type uuidCodec struct{ pgtype.UUIDCodec }

func (c uuidCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if _, ok := value.(uuid.UUID); ok && format == pgtype.BinaryFormatCode {
		return encodeUUID{}
	}
	return c.UUIDCodec.PlanEncode(m, oid, format, value)
}

func (c uuidCodec) PlanScan(m *pgtype.Map, oid uint32, format int16, target any) pgtype.ScanPlan {
	if _, ok := target.(*uuid.UUID); ok && format == pgtype.BinaryFormatCode {
		return scanUUID{}
	}
	return c.UUIDCodec.PlanScan(m, oid, format, target)
}

type encodeUUID struct{}

func (encodeUUID) Encode(value any, buf []byte) ([]byte, error) {
	id := value.(uuid.UUID)
	return append(buf, id[:]...), nil
}

type scanUUID struct{}

// Scan reads a NULL as the zero UUID.
func (scanUUID) Scan(src []byte, dst any) error {
	id := dst.(*uuid.UUID)
	switch len(src) {
	case 0:
		if src != nil {
			return fmt.Errorf("uuid: %d bytes, want 16", len(src))
		}
		*id = uuid.UUID{}
	case 16:
		copy(id[:], src)
	default:
		return fmt.Errorf("uuid: %d bytes, want 16", len(src))
	}
	return nil
}
