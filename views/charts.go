package views

import (
	"fmt"
	"math"
	"time"

	"flint/jobs"
)

// Bar is one stacked segment of a bar chart.
type Bar struct {
	X, Y, W, H float64
	Class      string
	Title      string
}

// Tick is an axis label.
type Tick struct {
	X, Y  float64
	Label string
}

// BarChart is a server-rendered SVG chart.
type BarChart struct {
	Width, Height float64
	Bars          []Bar
	XTicks        []Tick
	YTicks        []Tick
	GridY         []float64
	Empty         bool
}

const (
	chartW, chartH         = 720.0, 200.0
	padL, padB, padT, padR = 40.0, 22.0, 8.0, 8.0
)

// ThroughputChart draws finished runs per minute for the hour before now,
// succeeded stacked under failed and interrupted.
func ThroughputChart(buckets []jobs.ThroughputBucket, now time.Time) BarChart {
	start := now.Truncate(time.Minute).Add(-59 * time.Minute)
	type mins struct{ ok, bad, other int64 }
	series := make([]mins, 60)
	for _, b := range buckets {
		i := int(b.Minute.Sub(start) / time.Minute)
		if i < 0 || i >= 60 {
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
	c := BarChart{Width: chartW, Height: chartH, Empty: peak == 0}
	top := niceCeil(float64(max(peak, 1)))
	plotW, plotH := chartW-padL-padR, chartH-padB-padT
	bw := plotW / 60
	scale := plotH / top
	for i, m := range series {
		x := padL + float64(i)*bw
		y := chartH - padB
		at := start.Add(time.Duration(i) * time.Minute)
		for _, seg := range []struct {
			n     int64
			class string
			name  string
		}{{m.ok, "bar-ok", "succeeded"}, {m.bad, "bar-bad", "failed"}, {m.other, "bar-warn", "interrupted or cancelled"}} {
			if seg.n == 0 {
				continue
			}
			h := float64(seg.n) * scale
			y -= h
			c.Bars = append(c.Bars, Bar{X: x + 0.5, Y: y, W: math.Max(bw-1, 1), H: h, Class: seg.class,
				Title: fmt.Sprintf("%s: %d %s", at.UTC().Format("15:04"), seg.n, seg.name)})
		}
	}
	for i := 0; i <= 60; i += 15 {
		at := start.Add(time.Duration(i) * time.Minute)
		label := at.UTC().Format("15:04")
		if i == 60 {
			label = "now"
		}
		c.XTicks = append(c.XTicks, Tick{X: padL + float64(i)*bw, Y: chartH - 6, Label: label})
	}
	for _, f := range []float64{0, 0.5, 1} {
		y := chartH - padB - f*plotH
		c.YTicks = append(c.YTicks, Tick{X: padL - 6, Y: y + 3, Label: Thousands(int64(f * top))})
		c.GridY = append(c.GridY, y)
	}
	return c
}

// BenchChart draws ns/op per operation for each algorithm side by side.
func BenchChart(rows []BenchRow, size int) BarChart {
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
	c := BarChart{Width: chartW, Height: chartH, Empty: peak == 0}
	top := niceCeil(math.Max(peak, 1))
	plotW, plotH := chartW-padL-padR, chartH-padB-padT
	group := plotW / float64(len(ops))
	bw := group / 3
	for i, op := range ops {
		for k, alg := range []string{jobs.StrategyHeap, jobs.StrategyTimingWheel} {
			v, ok := val[op][alg]
			if !ok {
				continue
			}
			h := v / top * plotH
			class := "bar-a"
			if k == 1 {
				class = "bar-b"
			}
			c.Bars = append(c.Bars, Bar{X: padL + float64(i)*group + bw*0.5 + float64(k)*bw, Y: chartH - padB - h, W: bw - 2, H: h,
				Class: class, Title: fmt.Sprintf("%s %s: %.0f ns/op", alg, op, v)})
		}
		c.XTicks = append(c.XTicks, Tick{X: padL + float64(i)*group + group/2, Y: chartH - 6, Label: op})
	}
	for _, f := range []float64{0, 0.5, 1} {
		y := chartH - padB - f*plotH
		c.YTicks = append(c.YTicks, Tick{X: padL - 6, Y: y + 3, Label: Thousands(int64(f*top)) + "ns"})
		c.GridY = append(c.GridY, y)
	}
	return c
}

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

func ff(f float64) string { return fmt.Sprintf("%.1f", f) }
