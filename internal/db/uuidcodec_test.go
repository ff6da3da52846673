package db_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/flinthq/flint/internal/db/dbtest"
)

// TestUUIDCodec sends and reads uuid.UUID through the store's
// connections in every shape Flint's statements use: a value, an array,
// an array with NULLs (pointers), NULL into a uuid.UUID, and binary as
// PostgreSQL's own text form says; and that a value is written without a
// detour through its text form (a string and an error allocated each time).
func TestUUIDCodec(t *testing.T) { // not parallel: testing.AllocsPerRun
	store, _ := dbtest.NewStore(t)
	ctx := context.Background()
	a, b := uuid.New(), uuid.New()

	var text string
	var back uuid.UUID
	if err := store.Pool().QueryRow(ctx, `SELECT $1::uuid::text, $1::uuid`, a).Scan(&text, &back); err != nil {
		t.Fatal(err)
	}
	if text != a.String() || back != a {
		t.Fatalf("sent %s, PostgreSQL read %s and returned %s", a, text, back)
	}

	var texts []string
	var ids []uuid.UUID
	if err := store.Pool().QueryRow(ctx, `SELECT $1::uuid[]::text[], $1::uuid[]`, []uuid.UUID{a, b}).Scan(&texts, &ids); err != nil {
		t.Fatal(err)
	}
	if len(texts) != 2 || texts[0] != a.String() || texts[1] != b.String() || len(ids) != 2 || ids[0] != a || ids[1] != b {
		t.Fatalf("sent [%s %s], PostgreSQL read %v and returned %v", a, b, texts, ids)
	}

	var nulls []*string
	if err := store.Pool().QueryRow(ctx, `SELECT $1::uuid[]::text[]`, []*uuid.UUID{&a, nil}).Scan(&nulls); err != nil {
		t.Fatal(err)
	}
	if len(nulls) != 2 || nulls[0] == nil || *nulls[0] != a.String() || nulls[1] != nil {
		t.Fatalf("sent [%s NULL], PostgreSQL read %v", a, nulls)
	}

	got := a
	if err := store.Pool().QueryRow(ctx, `SELECT NULL::uuid`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != (uuid.UUID{}) {
		t.Fatalf("NULL read as %s, want the zero UUID", got)
	}
	var p *uuid.UUID
	if err := store.Pool().QueryRow(ctx, `SELECT NULL::uuid`).Scan(&p); err != nil || p != nil {
		t.Fatalf("NULL into *uuid.UUID: %v, %v", p, err)
	}

	conn, err := store.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	m := conn.Conn().TypeMap()
	buf := make([]byte, 0, 64)
	if allocs := testing.AllocsPerRun(100, func() {
		buf, err = m.Encode(pgtype.UUIDOID, pgtype.BinaryFormatCode, a, buf[:0])
	}); err != nil || allocs > 1 || string(buf) != string(a[:]) {
		t.Fatalf("encoding a uuid.UUID: %d bytes %x, %v allocations, error %v", len(buf), buf, allocs, err)
	}
}
