package metrics

import (
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// family resolves label tuples to collector children once. Reads are
// lock-free (a copy-on-write map); a new tuple takes the mutex and copies
// the map, which happens a bounded number of times.
type family[K comparable, V any] struct {
	m        atomic.Pointer[map[K]V]
	mu       sync.Mutex
	series   int // distinct children created
	create   func(K) V
	overflow func(K) K
}

// aliasLimit bounds how many over-the-cap tuples are remembered (each
// pointing at its overflow child) so that they too resolve without the lock.
const aliasLimit = 4 * MaxSeriesPerFamily

func newFamily[K comparable, V any](create func(K) V, overflow func(K) K) *family[K, V] {
	f := &family[K, V]{create: create, overflow: overflow}
	empty := map[K]V{}
	f.m.Store(&empty)
	return f
}

func (f *family[K, V]) get(k K) V {
	cur := *f.m.Load()
	if v, ok := cur[k]; ok {
		return v
	}
	if len(cur) >= aliasLimit {
		if v, ok := cur[f.overflow(k)]; ok {
			return v
		}
	}
	return f.add(k)
}

func (f *family[K, V]) add(k K) V {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur := *f.m.Load()
	if v, ok := cur[k]; ok {
		return v
	}
	next := make(map[K]V, len(cur)+2)
	maps.Copy(next, cur)
	var v V
	if f.series < MaxSeriesPerFamily {
		v = f.create(k)
		f.series++
	} else {
		ok := false
		o := f.overflow(k)
		if v, ok = cur[o]; !ok {
			v = f.create(o)
			f.series++
			next[o] = v
		}
		if len(cur) >= aliasLimit {
			if !ok {
				f.m.Store(&next)
			}
			return v
		}
	}
	next[k] = v
	f.m.Store(&next)
	return v
}

// clean makes a label value valid UTF-8 (the client library refuses
// anything else).
func clean(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
