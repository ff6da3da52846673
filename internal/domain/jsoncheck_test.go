package domain_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
)

func TestCheckTextAndStorableText(t *testing.T) {
	t.Parallel()
	require.NoError(t, domain.CheckText("error", "fine \u00e9"))
	require.Error(t, domain.CheckText("error", "a\x00b"))
	require.Error(t, domain.CheckText("error", "a\xffb"))
	require.Equal(t, "ab", domain.StorableText("a\x00b"))
	require.Equal(t, "a\uFFFDb", domain.StorableText("a\xff\xfeb"))
	require.Equal(t, "same", domain.StorableText("same"))
}
