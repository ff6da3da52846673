package bufpool

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPoolDropsOutsizedSlices: a slice grown past MaxKept is never handed
// out again; a smaller one may be, with its capacity.
func TestPoolDropsOutsizedSlices(t *testing.T) {
	var p Pool
	b := p.Get()
	require.Empty(t, *b)

	big := make([]byte, 0, MaxKept+1)
	p.Put(&big)
	for range 10 {
		got := p.Get()
		require.LessOrEqual(t, cap(*got), MaxKept, "an outsized slice came back")
	}

	small := make([]byte, 0, 1024)
	kept := &small
	p.Put(kept)
	// sync.Pool may drop anything (and does, at random, under the race
	// detector); what it returns is either new or the slice put back.
	got := p.Get()
	require.True(t, got == kept || cap(*got) == 0, "Get returned a slice nobody put")
}
