package handlers

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCachedSharesOneLoad: callers at the same moment share one load, a
// value is kept for its ttl, and a failed load is not kept.
func TestCachedSharesOneLoad(t *testing.T) {
	c := &cached[int]{ttl: 200 * time.Millisecond}
	var loads atomic.Int64
	load := func(context.Context) (int, error) {
		time.Sleep(20 * time.Millisecond) // long enough for the others to arrive
		return int(loads.Add(1)), nil
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := c.get(context.Background(), load)
			require.NoError(t, err)
			require.Equal(t, 1, v)
		}()
	}
	wg.Wait()
	require.Equal(t, int64(1), loads.Load())

	time.Sleep(250 * time.Millisecond)
	v, err := c.get(context.Background(), load)
	require.NoError(t, err)
	require.Equal(t, 2, v, "reloaded after the ttl")

	boom := errors.New("database down")
	f := &cached[int]{ttl: time.Hour}
	_, err = f.get(context.Background(), func(context.Context) (int, error) { return 0, boom })
	require.ErrorIs(t, err, boom)
	v, err = f.get(context.Background(), func(context.Context) (int, error) { return 7, nil })
	require.NoError(t, err)
	require.Equal(t, 7, v, "an error is not cached")
}
