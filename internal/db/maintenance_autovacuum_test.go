package db_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAutovacuumOn: on when the server runs autovacuum and the jobs table
// has not switched it off; off when the table has.
func TestAutovacuumOn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var server string
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SHOW autovacuum`).Scan(&server))
	on, err := b.store.AutovacuumOn(b.ctx)
	require.NoError(t, err)
	require.Equal(t, server == "on", on)

	_, err = b.store.Pool().Exec(b.ctx, `ALTER TABLE jobs SET (autovacuum_enabled = false)`)
	require.NoError(t, err)
	on, err = b.store.AutovacuumOn(b.ctx)
	require.NoError(t, err)
	require.False(t, on)
}
