package domain_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
)

func TestBackoffBounds(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		attempt  int
		min, max time.Duration
	}{
		{"first", 1, 500 * time.Millisecond, 1500 * time.Millisecond},
		{"second", 2, 2500 * time.Millisecond, 7500 * time.Millisecond},
		{"third", 3, 12500 * time.Millisecond, 37500 * time.Millisecond},
		{"fourth", 4, 62500 * time.Millisecond, 187500 * time.Millisecond},
		{"zero treated as first", 0, 500 * time.Millisecond, 1500 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The extremes of the jitter source give the extremes of the range.
			require.Equal(t, tc.min, domain.Backoff(tc.attempt, func() float64 { return 0 }))
			require.InDelta(t, float64(tc.max), float64(domain.Backoff(tc.attempt, func() float64 { return 0.999999999 })), float64(time.Millisecond))
			// And a property check over random draws.
			r := rand.New(rand.NewPCG(uint64(tc.attempt), 7))
			for range 1000 {
				d := domain.Backoff(tc.attempt, r.Float64)
				require.GreaterOrEqual(t, d, tc.min)
				require.Less(t, d, tc.max)
			}
		})
	}
}

func TestBackoffIsJittered(t *testing.T) {
	t.Parallel()
	seen := map[time.Duration]bool{}
	for range 100 {
		seen[domain.Backoff(2, nil)] = true
	}
	require.Greater(t, len(seen), 50, "retries of a fleet must not line up")
}

func TestBackoffCapped(t *testing.T) {
	t.Parallel()
	for _, attempt := range []int{20, 100, 1 << 20} {
		d := domain.Backoff(attempt, nil)
		require.Greater(t, d, 11*time.Hour)
		require.LessOrEqual(t, d, 24*time.Hour)
	}
}
