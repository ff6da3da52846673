package logs

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// The ring keeps the newest RingSize entries, and Since's filter and limit
// pick from them as the live page asks.
func TestTailRingFilterAndLimit(t *testing.T) {
	t.Parallel()
	lg, err := New(Config{Stdout: discard{}})
	require.NoError(t, err)
	tail := lg.Tail()
	job := uuid.NewString()
	for i := 0; i < 250; i++ {
		args := []any{"n", i}
		if i%50 == 0 {
			args = append(args, "job_id", job)
		}
		lg.Slog().Info("m", args...)
	}

	all, seq, missed := tail.Since(0, nil, 0)
	require.EqualValues(t, 250, seq)
	require.True(t, missed, "the first 50 left the ring")
	require.Len(t, all, RingSize)
	require.Equal(t, 50, seqOf(t, all[0]))
	require.Equal(t, 249, seqOf(t, all[RingSize-1]))
	last, _, _ := tail.Since(0, nil, 3)
	require.Equal(t, []int{247, 248, 249}, []int{seqOf(t, last[0]), seqOf(t, last[1]), seqOf(t, last[2])})
	mine, _, _ := tail.Since(0, func(e Entry) bool { return e.JobID == job }, 10)
	require.Len(t, mine, 4) // 50, 100, 150 and 200; 0 has left the ring
	require.Equal(t, 50, seqOf(t, mine[0]))

	require.NoError(t, lg.Close())
	lg.Slog().Info("after close")
	after, _, _ := tail.Since(seq, nil, 0)
	require.Len(t, after, 1, "the tail outlives the file")
	require.Equal(t, "after close", after[0].Msg)
}

// Many goroutines log (forcing rotations) while readers page through the
// log and the live page polls the tail; run with -race.
func TestConcurrentLoggingReadingTailing(t *testing.T) {
	t.Parallel()
	lg := newFileLogger(t, Config{MaxSizeMB: 1, MaxBackups: 3})
	const writers, perWriter = 8, 400 // ≈ 3.2 MB

	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := lg.Slog().With("worker_id", "w"+strconv.Itoa(w))
			for i := 0; i < perWriter; i++ {
				l.Info("work", "n", i, "pad", pad, "password", "concurrentpw")
			}
		}()
	}
	var readers sync.WaitGroup
	errs := make(chan error, 16)
	for r := 0; r < 2; r++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				seen := map[string]bool{}
				q := Query{Limit: 150}
				for pages := 0; pages < 5; pages++ {
					es, next, err := lg.Read(q)
					if err != nil {
						errs <- err
						return
					}
					for _, e := range es {
						key := fmt.Sprintf("%s/%v", e.WorkerID, e.Attrs["n"])
						if seen[key] {
							errs <- fmt.Errorf("duplicate %s across pages", key)
							return
						}
						seen[key] = true
						if e.Attrs["password"] != Redacted {
							errs <- fmt.Errorf("unscrubbed entry %s", e.Raw)
							return
						}
					}
					if next == "" {
						break
					}
					q.Before = next
				}
			}
		}()
	}
	readers.Add(1)
	go func() {
		defer readers.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_, seq, _ := lg.Tail().Since(0, nil, 10)
			time.Sleep(time.Millisecond)
			_, _, _ = lg.Tail().Since(seq, nil, 0)
		}
	}()

	wg.Wait()
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	// Everything still retained reads back once, each writer's entries in
	// order.
	all, _ := readAll(t, lg, Query{Limit: 500})
	require.NotEmpty(t, all)
	lastN := map[string]int{}
	for _, e := range all {
		n := seqOf(t, e)
		if prev, ok := lastN[e.WorkerID]; ok {
			require.Equal(t, prev-1, n, "writer %s", e.WorkerID)
		} else {
			require.Equal(t, perWriter-1, n)
		}
		lastN[e.WorkerID] = n
	}
	require.Len(t, lastN, writers)
}

// Since hands a page the entries it has not shown yet, by number, and says
// when some of them have already left the ring.
func TestTailSinceBySequence(t *testing.T) {
	t.Parallel()
	lg, err := New(Config{Stdout: discard{}})
	require.NoError(t, err)
	tail := lg.Tail()
	require.Zero(t, tail.Seq())
	entries, seq, missed := tail.Since(0, nil, 0)
	require.Empty(t, entries)
	require.Zero(t, seq)
	require.False(t, missed)

	for i := 0; i < 10; i++ {
		lg.Slog().Info("tick", "n", i)
	}
	require.EqualValues(t, 10, tail.Seq())
	entries, seq, missed = tail.Since(7, nil, 0)
	require.EqualValues(t, 10, seq)
	require.False(t, missed)
	require.Len(t, entries, 3)
	for i, e := range entries {
		require.Equal(t, 7+i, seqOf(t, e), "oldest first")
	}
	// A filter keeps only what the page shows; a limit keeps the newest.
	even := func(e Entry) bool { return seqOf(t, e)%2 == 0 }
	entries, _, missed = tail.Since(0, even, 2)
	require.True(t, missed, "three even entries matched, two were returned")
	require.Equal(t, []int{6, 8}, []int{seqOf(t, entries[0]), seqOf(t, entries[1])})

	// Entries that left the ring are reported missing.
	for i := 10; i < RingSize+20; i++ {
		lg.Slog().Info("tick", "n", i)
	}
	entries, seq, missed = tail.Since(5, nil, 0)
	require.True(t, missed)
	require.EqualValues(t, RingSize+20, seq)
	require.Len(t, entries, RingSize)
	require.Equal(t, 20, seqOf(t, entries[0]))
	entries, _, missed = tail.Since(seq, nil, 0)
	require.Empty(t, entries)
	require.False(t, missed)
}
