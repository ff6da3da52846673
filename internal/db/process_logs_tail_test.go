package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/logs"
)

// tailUntil fetches the tail after mark, as the page does, until want
// entries came (any transaction open on the server, in other tests too,
// holds newer entries back for as long as it is open); it returns them as
// the page shows them, each fetch above the previous, and the last mark.
func tailUntil(t *testing.T, b *testBundle, q logs.Query, mark string, want int) ([]logs.Entry, string) {
	t.Helper()
	var got []logs.Entry
	deadline := time.Now().Add(20 * time.Second)
	for len(got) < want {
		require.True(t, time.Now().Before(deadline), "only %d of %d entries came", len(got), want)
		es, next, missed, err := b.store.TailLogs(b.ctx, q, mark, 100)
		require.NoError(t, err)
		require.False(t, missed)
		got = append(es, got...)
		mark = next
		if len(got) < want {
			time.Sleep(10 * time.Millisecond) // the poll interval
		}
	}
	require.Len(t, got, want)
	return got, mark
}

// The tail hands the page each entry stored after its mark once, in a
// later fetch if its write committed after one with higher ids.
func TestTailLogs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mark, err := b.store.LogMark(b.ctx)
	require.NoError(t, err)
	es, next, missed, err := b.store.TailLogs(b.ctx, logs.Query{}, mark, 100)
	require.NoError(t, err)
	require.Empty(t, es)
	require.Equal(t, mark, next)
	require.False(t, missed)

	entry := func(n int) logs.Entry {
		return logs.Entry{Time: time.Now(), Level: "INFO", Msg: "tick", Attrs: map[string]any{"n": n}}
	}
	ns := func(es []logs.Entry) []int {
		out := make([]int, len(es))
		for i, e := range es {
			out[i] = nOf(t, e)
		}
		return out
	}
	var batch []logs.Entry
	for i := 0; i < 10; i++ {
		batch = append(batch, entry(i))
	}
	require.NoError(t, b.store.InsertLogs(b.ctx, procA, batch))
	es, next = tailUntil(t, b, logs.Query{}, mark, 10)
	require.Equal(t, []int{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}, ns(es), "newest first")
	es, again, _, err := b.store.TailLogs(b.ctx, logs.Query{}, next, 100)
	require.NoError(t, err)
	require.Empty(t, es, "nothing new since")
	require.Equal(t, next, again)
	// Filters apply; a limit keeps the newest and says some were left out.
	es, _, missed, err = b.store.TailLogs(b.ctx, logs.Query{Q: "tick", Process: procA.ID}, mark, 3)
	require.NoError(t, err)
	require.True(t, missed)
	require.Equal(t, []int{9, 8, 7}, ns(es))
	es, _, _, err = b.store.TailLogs(b.ctx, logs.Query{Process: procB.ID}, mark, 100)
	require.NoError(t, err)
	require.Empty(t, es)

	// A write that took its ids first but commits last: the entries
	// committed after it wait for it, then both come, and none is skipped.
	tx, err := b.store.Pool().Begin(b.ctx)
	require.NoError(t, err)
	defer tx.Rollback(context.WithoutCancel(b.ctx)) //nolint:errcheck
	_, err = tx.Exec(b.ctx, `INSERT INTO process_logs (at, level, process_id, host, role, message, attrs)
		VALUES (now(), 0, 'slow', 'h', 'worker', 'slow write', '{"n": 100}')`)
	require.NoError(t, err)
	require.NoError(t, b.store.InsertLogs(b.ctx, procB, []logs.Entry{entry(101)}))
	es, held, _, err := b.store.TailLogs(b.ctx, logs.Query{}, next, 100)
	require.NoError(t, err)
	require.Empty(t, es, "held back behind the open write")
	require.NoError(t, tx.Commit(b.ctx))
	es, next = tailUntil(t, b, logs.Query{}, held, 2)
	require.ElementsMatch(t, []int{100, 101}, ns(es))

	// A transaction left open elsewhere on the server holds entries back
	// only for a while: those stored long enough ago pass.
	other, err := b.store.Pool().Begin(b.ctx)
	require.NoError(t, err)
	defer other.Rollback(context.WithoutCancel(b.ctx)) //nolint:errcheck
	_, err = other.Exec(b.ctx, `SELECT pg_current_xact_id()`)
	require.NoError(t, err)
	_, err = b.store.Pool().Exec(b.ctx, `INSERT INTO process_logs (at, level, process_id, host, role, message, attrs, stored_at)
		VALUES (now(), 0, 'p', 'h', 'worker', 'stored a minute ago', '{"n": 200}', now() - interval '1 minute')`)
	require.NoError(t, err)
	es, _ = tailUntil(t, b, logs.Query{}, next, 1)
	require.Equal(t, []int{200}, ns(es))

	_, _, _, err = b.store.TailLogs(b.ctx, logs.Query{}, "soon", 100)
	var qe *logs.QueryError
	require.ErrorAs(t, err, &qe)
	require.Equal(t, "after", qe.Field)
}
