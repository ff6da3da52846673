package minheap

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func intLess(a, b *int) bool { return *a < *b }

// isHeap reports whether no element of s is less than its parent.
func isHeap(s []int) bool {
	for i := 1; i < len(s); i++ {
		if s[i] < s[(i-1)/2] {
			return false
		}
	}
	return true
}

func TestPushPop(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 3, 7, 8, 100, 1000} {
		var h, all []int
		for range n {
			x := rng.IntN(n/2 + 1) // duplicates too
			h = Push(h, x, intLess)
			all = append(all, x)
			require.True(t, isHeap(h))
		}
		slices.Sort(all)
		var got []int
		for len(h) > 0 {
			var x int
			x, h = Pop(h, intLess)
			require.True(t, isHeap(h))
			got = append(got, x)
		}
		require.Equal(t, all, got, "n=%d", n)
	}
}

func TestInitAndDown(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 2, 5, 64, 1000} {
		s := make([]int, n)
		for i := range s {
			s[i] = rng.IntN(1000)
		}
		Init(s, intLess)
		require.True(t, isHeap(s))
		for k := 0; k < n; k++ {
			s[0] += rng.IntN(500) // the top grows
			Down(s, 0, intLess)
			require.True(t, isHeap(s))
		}
		for k := 0; n > 0 && k < n; k++ {
			i := rng.IntN(n)
			s[i] += rng.IntN(2000) // any element grows
			Down(s, i, intLess)
			require.True(t, isHeap(s))
		}
	}
}

func TestInterleaved(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	var h, ref []int
	for range 5000 {
		if len(h) == 0 || rng.IntN(3) > 0 {
			x := rng.IntN(10_000)
			h = Push(h, x, intLess)
			ref = append(ref, x)
			continue
		}
		var x int
		x, h = Pop(h, intLess)
		i := slices.Index(ref, slices.Min(ref))
		require.Equal(t, ref[i], x)
		ref = slices.Delete(ref, i, i+1)
	}
	require.True(t, isHeap(h))
	require.Len(t, h, len(ref))
}
