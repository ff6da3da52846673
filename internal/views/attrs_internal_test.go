package views

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAttrsReadable: log attributes that hold durations read in a unit,
// and large whole numbers without an exponent (the Logs page showed
// took=4.08e+08).
func TestAttrsReadable(t *testing.T) {
	t.Parallel()
	got := attrsText(map[string]any{"took": 4.08e+08, "duration_ms": 1500.0, "dead_tuples": 1.2e+07, "ratio": 0.25, "queue": "billing"})
	require.Equal(t, "dead_tuples=12000000 duration_ms=1.5s queue=billing ratio=0.25 took=408 ms", got)
}
