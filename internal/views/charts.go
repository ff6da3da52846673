package views

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/flinthq/flint/internal/domain"
)

// Bar is one stacked segment of a bar chart. X, Y, W and H are percentages
// of the plot area (Y from the top), so the chart stretches to any width
// while its text keeps a fixed pixel size.
type Bar struct {
	X, Y, W, H float64
	Class      string
	Title      string
}

// Tick is an axis label at Pos percent along its axis (from the left for
// the x axis, from the top for the y axis). Anchor is the SVG text-anchor.
type Tick struct {
	Pos    float64
	Label  string
	Anchor string
}

// BarChart is a server-rendered SVG chart. It has no viewBox: the plot is
// drawn in percentages of the SVG box, whose size the stylesheet sets, and
// the axis labels sit outside that box in the padding of its container.
// Scaling never shrinks the labels.
type BarChart struct {
	Bars   []Bar
	XTicks []Tick // time labels under the bars
	YTicks []Tick // count labels beside them
	Empty  bool   // nothing to draw: the chart says so instead
}

// ThroughputChart draws finished runs per minute for the hour before now,
// succeeded stacked under failed and interrupted.
func ThroughputChart(buckets []domain.ThroughputBucket, now time.Time) BarChart {
	return ThroughputChartOver(buckets, now, ChartRanges[0])
}

// ChartRange is a span the throughput chart can show, in bars of Step.
type ChartRange struct {
	Name  string        // as in ?range=
	Label string        // "last hour"
	Span  time.Duration // how far back the chart reaches
	Step  time.Duration // what one bar covers
	Tick  int           // a time label every Tick bars
	Clock string        // time format of the labels
}

// OrDefault is r, or the default range when r is unset.
func (r ChartRange) OrDefault() ChartRange {
	if r.Step <= 0 {
		return ChartRanges[0]
	}
	return r
}

// Bars is how many bars the range draws.
func (r ChartRange) Bars() int { return int(r.Span / r.Step) }

// Per says what one bar counts, for the chart's description.
func (r ChartRange) Per() string {
	if r.Step == time.Minute {
		return "minute"
	}
	return fmt.Sprintf("%d minutes", int(r.Step.Minutes()))
}

// ChartRanges are the throughput chart's spans; the first is the default.
// The throughput table keeps two days.
var ChartRanges = []ChartRange{
	{Name: "1h", Label: "last hour", Span: time.Hour, Step: time.Minute, Tick: 15, Clock: "15:04"},
	{Name: "6h", Label: "last 6 hours", Span: 6 * time.Hour, Step: 5 * time.Minute, Tick: 18, Clock: "15:04"},
	{Name: "24h", Label: "last 24 hours", Span: 24 * time.Hour, Step: 15 * time.Minute, Tick: 24, Clock: "15:04"},
	{Name: "48h", Label: "last 2 days", Span: 48 * time.Hour, Step: 30 * time.Minute, Tick: 24, Clock: "Jan 2 15:04"},
}

// ChartRangeNamed is the range called name, and whether there is one.
func ChartRangeNamed(name string) (ChartRange, bool) {
	for _, r := range ChartRanges {
		if r.Name == name {
			return r, true
		}
	}
	return ChartRanges[0], false
}

// ThroughputChartOver draws finished runs per step over a range, stacked
// by outcome; buckets may be per minute or already per step.
func ThroughputChartOver(buckets []domain.ThroughputBucket, now time.Time, r ChartRange) BarChart {
	r = r.OrDefault()
	n := r.Bars()
	start := now.Truncate(r.Step).Add(-time.Duration(n-1) * r.Step)
	type mins struct{ ok, bad, other int64 }
	series := make([]mins, n)
	for _, b := range buckets {
		i := int(b.Minute.Sub(start) / r.Step)
		if b.Minute.Before(start) || i >= n {
			continue
		}
		series[i].ok += b.Outcomes["succeeded"]
		series[i].bad += b.Outcomes["failed"]
		series[i].other += b.Outcomes["interrupted"] + b.Outcomes["cancelled"]
	}
	var peak int64
	for _, m := range series {
		peak = max(peak, m.ok+m.bad+m.other)
	}
	c := BarChart{Empty: peak == 0}
	top := niceCeil(float64(max(peak, 2))) // at least 0, 1, 2: no fractional runs on the axis
	bw := 100.0 / float64(n)
	for i, m := range series {
		y := 100.0
		at := start.Add(time.Duration(i) * r.Step)
		for _, seg := range []struct {
			n     int64
			class string
			name  string
		}{{m.ok, "bar-ok", "succeeded"}, {m.bad, "bar-bad", "failed"}, {m.other, "bar-warn", "interrupted or cancelled"}} {
			if seg.n == 0 {
				continue
			}
			h := float64(seg.n) / top * 100
			y -= h
			c.Bars = append(c.Bars, Bar{X: float64(i)*bw + bw*0.1, Y: y, W: bw * 0.8, H: h, Class: seg.class,
				Title: fmt.Sprintf("%s: %d %s", at.UTC().Format(r.Clock), seg.n, seg.name)})
		}
	}
	for i := 0; i <= n; i += r.Tick {
		t := Tick{Pos: float64(i) * bw, Label: start.Add(time.Duration(i) * r.Step).UTC().Format(r.Clock), Anchor: "middle"}
		switch i {
		case 0:
			t.Anchor = "start"
		case n:
			t.Label, t.Anchor = "now", "end"
		}
		c.XTicks = append(c.XTicks, t)
	}
	for _, f := range []float64{0, 0.5, 1} {
		c.YTicks = append(c.YTicks, Tick{Pos: (1 - f) * 100, Label: compactCount(f * top), Anchor: "end"})
	}
	return c
}

// BenchChart draws ns/op per operation for each algorithm side by side.
func BenchChart(rows []domain.BenchResult, size int) BarChart {
	ops := []string{"insert", "pop", "rescore", "cancel", "mixed"}
	val := map[string]map[string]float64{}
	var peak float64
	for _, r := range rows {
		if r.Size != size {
			continue
		}
		if val[r.Op] == nil {
			val[r.Op] = map[string]float64{}
		}
		val[r.Op][r.Algorithm] = r.NsPerOp
		peak = math.Max(peak, r.NsPerOp)
	}
	c := BarChart{Empty: peak == 0}
	top := niceCeil(math.Max(peak, 1))
	group := 100.0 / float64(len(ops))
	bw := group / 3
	for i, op := range ops {
		for k, alg := range []string{domain.StrategyHeap, domain.StrategyTimingWheel} {
			v, ok := val[op][alg]
			if !ok {
				continue
			}
			h := v / top * 100
			class := "bar-a"
			if k == 1 {
				class = "bar-b"
			}
			c.Bars = append(c.Bars, Bar{X: float64(i)*group + bw*0.5 + float64(k)*bw + bw*0.04, Y: 100 - h, W: bw * 0.92, H: h,
				Class: class, Title: fmt.Sprintf("%s %s: %.0f ns/op", alg, op, v)})
		}
		c.XTicks = append(c.XTicks, Tick{Pos: float64(i)*group + group/2, Label: op, Anchor: "middle"})
	}
	for _, f := range []float64{0, 0.5, 1} {
		c.YTicks = append(c.YTicks, Tick{Pos: (1 - f) * 100, Label: compactNanos(f * top), Anchor: "end"})
	}
	return c
}

// compactCount labels a count axis in at most five characters: 750, 1.5k,
// 20k, 2.5M.
func compactCount(v float64) string {
	switch {
	case v >= 1e6:
		return trimZero(v/1e6) + "M"
	case v >= 1e3:
		return trimZero(v/1e3) + "k"
	}
	return trimZero(v)
}

// compactNanos labels a nanosecond axis: 500ns, 2.5µs, 10ms, 1s.
func compactNanos(ns float64) string {
	switch {
	case ns == 0:
		return "0"
	case ns >= 1e9:
		return trimZero(ns/1e9) + "s"
	case ns >= 1e6:
		return trimZero(ns/1e6) + "ms"
	case ns >= 1e3:
		return trimZero(ns/1e3) + "µs"
	}
	return trimZero(ns) + "ns"
}

// trimZero prints v with at most one decimal, and none when it is whole.
func trimZero(v float64) string {
	if v == math.Trunc(v) || v >= 100 {
		return strconv.FormatFloat(math.Round(v), 'f', -1, 64)
	}
	return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64)
}

// pct formats a percentage for an SVG coordinate.
func pct(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) + "%" }

// niceCeil rounds up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}
