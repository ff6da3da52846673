package domain_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
)

func TestNextInterval(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	every := 10 * time.Second
	require.Equal(t, base.Add(10*time.Second), domain.NextInterval(base, base.Add(time.Second), every))
	// Missed occurrences coalesce: the next is on the grid after now.
	require.Equal(t, base.Add(3*time.Hour+10*time.Second), domain.NextInterval(base, base.Add(3*time.Hour+time.Second), every))
	require.Equal(t, base.Add(20*time.Second), domain.NextInterval(base, base.Add(10*time.Second), every), "strictly after now")
}
