// Package minheap is a binary min-heap on a plain slice, ordered by a less
// function: the sift loops of the scheduler's indexes, written once.
//
// Unlike container/heap it does not go through an interface, so elements
// are not boxed into an `any` and nothing allocates but append. less is
// only ever given pointers into the slice, so no element escapes to the
// heap through it. Elements move as in a hand-written heap: along a sift
// path each is copied once, into the hole left above or below it, never
// swapped.
//
// None of the sift loops is small enough to be inlined, so each comparison
// is an indirect call: that costs little against a comparison that is a
// call anyway (the scheduler's claim order) and shows against one that
// would have been inlined (a bare RunAt compare).
package minheap

import "math/bits"

// Push adds x to the heap s and returns the extended slice.
func Push[T any](s []T, x T, less func(a, b *T) bool) []T {
	s = append(s, x)
	up(s, len(s)-1, less)
	return s
}

// up moves the element at index i towards the root, to its place. It
// finds the place first, comparing the element where it is, then moves
// the ancestors in between down one level each.
func up[T any](s []T, i int, less func(a, b *T) bool) {
	j := i
	for j > 0 {
		p := (j - 1) / 2
		if !less(&s[i], &s[p]) {
			break
		}
		j = p
	}
	if j == i {
		return
	}
	x := s[i]
	for i != j {
		p := (i - 1) / 2
		s[i] = s[p]
		i = p
	}
	s[j] = x
}

// Pop removes the least element of the non-empty heap s and returns it
// with the shortened slice. The vacated element beyond the new length is
// left as it was: clear it if it holds pointers that should not be kept.
//
// Bottom-up: the hole left at the root goes down to a leaf along the lesser
// children, and the last element is sifted up from there (it usually
// belongs near the bottom), which saves about half the comparisons of
// sifting it down from the root.
func Pop[T any](s []T, less func(a, b *T) bool) (T, []T) {
	top := s[0]
	last := len(s) - 1
	i := 0
	for {
		c := 2*i + 1
		if c >= last {
			break
		}
		if r := c + 1; r < last && less(&s[r], &s[c]) {
			c = r
		}
		s[i] = s[c]
		i = c
	}
	if i != last {
		// The last element is compared where it still is: the hole never
		// reaches index last.
		for i > 0 {
			p := (i - 1) / 2
			if !less(&s[last], &s[p]) {
				break
			}
			s[i] = s[p]
			i = p
		}
		s[i] = s[last]
	}
	return top, s[:last]
}

// Down restores the heap after the element at index i has grown (or has
// been replaced by a greater one), moving it towards the leaves. Like up,
// it finds the place first, along the lesser children, then moves the
// elements on the way up one level each.
func Down[T any](s []T, i int, less func(a, b *T) bool) {
	j := i
	for {
		c := 2*j + 1
		if c >= len(s) {
			break
		}
		if r := c + 1; r < len(s) && less(&s[r], &s[c]) {
			c = r
		}
		if !less(&s[c], &s[i]) {
			break
		}
		j = c
	}
	if j == i {
		return
	}
	x := s[i]
	for k := i; k != j; {
		// The child of k on the way to j: the ancestors of j are the
		// prefixes of j+1 in binary.
		c := (j+1)>>(bits.Len(uint(j+1))-bits.Len(uint(k+1))-1) - 1
		s[k] = s[c]
		k = c
	}
	s[j] = x
}

// Init arranges s as a heap in O(n).
func Init[T any](s []T, less func(a, b *T) bool) {
	for i := len(s)/2 - 1; i >= 0; i-- {
		Down(s, i, less)
	}
}
