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

func TestTailDropsSlowSubscriberWithoutBlocking(t *testing.T) {
	t.Parallel()
	lg, err := New(Config{Stdout: discard{}})
	require.NoError(t, err)
	tail := lg.Tail()

	slow, cancelSlow := tail.Subscribe(nil, 2) // never read while logging
	fast, cancelFast := tail.Subscribe(nil, 2000)

	const n = 1000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < n; i++ {
			lg.Slog().Info("tick", "n", i)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("logging blocked on a slow tail subscriber")
	}

	// The slow one got its buffer's worth, then its channel was closed.
	var got []int
	for e := range slow {
		got = append(got, seqOf(t, e))
	}
	require.Equal(t, []int{0, 1}, got)
	require.Equal(t, 1, tail.Subscribers())
	cancelSlow() // after being dropped: harmless

	for i := 0; i < n; i++ {
		e := <-fast
		require.Equal(t, i, seqOf(t, e))
		require.Equal(t, "tick", e.Msg)
	}
	cancelFast()
}

func TestTailFilterCancelRecentClose(t *testing.T) {
	t.Parallel()
	lg, err := New(Config{Stdout: discard{}})
	require.NoError(t, err)
	tail := lg.Tail()
	job := uuid.NewString()

	mine, cancelMine := tail.Subscribe(func(e Entry) bool { return e.JobID == job }, 10)
	other, cancelOther := tail.Subscribe(nil, 1000)
	for i := 0; i < 250; i++ {
		args := []any{"n", i}
		if i%50 == 0 {
			args = append(args, "job_id", job)
		}
		lg.Slog().Info("m", args...)
	}
	for _, want := range []int{0, 50, 100, 150, 200} {
		require.Equal(t, want, seqOf(t, <-mine))
	}
	select {
	case e := <-mine:
		t.Fatalf("unexpected entry %v", e)
	default:
	}
	cancelMine()
	cancelMine()
	_, open := <-mine
	require.False(t, open, "cancel closes the channel")

	recent := tail.Recent(0)
	require.Len(t, recent, RingSize)
	require.Equal(t, 50, seqOf(t, recent[0]))
	require.Equal(t, 249, seqOf(t, recent[RingSize-1]))
	last := tail.Recent(3)
	require.Equal(t, []int{247, 248, 249}, []int{seqOf(t, last[0]), seqOf(t, last[1]), seqOf(t, last[2])})
	jobs := tail.RecentMatching(10, func(e Entry) bool { return e.JobID == job })
	require.Len(t, jobs, 4) // 100, 150, 200 and 50
	require.Equal(t, 50, seqOf(t, jobs[0]))

	require.NoError(t, lg.Close())
	n := 0
	for range other {
		n++
	}
	require.Equal(t, 250, n, "Close ends subscriptions after delivering what was buffered")
	cancelOther()
	after, _ := tail.Subscribe(nil, 1)
	_, open = <-after
	require.False(t, open, "subscribing to a closed tail yields a closed channel")
}

func TestTailPublishDirect(t *testing.T) {
	t.Parallel()
	tail := NewTail()
	ch, cancel := tail.Subscribe(nil, 1)
	defer cancel()
	tail.Publish(Entry{Msg: "a"})
	tail.Publish(Entry{Msg: "b"}) // buffer full: dropped
	require.Equal(t, "a", (<-ch).Msg)
	_, open := <-ch
	require.False(t, open)
	require.Equal(t, []Entry{{Msg: "a"}, {Msg: "b"}}, tail.Recent(5))
}

// Many goroutines log (forcing rotations) while readers page through the
// log and tail subscribers come and go; run with -race.
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
			ch, cancel := lg.Tail().Subscribe(nil, 4)
			for i := 0; i < 3; i++ {
				select {
				case <-ch:
				case <-time.After(10 * time.Millisecond):
				}
			}
			cancel()
			_ = lg.Tail().Recent(10)
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
