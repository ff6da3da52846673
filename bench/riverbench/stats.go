package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

type stats struct{ vals []float64 }

func (s *stats) add(v float64) { s.vals = append(s.vals, v) }
func (s *stats) String() string {
	if len(s.vals) == 0 {
		return "n/a"
	}
	v := append([]float64(nil), s.vals...)
	sort.Float64s(v)
	return fmt.Sprintf("median %.1f [%.1f .. %.1f] (n=%d)", v[len(v)/2], v[0], v[len(v)-1], len(v))
}

func pct(ns []int64, p float64) time.Duration {
	if len(ns) == 0 {
		return 0
	}
	s := append([]int64(nil), ns...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	idx := int(p * float64(len(s)-1))
	return time.Duration(s[idx])
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func parseInts(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		must(err)
		out = append(out, v)
	}
	return out
}
