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
	c := &cached[int]{ttl: time.Hour}
	var loads atomic.Int64
	release := make(chan struct{})
	load := func(context.Context) (int, error) {
		<-release // the others call while this load is under way
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
	close(release)
	wg.Wait()
	require.Equal(t, int64(1), loads.Load())

	// Move the load back in time rather than wait out the ttl.
	age := func(d time.Duration) {
		c.mu.Lock()
		c.at = c.at.Add(-d)
		c.mu.Unlock()
	}
	age(c.ttl - time.Minute)
	v, err := c.get(context.Background(), load)
	require.NoError(t, err)
	require.Equal(t, 1, v, "kept until the ttl")
	age(time.Minute)
	v, err = c.get(context.Background(), load)
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
