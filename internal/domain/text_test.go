package domain_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
)

func TestTruncate(t *testing.T) {
	t.Parallel()
	require.Equal(t, "héllo", domain.Truncate("héllo", 5))
	require.Equal(t, "hé…", domain.Truncate("héllo", 2), "counts characters, not bytes")
	require.Equal(t, "…", domain.Truncate("héllo", 0))
}
