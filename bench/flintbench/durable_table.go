package main

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// The durable-execution comparison: Flint's benchmarks in internal/e2e
// (BenchmarkDurableSteps, BenchmarkDurableSleep, BenchmarkDurableSignal,
// go test output) against the DBOS harness (../shared/peers/dbosbench,
// RESULT steps|sleep|signal lines), each in the section of the run that
// scripts/bench-compare.sh opened with "== NAME".
var (
	reSection  = regexp.MustCompile(`^== (\S+)`)
	reGoBench  = regexp.MustCompile(`^Benchmark(Durable\w+(?:/[\w=]+)?)-\d+\s+\d+\s+[0-9.]+ ns/op\s+(.*)$`)
	reGoMetric = regexp.MustCompile(`([0-9.]+) (\S+)`)
	reDBOS     = regexp.MustCompile(`^RESULT (steps|sleep|signal) (.*)$`)
	reDBOSKV   = regexp.MustCompile(`([\w/]+)=(-?[0-9.]+)`)
)

// durableResults are the figures of one run: Flint's by benchmark
// ("DurableSteps", "DurableSignal/senders=16", ...), DBOS's by section
// ("dbos-steps", "dbos-signal16", ...).
type durableResults struct {
	flint, dbos map[string]map[string]float64
}

// parseDurable reads Flint's benchmark lines and DBOS's RESULT lines.
func parseDurable(r io.Reader) durableResults {
	res := durableResults{flint: map[string]map[string]float64{}, dbos: map[string]map[string]float64{}}
	section := ""
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if m := reSection.FindStringSubmatch(line); m != nil {
			section = m[1]
		} else if m := reGoBench.FindStringSubmatch(line); m != nil {
			kv := map[string]float64{}
			for _, p := range reGoMetric.FindAllStringSubmatch(m[2], -1) {
				kv[p[2]], _ = strconv.ParseFloat(p[1], 64)
			}
			res.flint[m[1]] = kv
		} else if m := reDBOS.FindStringSubmatch(line); m != nil && strings.HasPrefix(section, "dbos-") {
			kv := map[string]float64{}
			for _, p := range reDBOSKV.FindAllStringSubmatch(m[2], -1) {
				kv[p[1]], _ = strconv.ParseFloat(p[2], 64)
			}
			res.dbos[section] = kv
		}
	}
	must(sc.Err())
	return res
}

// durableRows compares Flint's durable steps, sleeps and signals with
// DBOS's (targets: steps and 16-sender signal rate >= 5x; sleep
// lateness p99 and signal → resumed handler p50 no worse than DBOS's
// Send → done; signal → done, the like-for-like latency, is shown too).
func (res durableResults) durableRows() []row {
	var rows []row
	f, d := res.flint, res.dbos
	if kv, ok := f["DurableSteps"]; ok {
		rows = append(rows, row{"durable: 10,000 jobs of 3 recorded steps, jobs/s (vs DBOS workflows/s, 100 ms poll)",
			rateCell(kv["steps-jobs/s"]), rateCell(d["dbos-steps"]["workflows/s"]), ratioCell(kv["steps-jobs/s"], d["dbos-steps"]["workflows/s"])})
	}
	for _, s := range []struct{ key, what string }{
		{"DurableSleep/enqueuers=16", "enqueued by 16 goroutines, like DBOS's"},
		{"DurableSleep/enqueuers=batch", "enqueued in one batch"},
	} {
		kv, ok := f[s.key]
		if !ok {
			continue
		}
		dk := d["dbos-sleep"]
		rows = append(rows,
			row{"durable: 10,000 sleepers " + s.what + ", wake lateness p50 (vs DBOS)", msCell(kv["lateness-p50-ms"]), dbosMs(dk, "lateness_p50_ms"), ratioCell(kv["lateness-p50-ms"], dk["lateness_p50_ms"])},
			row{"durable: 10,000 sleepers " + s.what + ", wake lateness p99 (vs DBOS)", msCell(kv["lateness-p99-ms"]), dbosMs(dk, "lateness_p99_ms"), ratioCell(kv["lateness-p99-ms"], dk["lateness_p99_ms"])},
			row{"durable: 10,000 sleepers " + s.what + ", connections held while asleep (vs DBOS)", fmt.Sprintf("%.0f", kv["conns-held"]), fmt.Sprintf("%.0f", dk["held_connections"]), ""})
	}
	for _, s := range []struct{ key, section, what string }{
		{"DurableSignal/senders=1", "dbos-signal", "1 sender"},
		{"DurableSignal/senders=16", "dbos-signal16", "16 senders"},
	} {
		kv, ok := f[s.key]
		if !ok {
			continue
		}
		dk := d[s.section]
		rows = append(rows,
			row{"durable: 1,000 waiting jobs, signal → resumed handler p50, " + s.what + " (vs DBOS Send → done)", msCell(kv["send-to-resumed-p50-ms"]), dbosMs(dk, "send_to_done_p50_ms"), ratioCell(kv["send-to-resumed-p50-ms"], dk["send_to_done_p50_ms"])},
			row{"durable: 1,000 waiting jobs, signal → done p50, " + s.what + " (vs DBOS Send → done)", msCell(kv["send-to-done-p50-ms"]), dbosMs(dk, "send_to_done_p50_ms"), ratioCell(kv["send-to-done-p50-ms"], dk["send_to_done_p50_ms"])},
			row{"durable: 1,000 waiting jobs, signals/s, " + s.what + " (vs DBOS)", rateCell(kv["signals/s"]), rateCell(dk["rate/s"]), ratioCell(kv["signals/s"], dk["rate/s"])})
	}
	return rows
}

// dbosMs formats one of DBOS's millisecond figures, or n/a.
func dbosMs(kv map[string]float64, key string) string {
	if _, ok := kv[key]; !ok {
		return "n/a"
	}
	return msCell(kv[key])
}
