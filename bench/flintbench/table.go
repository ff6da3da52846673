package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The RESULT lines modeTable reads: Flint's (this tool's), River's
// (bench/riverbench's) and Asynq's (bench/asynqbench's).
var (
	reFlint       = regexp.MustCompile(`^RESULT flint (\w+) (\S+) (.*)$`)
	reKV          = regexp.MustCompile(`(\w+)=([0-9.]+)`)
	reRiverDrain  = regexp.MustCompile(`^RESULT drain n=\d+ workers=\d+((?: cooldown=\S+)?)((?: cold)?) jobs/s: median ([0-9.]+)`)
	reRiverClaim  = regexp.MustCompile(`^RESULT claim batch=100 conc=\d+ n=\d+ jobs/s: median ([0-9.]+)`)
	reHTTPLoad    = regexp.MustCompile(`^RESULT http n=\d+ c=\d+ rate ([0-9.]+)/s p50 ([0-9.]+) ms p99 ([0-9.]+) ms unexpected (\d+)`)
	reRiverInsert = regexp.MustCompile(`^RESULT insert (InsertMany[\w-]*) n=\d+ batch=\d+ jobs/s: median ([0-9.]+)`)
	reRiverSteady = regexp.MustCompile(`^RESULT steady rate=(\d+) .*start p50 ms median ([0-9.]+).*start p99 ms median ([0-9.]+)`)
	reAsynq       = regexp.MustCompile(`^RESULT asynq (\w+) (.*)$`)
	reRiverSingle = regexp.MustCompile(`^RESULT insert1 conc=\d+ inserts/s: median ([0-9.]+).*call p50 ms: median ([0-9.]+).*call p99 ms: median ([0-9.]+)`)
	reRiverIdle   = regexp.MustCompile(`^RESULT idle insert->start p50 ms: median ([0-9.]+).*p99 ms: median ([0-9.]+)`)
	reRiverWAL    = regexp.MustCompile(`^drain rep=\d+ n=\d+ workers=\d+((?: cooldown=\S+)?)((?: cold)?):.*fetch\+complete ([0-9.]+)`)
)

// row is one line of the comparison table.
type row struct {
	what, flint, river string
	ratio              string
}

// modeTable reads the RESULT lines in -in and prints the comparison table.
func modeTable() {
	f, err := os.Open(*flagIn)
	must(err)
	defer f.Close()
	res := parseResults(f)
	var rows []row
	rows = append(rows, res.drainRows()...)
	rows = append(rows, res.singleRows()...)
	rows = append(rows, res.batchRows()...)
	rows = append(rows, res.latencyRows()...)
	rows = append(rows, res.scaleRows()...)
	_, err = f.Seek(0, io.SeekStart)
	must(err)
	rows = append(rows, parseDurable(f).durableRows()...)
	printTable(rows)
	if len(rows) == 0 {
		fmt.Fprintln(os.Stderr, errors.New("no RESULT lines found"))
		os.Exit(1)
	}
}

// results are the figures of one run, by tool.
type results struct {
	flint map[string]map[string]float64 // "drain worker-defaults-redis" → rate, wal_per_job, ...
	river map[string]float64            // "drain", "single p50", "InsertMany", ...
	asynq map[string]map[string]float64 // "single", "drain" → rate, p50_ms, p99_ms
}

// parseResults reads the RESULT lines of every tool from r:
//
//	RESULT flint MODE LABEL key=value...   (this tool, one per measuring mode)
//	RESULT asynq MODE key=value...         (bench/asynqbench)
//	RESULT drain|insert|insert1|steady|idle ...   (bench/riverbench)
//
// and River's per-repetition drain lines for its WAL figure. Other lines
// are skipped. A Flint figure measured more than once (the flow-control
// drains run in the order A B B A) is the mean of its runs.
func parseResults(r io.Reader) results {
	res := results{
		flint: map[string]map[string]float64{},
		river: map[string]float64{},
		asynq: map[string]map[string]float64{},
	}
	runs := map[string]float64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		// The patterns' prefixes exclude one another, so the order of
		// these tests does not matter.
		if m := reFlint.FindStringSubmatch(line); m != nil {
			res.addFlint(m[1]+" "+m[2], m[3], runs)
		} else if m := reHTTPLoad.FindStringSubmatch(line); m != nil {
			res.addFlint("http outside-client", fmt.Sprintf("rate=%s p50_ms=%s p99_ms=%s unexpected=%s", m[1], m[2], m[3], m[4]), runs)
		} else if m := reAsynq.FindStringSubmatch(line); m != nil {
			kv := map[string]float64{}
			for _, p := range reKV.FindAllStringSubmatch(m[2], -1) {
				kv[p[1]], _ = strconv.ParseFloat(p[2], 64)
			}
			res.asynq[m[1]] = kv
		} else {
			res.addRiver(line)
		}
	}
	must(sc.Err())
	return res
}

// addFlint folds the key=value figures of one Flint RESULT line into the
// mean of key's runs so far, counted in runs.
func (res results) addFlint(key, figures string, runs map[string]float64) {
	kv := res.flint[key]
	if kv == nil {
		kv = map[string]float64{}
		res.flint[key] = kv
	}
	n := runs[key]
	for _, p := range reKV.FindAllStringSubmatch(figures, -1) {
		v, _ := strconv.ParseFloat(p[2], 64)
		kv[p[1]] = (kv[p[1]]*n + v) / (n + 1)
	}
	runs[key] = n + 1
}

// addRiver records the figures of line if it is one of River's.
func (res results) addRiver(line string) {
	river := res.river
	if m := reRiverDrain.FindStringSubmatch(line); m != nil {
		river[riverDrainKey(m[1], m[2])], _ = strconv.ParseFloat(m[3], 64)
	} else if m := reRiverWAL.FindStringSubmatch(line); m != nil {
		river[riverDrainKey(m[1], m[2])+" wal"], _ = strconv.ParseFloat(m[3], 64)
	} else if m := reRiverClaim.FindStringSubmatch(line); m != nil {
		river["claim"], _ = strconv.ParseFloat(m[1], 64)
	} else if m := reRiverInsert.FindStringSubmatch(line); m != nil {
		river[m[1]], _ = strconv.ParseFloat(m[2], 64)
	} else if m := reRiverSteady.FindStringSubmatch(line); m != nil {
		river["steady p50"], _ = strconv.ParseFloat(m[2], 64)
		river["steady p99"], _ = strconv.ParseFloat(m[3], 64)
	} else if m := reRiverSingle.FindStringSubmatch(line); m != nil {
		river["single"], _ = strconv.ParseFloat(m[1], 64)
		river["single p50"], _ = strconv.ParseFloat(m[2], 64)
		river["single p99"], _ = strconv.ParseFloat(m[3], 64)
	} else if m := reRiverIdle.FindStringSubmatch(line); m != nil {
		river["idle p50"], _ = strconv.ParseFloat(m[1], 64)
		river["idle p99"], _ = strconv.ParseFloat(m[2], 64)
	}
}

// riverDrainKey names one of River's drains: "drain" at its defaults,
// "drain tuned" with a fetch cooldown of its own, either + " cold" when
// the table was left unanalyzed.
func riverDrainKey(cooldown, cold string) string {
	k := "drain"
	if cooldown != "" {
		k += " tuned"
	}
	if cold != "" {
		k += " cold"
	}
	return k
}

// rateCell formats a rate, or n/a when there is none.
func rateCell(v float64) string {
	if v == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f/s", v)
}

// ratioCell formats a over b, or n/a when either is missing.
func ratioCell(a, b float64) string {
	if a == 0 || b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

// msCell formats milliseconds.
func msCell(v float64) string { return fmt.Sprintf("%.2f ms", v) }

// benchDrains are the Flint drains the table knows, in its order.
var benchDrains = []struct{ key, what string }{
	{"drain worker-defaults-redis", "drain: flint worker, defaults, Redis"},
	{"drain worker-defaults-noredis", "drain: flint worker, defaults, no Redis"},
	{"drain worker-1000-redis", "drain: flint worker, FLINT_WORKERS=1000, Redis"},
	{"drain worker-1000-noredis", "drain: flint worker, FLINT_WORKERS=1000, no Redis"},
	{"drain serve-defaults-redis", "drain: flint serve, defaults, Redis"},
	{"drain serve-defaults-noredis", "drain: flint serve, defaults, no Redis"},
}

// drainRows compares the drains with River's and Asynq's, then the drains
// with flow-control limits that never bind with the same drains without
// them (what enforcing limits costs; target >= 0.90x), then the WAL
// written per job.
func (res results) drainRows() []row {
	flint, river, asynq := res.flint, res.river, res.asynq
	var rows []row
	for _, d := range benchDrains {
		if kv, ok := flint[d.key]; ok {
			rows = append(rows, row{d.what + " (vs River 1,000 workers)", rateCell(kv["rate"]), rateCell(river["drain"]), ratioCell(kv["rate"], river["drain"])})
			if r := river["drain tuned"]; r > 0 {
				rows = append(rows, row{d.what + " (vs River tuned)", rateCell(kv["rate"]), rateCell(r), ratioCell(kv["rate"], r)})
			}
			if r := river["claim"]; r > 0 {
				rows = append(rows, row{d.what + " (vs the bare SKIP LOCKED loop)", rateCell(kv["rate"]), rateCell(r), ratioCell(kv["rate"], r)})
			}
			if a := asynq["drain"]["rate"]; a > 0 {
				rows = append(rows, row{d.what + " (vs Asynq 1,000 workers)", rateCell(kv["rate"]), rateCell(a), ratioCell(kv["rate"], a)})
			}
		}
	}
	for _, d := range benchDrains {
		if kv, ok := flint[d.key+"-limits"]; ok {
			rows = append(rows, row{d.what + ", limits not binding (vs River 1,000 workers)", rateCell(kv["rate"]), rateCell(river["drain"]), ratioCell(kv["rate"], river["drain"])})
			if base, ok := flint[d.key]; ok {
				rows = append(rows, row{d.what + ": with limits not binding / without", rateCell(kv["rate"]), rateCell(base["rate"]), ratioCell(kv["rate"], base["rate"])})
			}
		}
	}
	if kv, ok := flint["drain worker-defaults-cold"]; ok {
		rows = append(rows, row{"drain, cold (nothing analyzed): flint worker, defaults, Redis (vs River tuned, cold)", rateCell(kv["rate"]), rateCell(river["drain tuned cold"]), ratioCell(kv["rate"], river["drain tuned cold"])})
	}
	if kv, ok := flint["drain worker-1000-noredis"]; ok && river["drain wal"] > 0 {
		rows = append(rows, row{"drain: WAL bytes per job (1000 workers, no Redis)", fmt.Sprintf("%.0f B", kv["wal_per_job"]), fmt.Sprintf("%.0f B", river["drain wal"]), ratioCell(kv["wal_per_job"], river["drain wal"])})
	}
	return rows
}

// singleRows compares single enqueues over HTTP with River's Insert and
// Asynq's Enqueue, one set of rows per Flint label.
func (res results) singleRows() []row {
	flint, river, asynq := res.flint, res.river, res.asynq
	var rows []row
	if kv, ok := flint["http outside-client"]; ok {
		what := "single enqueue, outside client (httpload, 64 connections, after a 100k drain)"
		if kv["unexpected"] > 0 {
			what += fmt.Sprintf(", %.0f answers not 201", kv["unexpected"])
		}
		rows = append(rows,
			row{what + " vs Insert", rateCell(kv["rate"]), rateCell(river["single"]), ratioCell(kv["rate"], river["single"])},
			row{"single enqueue, outside client, p50", msCell(kv["p50_ms"]), msCell(river["single p50"]), ratioCell(kv["p50_ms"], river["single p50"])},
			row{"single enqueue, outside client, p99", msCell(kv["p99_ms"]), msCell(river["single p99"]), ratioCell(kv["p99_ms"], river["single p99"])})
	}
	for _, k := range slices.Sorted(maps.Keys(flint)) {
		if !strings.HasPrefix(k, "single ") {
			continue
		}
		kv, label := flint[k], strings.TrimPrefix(k, "single ")
		rows = append(rows,
			row{"single enqueue over HTTP, 64 connections (" + label + ") vs Insert, 64 goroutines", rateCell(kv["rate"]), rateCell(river["single"]), ratioCell(kv["rate"], river["single"])},
			row{"single enqueue, p50 per request (" + label + ")", msCell(kv["p50_ms"]), msCell(river["single p50"]), ratioCell(kv["p50_ms"], river["single p50"])},
			row{"single enqueue, p99 per request (" + label + ")", msCell(kv["p99_ms"]), msCell(river["single p99"]), ratioCell(kv["p99_ms"], river["single p99"])})
		if a := asynq["single"]; a != nil {
			rows = append(rows,
				row{"single enqueue (" + label + ") vs Asynq Enqueue, 64 goroutines", rateCell(kv["rate"]), rateCell(a["rate"]), ratioCell(kv["rate"], a["rate"])},
				row{"single enqueue, p99 (" + label + ") vs Asynq", msCell(kv["p99_ms"]), msCell(a["p99_ms"]), ratioCell(kv["p99_ms"], a["p99_ms"])})
		}
	}
	return rows
}

// batchRows compares batch enqueues over HTTP with River's InsertMany.
func (res results) batchRows() []row {
	flint, river := res.flint, res.river
	var rows []row
	for _, b := range []struct{ key, rkey, what string }{
		{"batch nokeys", "InsertMany", "batch enqueue over HTTP, no keys (vs InsertMany)"},
		{"batch keys", "InsertMany", "batch enqueue over HTTP, idempotency keys (vs InsertMany)"},
		{"batch keys", "InsertMany-unique", "batch enqueue over HTTP, idempotency keys (vs InsertMany, unique by args)"},
	} {
		if kv, ok := flint[b.key]; ok && river[b.rkey] > 0 {
			rows = append(rows, row{b.what, rateCell(kv["rate"]), rateCell(river[b.rkey]), ratioCell(kv["rate"], river[b.rkey])})
		}
	}
	if river["InsertManyFast"] > 0 {
		rows = append(rows, row{"(River InsertManyFast, COPY, for scale)", "", rateCell(river["InsertManyFast"]), ""})
	}
	return rows
}

// latencyRows compares pickup latency, at idle and at a steady rate, with
// River's.
func (res results) latencyRows() []row {
	flint, river := res.flint, res.river
	var rows []row
	for _, l := range []struct{ key, rkey, what string }{
		{"idle", "idle", "pickup at idle"},
		{"latency", "steady", "pickup at 500/s"},
	} {
		for _, k := range slices.Sorted(maps.Keys(flint)) {
			kv := flint[k]
			if !strings.HasPrefix(k, l.key+" ") {
				continue
			}
			rows = append(rows,
				row{l.what + ", p50 (" + strings.TrimPrefix(k, l.key+" ") + ")", msCell(kv["p50_ms"]), msCell(river[l.rkey+" p50"]), ratioCell(kv["p50_ms"], river[l.rkey+" p50"])},
				row{l.what + ", p99 (" + strings.TrimPrefix(k, l.key+" ") + ")", msCell(kv["p99_ms"]), msCell(river[l.rkey+" p99"]), ratioCell(kv["p99_ms"], river[l.rkey+" p99"])})
		}
	}
	return rows
}

// scaleRows lists the runs of Flint as separate processes (no peer): the
// rate at which singly enqueued jobs were run, and what each job cost the
// database primary.
func (res results) scaleRows() []row {
	var rows []row
	for _, k := range slices.Sorted(maps.Keys(res.flint)) {
		if label, ok := strings.CutPrefix(k, "scale "); ok {
			kv := res.flint[k]
			rows = append(rows, row{"enqueued over HTTP and run, flint api + worker processes (" + label + "); per job: WAL, commits",
				rateCell(kv["rate"]), fmt.Sprintf("%.0f B, %.2f", kv["wal_per_job"], kv["commits_per_job"]), ""})
		}
	}
	return rows
}

// printTable prints rows as a Markdown table, columns as wide as their
// widest cell, and the legend.
func printTable(rows []row) {
	w := [3]int{len("measurement"), len("Flint"), len("River")}
	for _, r := range rows {
		w[0], w[1], w[2] = max(w[0], len(r.what)), max(w[1], len(r.flint)), max(w[2], len(r.river))
	}
	line := func(a, b, c, d string) { fmt.Printf("| %-*s | %*s | %*s | %7s |\n", w[0], a, w[1], b, w[2], c, d) }
	line("measurement", "Flint", "Peer", "F/P")
	fmt.Printf("|%s|%s:|%s:|%s:|\n", strings.Repeat("-", w[0]+2), strings.Repeat("-", w[1]+1), strings.Repeat("-", w[2]+1), strings.Repeat("-", 8))
	for _, r := range rows {
		line(r.what, r.flint, r.river, r.ratio)
	}
	fmt.Println("\nPeer: River unless the row names Asynq or DBOS. F/P: Flint's figure over the peer's. Rates: higher is better (drain target >= 1.50x of River tuned and >= 0.60x of the bare loop, batch >= 1.00x, single >= 2.50x with p99 < 25 ms, durable steps and 16-sender signals >= 5x); latencies: lower is better.")
}
