package domain_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// TestStepKeysAreValidated: a step key is text of at most MaxStepKeyLen
// bytes, named "key" in the refusal as in the workflow request.
func TestStepKeysAreValidated(t *testing.T) {
	t.Parallel()
	reg := jobs.NewRegistry()
	domain.RegisterBuiltins(reg, domain.BuiltinDeps{})
	for _, bad := range []string{strings.Repeat("k", jobs.MaxStepKeyLen+1), "a\x00b", "line\nbreak"} {
		p := jobs.EnqueueParams{Type: jobs.TypeNoop, StepKey: bad}
		var verr *jobs.ValidationError
		require.ErrorAs(t, p.Validate(reg, time.Now()), &verr, "%q", bad)
		require.Equal(t, "key", verr.Field)
	}
	p := jobs.EnqueueParams{Type: jobs.TypeNoop, StepKey: strings.Repeat("k", jobs.MaxStepKeyLen)}
	require.NoError(t, p.Validate(reg, time.Now()))
}
