package db_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// runOne claims the given job (it must be the only one claimable in its
// queue) and finishes it with outcome.
func (b *testBundle) runOne(t *testing.T, queue string, outcome domain.Outcome) *jobs.Job {
	t.Helper()
	got, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: "w", Queues: []string{queue}, Limit: 1, LeaseTTL: time.Minute})
	require.NoError(t, err)
	require.Len(t, got, 1, "a job to run in queue %s", queue)
	_, _, err = b.store.FinishJobs(b.ctx, []domain.Finish{{Lease: domain.LeaseOf(got[0]), Outcome: outcome, Error: "boom"}})
	require.NoError(t, err)
	return got[0]
}

func TestDependenciesReleaseOnLastParent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.enqueue(t, jobs.EnqueueParams{Queue: "a"})
	c := b.enqueue(t, jobs.EnqueueParams{Queue: "c"})
	child := b.enqueue(t, jobs.EnqueueParams{Queue: "child", DependsOn: []uuid.UUID{a.ID, c.ID}})
	require.Equal(t, jobs.StateBlocked, child.Status)
	require.Empty(t, b.claimQueue(t, "child"), "blocked jobs are not claimed")

	b.runOne(t, "a", domain.OutcomeSucceeded)
	require.Equal(t, jobs.StateBlocked, b.status(t, child.ID), "one parent of two is not enough")
	b.runOne(t, "c", domain.OutcomeSucceeded)
	require.Equal(t, jobs.StateQueued, b.status(t, child.ID), "released by the statement that completed the last parent")

	deps, err := b.store.Dependencies(b.ctx, child.ID)
	require.NoError(t, err)
	require.Len(t, deps.Upstream, 2)
	require.Empty(t, deps.Downstream)
	deps, err = b.store.Dependencies(b.ctx, a.ID)
	require.NoError(t, err)
	require.Equal(t, child.ID, deps.Downstream[0].ID)

	require.Equal(t, 1, deps.DownstreamTotal)

	// A job depending only on completed jobs starts queued.
	late := b.enqueue(t, jobs.EnqueueParams{DependsOn: []uuid.UUID{a.ID}})
	require.Equal(t, jobs.StateQueued, late.Status)

	// Any number may wait for one job; a page shows the first hundred.
	many := make([]jobs.EnqueueParams, 150)
	for i := range many {
		many[i] = jobs.EnqueueParams{Type: jobs.TypeNoop, DependsOn: []uuid.UUID{c.ID}}
	}
	_, err = b.store.Enqueue(b.ctx, many...)
	require.NoError(t, err)
	deps, err = b.store.Dependencies(b.ctx, c.ID)
	require.NoError(t, err)
	require.Len(t, deps.Downstream, jobs.MaxDependencies)
	require.Equal(t, 151, deps.DownstreamTotal)
}

func TestDependencyValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dead := b.enqueue(t, jobs.EnqueueParams{})
	b.force(t, dead.ID, jobs.StateDeadLetter)
	binned := b.enqueue(t, jobs.EnqueueParams{})
	_, err := b.store.DeleteJob(b.ctx, binned.ID)
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		dep  uuid.UUID
		want string
	}{
		{"unknown", uuid.New(), "no job has id"},
		{"dead", dead.ID, "dead_letter"},
		{"binned", binned.ID, "bin"},
	} {
		_, err := b.store.Enqueue(b.ctx, jobs.EnqueueParams{Type: "noop", DependsOn: []uuid.UUID{tc.dep}})
		var ve *jobs.ValidationError
		require.ErrorAs(t, err, &ve, tc.name)
		require.Equal(t, "depends_on[0]", ve.Field)
		require.Contains(t, ve.Message, tc.want)
	}
}

// TestCascadeAndRearm: a permanent failure cancels everything downstream,
// transitively, with the reason; replaying the failed job re-arms them, and
// the workflow then completes.
func TestCascadeAndRearm(t *testing.T) {
	t.Parallel()
	b := setup(t)
	zero := 0
	root := b.enqueue(t, jobs.EnqueueParams{Queue: "root", MaxRetries: &zero})
	mid := b.enqueue(t, jobs.EnqueueParams{Queue: "mid", DependsOn: []uuid.UUID{root.ID}})
	leaf := b.enqueue(t, jobs.EnqueueParams{Queue: "leaf", DependsOn: []uuid.UUID{mid.ID}})
	other := b.enqueue(t, jobs.EnqueueParams{Queue: "other"})

	b.runOne(t, "root", domain.OutcomeFailed)
	require.Equal(t, jobs.StateDeadLetter, b.status(t, root.ID))
	for _, id := range []uuid.UUID{mid.ID, leaf.ID} {
		j, err := b.store.GetJob(b.ctx, id)
		require.NoError(t, err)
		require.Equal(t, jobs.StateCancelled, j.Status)
		require.Equal(t, root.ID, *j.CancelledBy)
		require.Contains(t, *j.LastError, root.ID.String())
		require.Contains(t, *j.LastError, "failed permanently")
	}
	require.Equal(t, jobs.StateQueued, b.status(t, other.ID), "unrelated jobs are untouched")

	_, err := b.store.RetryJob(b.ctx, root.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.StateBlocked, b.status(t, mid.ID))
	require.Equal(t, jobs.StateBlocked, b.status(t, leaf.ID))

	b.runOne(t, "root", domain.OutcomeSucceeded)
	b.runOne(t, "mid", domain.OutcomeSucceeded)
	b.runOne(t, "leaf", domain.OutcomeSucceeded)
	require.Equal(t, jobs.StateCompleted, b.status(t, leaf.ID))
}

func TestCancelCascades(t *testing.T) {
	t.Parallel()
	b := setup(t)
	parent := b.enqueue(t, jobs.EnqueueParams{})
	child := b.enqueue(t, jobs.EnqueueParams{DependsOn: []uuid.UUID{parent.ID}})
	grandchild := b.enqueue(t, jobs.EnqueueParams{DependsOn: []uuid.UUID{child.ID}})
	_, err := b.store.CancelJob(b.ctx, parent.ID)
	require.NoError(t, err)
	for _, id := range []uuid.UUID{child.ID, grandchild.ID} {
		j, err := b.store.GetJob(b.ctx, id)
		require.NoError(t, err)
		require.Equal(t, jobs.StateCancelled, j.Status)
		require.Contains(t, *j.LastError, "was cancelled")
	}
}

// TestConcurrentParentsRelease: the two dependencies of each of many jobs
// complete at the same moment, in two transactions (one finishing every
// first dependency, one every second). Each child must be released: without
// the dependents being locked, each transaction can miss the other's
// completion and leave the child blocked.
func TestConcurrentParentsRelease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const rounds, width = 5, 300
	for round := range rounds {
		qa, qb := fmt.Sprintf("r%da", round), fmt.Sprintf("r%db", round)
		var as, bs, children []jobs.EnqueueParams
		for range width {
			as = append(as, jobs.EnqueueParams{Type: "noop", Queue: qa, ID: uuid.Must(uuid.NewV7())})
			bs = append(bs, jobs.EnqueueParams{Type: "noop", Queue: qb, ID: uuid.Must(uuid.NewV7())})
		}
		for i := range width {
			children = append(children, jobs.EnqueueParams{Type: "noop", Queue: "children", DependsOn: []uuid.UUID{as[i].ID, bs[i].ID}})
		}
		_, err := b.store.Enqueue(b.ctx, append(as, bs...)...)
		require.NoError(t, err)
		kids, err := b.store.Enqueue(b.ctx, children...)
		require.NoError(t, err)
		ca, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: "w1", Queues: []string{qa}, Limit: width, LeaseTTL: time.Minute})
		require.NoError(t, err)
		cb, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: "w2", Queues: []string{qb}, Limit: width, LeaseTTL: time.Minute})
		require.NoError(t, err)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for _, claimed := range [][]*jobs.Job{ca, cb} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				fins := make([]domain.Finish, len(claimed))
				for i, j := range claimed {
					fins[i] = domain.Finish{Lease: domain.LeaseOf(j), Outcome: domain.OutcomeSucceeded}
				}
				<-start
				if _, _, err := b.store.FinishJobs(b.ctx, fins); err != nil {
					t.Error(err)
				}
			}()
		}
		close(start)
		wg.Wait()
		for _, k := range kids {
			require.Equal(t, jobs.StateQueued, b.status(t, k.Job.ID), "round %d: child left blocked", round)
		}
	}
}

func (b *testBundle) claimQueue(t *testing.T, q string) []*jobs.Job {
	t.Helper()
	got, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: "w", Queues: []string{q}, Limit: 10, LeaseTTL: time.Minute})
	require.NoError(t, err)
	return got
}

// A job named twice among one job's dependencies is one edge; deleting
// jobs (a purge, the move to the history) takes their edges, both ways,
// and their step keys with them in the same statement.
func TestDeletedJobsTakeTheirEdgesAndKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wf := uuid.Must(uuid.NewV7())
	a := b.enqueue(t, jobs.EnqueueParams{Queue: "a", StepKey: "a", WorkflowID: wf})
	c := b.enqueue(t, jobs.EnqueueParams{Queue: "c", StepKey: "c", WorkflowID: wf})
	child := b.enqueue(t, jobs.EnqueueParams{Queue: "child", StepKey: "child", WorkflowID: wf, DependsOn: []uuid.UUID{a.ID, c.ID, a.ID}})
	count := func() (edges, keys int) {
		t.Helper()
		require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT (SELECT count(*) FROM job_dependencies),
			(SELECT count(*) FROM workflow_steps WHERE workflow_id = $1)`, wf).Scan(&edges, &keys))
		return edges, keys
	}
	edges, keys := count()
	require.Equal(t, 2, edges, "a parent named twice is one edge")
	require.Equal(t, 3, keys)

	_, err := b.store.Pool().Exec(b.ctx, `DELETE FROM jobs WHERE id = $1`, a.ID)
	require.NoError(t, err)
	edges, keys = count()
	require.Equal(t, 1, edges, "the edge to the deleted parent went with it")
	require.Equal(t, 2, keys, "the deleted job's step key went with it")

	_, err = b.store.Pool().Exec(b.ctx, `DELETE FROM jobs WHERE id = ANY($1)`, []uuid.UUID{child.ID, c.ID})
	require.NoError(t, err)
	edges, keys = count()
	require.Zero(t, edges)
	require.Zero(t, keys)
}

// Deleting jobs takes their executions and log lines with them, in the
// same statement; a log line written while a delete of its job is on its
// way waits for it and is then skipped, never left behind.
func TestDeletedJobsTakeTheirExecutionsAndLines(t *testing.T) {
	t.Parallel()
	b := setup(t)
	run := func(q string) *jobs.Job {
		b.enqueue(t, jobs.EnqueueParams{Queue: q})
		got := b.claimQueue(t, q)
		require.Len(t, got, 1)
		line := domain.LogEntry{JobID: got[0].ID, Attempt: 1, At: time.Now(), Level: "info", Message: "hello"}
		_, _, err := b.store.FinishJobs(b.ctx, []domain.Finish{{Lease: domain.LeaseOf(got[0]), Outcome: domain.OutcomeSucceeded,
			Log: []domain.LogEntry{line}}})
		require.NoError(t, err)
		require.NoError(t, b.store.InsertJobLogs(b.ctx, []domain.LogEntry{line}))
		return got[0]
	}
	gone, kept := run("gone"), run("kept")
	count := func(id uuid.UUID) (execs, lines int) {
		t.Helper()
		require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT (SELECT count(*) FROM job_executions WHERE job_id = $1),
			(SELECT count(*) FROM job_logs WHERE job_id = $1)`, id).Scan(&execs, &lines))
		return execs, lines
	}
	execs, lines := count(gone.ID)
	require.Equal(t, []int{1, 2}, []int{execs, lines})

	// The delete holds the row while a line for it is being written.
	tx, err := b.store.Pool().Begin(b.ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(b.ctx) }()
	_, err = tx.Exec(b.ctx, `DELETE FROM jobs WHERE id = $1`, gone.ID)
	require.NoError(t, err)
	wrote := make(chan error, 1)
	go func() {
		wrote <- b.store.InsertJobLogs(b.ctx, []domain.LogEntry{{JobID: gone.ID, Attempt: 1, At: time.Now(), Level: "info", Message: "late"}})
	}()
	// The line's statement waits for the delete (seen in pg_locks as an
	// ungranted lock on the deleting transaction; this test's database has
	// no other sessions) before the delete commits.
	require.Eventually(t, func() bool {
		var waiting bool
		require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_stat_activity a USING (pid)
			WHERE NOT l.granted AND l.locktype = 'transactionid' AND a.datname = current_database())`).Scan(&waiting))
		return waiting
	}, 30*time.Second, 10*time.Millisecond, "the late line waits for the delete")
	require.NoError(t, tx.Commit(b.ctx))
	require.NoError(t, <-wrote)
	execs, lines = count(gone.ID)
	require.Equal(t, []int{0, 0}, []int{execs, lines}, "nothing of the deleted job is left")
	execs, lines = count(kept.ID)
	require.Equal(t, []int{1, 2}, []int{execs, lines}, "the other job keeps its own")
}
