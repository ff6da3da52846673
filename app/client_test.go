package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

type invoiceArgs struct {
	OrderID int `json:"order_id"`
}

func (a invoiceArgs) Validate() error {
	if a.OrderID < 1 {
		return errors.New("order_id must be positive")
	}
	return nil
}

// invoiceClient is a client of an app that handles "invoice" (typed, its
// order_id must be positive) and is told of "later", over a new database.
func invoiceClient(t *testing.T, ctx context.Context) (*Client, *db.Store, string) {
	t.Helper()
	store, dbURL := dbtest.NewStore(t)
	a := New()
	a.Handle("invoice", jobs.Typed(func(context.Context, *jobs.Job, invoiceArgs) (any, error) { return nil, nil }))
	c, err := a.NewClient(ctx, ClientConfig{DatabaseURL: dbURL, JobTypes: []string{"later"}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c, store, dbURL
}

// countJobs counts the jobs in store's database.
func countJobs(t *testing.T, ctx context.Context, store *db.Store) (n int) {
	t.Helper()
	require.NoError(t, store.Pool().QueryRow(ctx, `SELECT count(*) FROM jobs`).Scan(&n))
	return n
}

// TestClientEnqueueTx: jobs enqueued in the caller's transaction exist
// only if it commits, and the dashboard's event channel hears of them at
// the commit, never after a rollback.
func TestClientEnqueueTx(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, store, dbURL := invoiceClient(t, ctx)

	listen, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer listen.Close(context.Background())
	_, err = listen.Exec(ctx, "LISTEN flint_events")
	require.NoError(t, err)

	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())

	// Rolled back: no job.
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	rolledBack, err := c.EnqueueTx(ctx, tx, jobs.EnqueueParams{Type: "invoice", Payload: json.RawMessage(`{"order_id": 7}`)})
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(ctx))
	require.Zero(t, countJobs(t, ctx, store))

	// Committed: the job, and its event at the commit, the first event
	// heard (none came of the rollback).
	tx, err = conn.Begin(ctx)
	require.NoError(t, err)
	res, err := c.EnqueueTx(ctx, tx, jobs.EnqueueParams{Type: "invoice", Payload: json.RawMessage(`{"order_id": 8}`)})
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.Zero(t, countJobs(t, ctx, store), "not visible before the commit")
	require.NoError(t, tx.Commit(ctx))
	j, err := store.GetJob(ctx, res[0].Job.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.StateQueued, j.Status)
	require.JSONEq(t, `{"order_id": 8}`, string(j.Payload))
	n, err := listen.WaitForNotification(ctx)
	require.NoError(t, err)
	require.Contains(t, n.Payload, res[0].Job.ID.String())
	require.NotContains(t, n.Payload, rolledBack[0].Job.ID.String(), "no event for a rolled-back enqueue")
}

// TestClientRefusesBeforeWriting: payloads of typed handlers, unknown
// types and bad fields are refused before anything is written.
func TestClientRefusesBeforeWriting(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, store, _ := invoiceClient(t, ctx)
	var ve *jobs.ValidationError
	_, err := c.Enqueue(ctx, jobs.EnqueueParams{Type: "invoice", Payload: json.RawMessage(`{"order_id": 0}`)})
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "payload", ve.Field)
	require.Contains(t, ve.Message, "order_id must be positive")
	_, err = c.Enqueue(ctx, jobs.EnqueueParams{Type: "invoice", Payload: json.RawMessage(`{"order": 1}`)},
		jobs.EnqueueParams{Type: "invoce"})
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "jobs[0].payload", ve.Field)
	_, err = c.Enqueue(ctx, jobs.EnqueueParams{Type: "invoce"})
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "type", ve.Field)
	require.Contains(t, ve.Message, `unknown job type "invoce"`)
	require.Contains(t, ve.Message, "invoice")
	_, err = c.Enqueue(ctx, jobs.EnqueueParams{Type: "invoice", Payload: json.RawMessage(`{"order_id": 1}`), Priority: 9})
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "priority", ve.Field)
	require.Zero(t, countJobs(t, ctx, store))
}

// TestClientAcceptsTypesServedElsewhere: a type the client was told of is
// accepted, and so is a type a worker serves elsewhere, once registered.
func TestClientAcceptsTypesServedElsewhere(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, store, _ := invoiceClient(t, ctx)
	var ve *jobs.ValidationError
	_, err := c.Enqueue(ctx, jobs.EnqueueParams{Type: "later"})
	require.NoError(t, err)
	_, err = c.Enqueue(ctx, jobs.EnqueueParams{Type: "py.thumbnail"})
	require.ErrorAs(t, err, &ve)
	require.NoError(t, store.RegisterWorker(ctx, domain.WorkerInfo{ID: "py-1", Kind: domain.WorkerRemote, Types: []string{"py.thumbnail"},
		Concurrency: 1, StartedAt: time.Now()}, time.Minute))
	// Accepted once the catalog reloads (at most a second after the last
	// refusal reloaded it).
	var out []jobs.Enqueued
	require.Eventually(t, func() bool {
		out, err = c.Enqueue(ctx, jobs.EnqueueParams{Type: "py.thumbnail", IdempotencyKey: "thumb-1"},
			jobs.EnqueueParams{Type: jobs.TypeNoop})
		return err == nil
	}, 5*time.Second, 50*time.Millisecond)
	require.Len(t, out, 2)
	again, err := c.Enqueue(ctx, jobs.EnqueueParams{Type: "py.thumbnail", IdempotencyKey: "thumb-1"})
	require.NoError(t, err)
	require.False(t, again[0].Inserted)
	require.Equal(t, out[0].Job.ID, again[0].Job.ID)
	require.Equal(t, 3, countJobs(t, ctx, store))
}

// TestClientEnqueueConcurrently: single enqueues from many goroutines
// share commits; each caller gets its own job, a refused payload fails
// only its own call, and the dashboard's event channel hears of the jobs
// after they commit.
func TestClientEnqueueConcurrently(t *testing.T) {
	t.Parallel()
	store, dbURL := dbtest.NewStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := New()
	a.Handle("invoice", jobs.Typed(func(context.Context, *jobs.Job, invoiceArgs) (any, error) { return nil, nil }))
	c, err := a.NewClient(ctx, ClientConfig{DatabaseURL: dbURL, EnqueueWindow: 20 * time.Millisecond})
	require.NoError(t, err)
	defer c.Close()
	listen, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer listen.Close(context.Background())
	_, err = listen.Exec(ctx, "LISTEN flint_events")
	require.NoError(t, err)

	const n = 100
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res, err := c.Enqueue(ctx, jobs.EnqueueParams{Type: "invoice", Payload: json.RawMessage(fmt.Sprintf(`{"order_id": %d}`, i))})
			errs[i] = err
			if err == nil {
				ids[i] = res[0].Job.ID.String()
			}
		})
	}
	wg.Wait()
	var ve *jobs.ValidationError
	require.ErrorAs(t, errs[0], &ve, "order_id 0 is refused")
	for i := 1; i < n; i++ {
		require.NoError(t, errs[i], "job %d", i)
	}
	var stored int
	require.NoError(t, store.Pool().QueryRow(ctx, `SELECT count(*) FROM jobs WHERE type = 'invoice'`).Scan(&stored))
	require.Equal(t, n-1, stored)
	batches, written := c.store.GroupCommits()
	require.Equal(t, uint64(n-1), written)
	require.Less(t, batches, written, "calls shared commits")

	heard := map[string]bool{}
	for len(heard) < n-1 {
		wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
		note, err := listen.WaitForNotification(wctx)
		wcancel()
		require.NoError(t, err, "heard %d of %d jobs", len(heard), n-1)
		for _, id := range ids[1:] {
			if strings.Contains(note.Payload, id) {
				heard[id] = true
			}
		}
	}
}
