// Command flintbench measures Flint the way bench/riverbench measures River,
// so that scripts/bench-compare.sh can run both against one PostgreSQL
// server in one run and print their ratios.
//
// Modes (flintbench -mode=MODE [flags]):
//
//	drain    fresh database, pre-insert -n noop jobs, start the flint binary
//	         (-cmd worker or serve) and time it until every job is completed
//	batch    fresh database, start `flint api`, POST /api/v1/jobs/batch with
//	         -batch jobs per request from -conc connections (-keys adds an
//	         idempotency key to every job)
//	latency  enqueue -> handler start at -rate jobs/s for -duration, with an
//	         in-process pool woken by LISTEN/NOTIFY (as River's client is)
//	idle     the same, one job at a time (-samples), the pool idle between
//	sustain  a flint worker fed -rate noop jobs a second for -duration, with
//	         a REPEATABLE READ transaction held open for -hold from
//	         -hold-from on; prints the jobs table's live and dead rows
//	         every -sample (the bloat a long transaction causes, and whether
//	         autovacuum catches up after it)
//	table    read RESULT lines (Flint's and River's) from -in and print the
//	         comparison table
//
// Each measuring mode prints one RESULT line; see parseResults for the shape.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"flint/db"
	"flint/jobs"
	"flint/workers"
)

var (
	flagMode     = flag.String("mode", "", "drain|batch|latency|idle|table")
	flagAdmin    = flag.String("admin", envOr("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"), "URL of a database from which fresh ones can be created")
	flagRedis    = flag.String("redis", "", "REDIS_URL for Flint; empty for PostgreSQL-only mode")
	flagBin      = flag.String("bin", "bin/flint", "the flint binary")
	flagCmd      = flag.String("cmd", "worker", "drain: flint subcommand that drains (worker or serve)")
	flagWorkers  = flag.Int("workers", 0, "drain: FLINT_WORKERS (0 leaves Flint's default)")
	flagLabel    = flag.String("label", "", "name of the figure in the RESULT line")
	flagN        = flag.Int("n", 100_000, "drain: jobs to pre-insert; batch: jobs to enqueue")
	flagBatch    = flag.Int("batch", 1000, "batch: jobs per request")
	flagConc     = flag.Int("conc", 4, "batch: concurrent connections")
	flagKeys     = flag.Bool("keys", false, "batch: give every job an idempotency key")
	flagRate     = flag.Int("rate", 500, "latency: jobs per second")
	flagDuration = flag.Duration("duration", 10*time.Second, "latency: how long to offer the rate")
	flagSamples  = flag.Int("samples", 100, "idle: jobs")
	flagIn       = flag.String("in", "", "table: file holding RESULT lines")
	flagKeep     = flag.Bool("keep", false, "keep the fresh database (for profiling)")
	flagDB       = flag.String("db", "", "use this database as it is (one holding a history from flint bench history, say) instead of a fresh one; it is migrated, never dropped")
	flagHoldFrom = flag.Duration("hold-from", 4*time.Minute, "sustain: when the REPEATABLE READ transaction starts")
	flagHold     = flag.Duration("hold", 2*time.Minute, "sustain: how long it stays open")
	flagSample   = flag.Duration("sample", 10*time.Second, "sustain: how often dead rows are sampled")
	flagHistory  = flag.Int("history-after", 1, "sustain: the history_after_minutes setting (0 keeps finished jobs in jobs); a flint scheduler moves them")
	flagLimits   = flag.Bool("limits", false, "drain: give the queue flow-control limits that never bind (concurrency, rate limit and per-key concurrency), to measure what enforcing them costs")
)

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

func main() {
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("flintbench: ")
	ctx := context.Background()
	switch *flagMode {
	case "drain":
		modeDrain(ctx)
	case "batch":
		modeBatch(ctx)
	case "latency":
		modeLatency(ctx, false)
	case "idle":
		modeLatency(ctx, true)
	case "sustain":
		modeSustain(ctx)
	case "table":
		modeTable()
	default:
		log.Fatalf("unknown -mode %q", *flagMode)
	}
}

// freshDatabase creates an empty database on the admin URL's server, runs
// Flint's migrations in it and returns its URL and a function dropping it.
func freshDatabase(ctx context.Context) (string, func()) {
	if *flagDB != "" {
		must(db.Migrate(ctx, *flagDB, slog.New(slog.NewTextHandler(io.Discard, nil))))
		return *flagDB, func() {}
	}
	name := fmt.Sprintf("flintbench_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9)
	conn, err := pgx.Connect(ctx, *flagAdmin)
	must(err)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+name)
	must(err)
	conn.Close(ctx)
	u, err := url.Parse(*flagAdmin)
	must(err)
	u.Path = "/" + name
	dbURL := u.String()
	must(db.Migrate(ctx, dbURL, slog.New(slog.NewTextHandler(io.Discard, nil))))
	return dbURL, func() {
		if *flagKeep {
			fmt.Fprintf(os.Stderr, "kept database %s\n", name)
			return
		}
		conn, err := pgx.Connect(ctx, *flagAdmin)
		must(err)
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		must(err)
	}
}

func openStore(ctx context.Context, dbURL string) *db.Store {
	s, err := db.Open(ctx, db.Config{URL: dbURL, MaxConns: 20})
	must(err)
	return s
}

func walLSN(ctx context.Context, s *db.Store) string {
	var lsn string
	must(s.Pool().QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn))
	return lsn
}

func walSince(ctx context.Context, s *db.Store, from string) float64 {
	var d float64
	must(s.Pool().QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::float8", from).Scan(&d))
	return d
}

// flintEnv is the environment of a flint child process: the caller's,
// without anything of Flint's that could change the measurement, plus env.
func flintEnv(env ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "FLINT_") || k == "DATABASE_URL" || k == "REDIS_URL" || k == "LOG_LEVEL" || k == "LOG_FORMAT" {
			continue
		}
		out = append(out, kv)
	}
	return append(out, env...)
}

// benchKey is the API key of the flint processes flintbench starts.
const benchKey = "flintbench-api-key-0123456789"

// benchEnv is the environment of a flint process serving dbURL, its HTTP
// on addr, logging errors only.
func benchEnv(dbURL, addr string) []string {
	return flintEnv("DATABASE_URL="+dbURL, "REDIS_URL="+*flagRedis, "FLINT_REDIS_PREFIX="+redisPrefix(),
		"FLINT_LOG_FILE=-", "LOG_LEVEL=error", "FLINT_ADDR="+addr, "FLINT_API_KEY="+benchKey,
		"FLINT_ADMIN_PASSWORD=flintbench-password", "FLINT_SESSION_KEY="+sessionKey)
}

// workerEnv is benchEnv for a worker, with -workers when given.
func workerEnv(dbURL string) []string {
	env := benchEnv(dbURL, freePort())
	if *flagWorkers > 0 {
		env = append(env, fmt.Sprintf("FLINT_WORKERS=%d", *flagWorkers))
	}
	return env
}

func startFlint(args []string, env []string) *exec.Cmd {
	cmd := exec.Command(*flagBin, args...)
	cmd.Env = env
	cmd.Stdout = io.Discard
	cmd.Stderr = os.Stderr
	must(cmd.Start())
	return cmd
}

func stopFlint(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

func freePort() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(err)
	defer l.Close()
	return l.Addr().String()
}

const sessionKey = "flintbench-session-key-0123456789abcdef"

func redisPrefix() string {
	return fmt.Sprintf("flintbench:%d:%d:", os.Getpid(), time.Now().UnixNano())
}

// enqueueNoops pre-inserts n noop jobs in batches of 5,000 (as riverbench
// pre-inserts River's), without events: no process is listening yet.
func enqueueNoops(ctx context.Context, s *db.Store, n int) {
	const chunk = 5000
	batch := make([]jobs.EnqueueParams, 0, chunk)
	for done := 0; done < n; done += len(batch) {
		batch = batch[:0]
		for range min(chunk, n-done) {
			batch = append(batch, jobs.EnqueueParams{Type: jobs.TypeNoop})
		}
		_, err := s.Enqueue(ctx, batch...)
		must(err)
	}
}

// modeDrain: fresh database, n noop jobs inserted, then the flint process
// is started and timed until the last job completes (its finished_at, read
// from the database clock, which is this machine's clock).
func modeDrain(ctx context.Context) {
	dbURL, drop := freshDatabase(ctx)
	defer drop()
	s := openStore(ctx, dbURL)
	defer s.Close()
	// As riverbench: checkpoint, insert, analyze, then time the drain.
	_, _ = s.Pool().Exec(ctx, "CHECKPOINT")
	// The drained jobs are those with ids from here on (UUIDv7, by creation
	// time): with -db the database may already hold millions of jobs, and
	// reading the drained ones by id range never scans them.
	firstID := uuidV7Floor(time.Now().Add(-time.Second))
	enqueueNoops(ctx, s, *flagN)
	_, err := s.Pool().Exec(ctx, "ANALYZE jobs")
	must(err)
	if *flagLimits {
		// Limits far above what the drain reaches: every claim takes the
		// flow-controlled path (lock, count, bucket, key rotation) and
		// none of them holds a job back.
		_, err := s.UpdateQueue(ctx, jobs.DefaultQueue, "flintbench", func(q jobs.QueueSettings) jobs.QueueSettings {
			many := jobs.MaxQueueConcurrency
			q.Concurrency, q.PerKeyConcurrency = &many, &many
			q.RateLimit = &jobs.RateLimit{Limit: jobs.MaxRateLimit, PeriodSeconds: 1}
			return q
		})
		must(err)
	}
	wal := walLSN(ctx, s)
	// Progress comes from the throughput counters the finishing statement
	// keeps (a few rows, so polling them costs the server nothing, where
	// counting jobs would compete with the drain it measures), less what
	// they held before: an earlier drain of the same database counts there.
	const doneSQL = `SELECT coalesce(sum(n), 0) FROM job_throughput WHERE outcome = 'succeeded'`
	var before int
	must(s.Pool().QueryRow(ctx, doneSQL).Scan(&before))

	env := workerEnv(dbURL)
	start := time.Now()
	cmd := startFlint([]string{*flagCmd}, env)
	deadline := start.Add(10 * time.Minute)
	for {
		time.Sleep(50 * time.Millisecond)
		var done int
		must(s.Pool().QueryRow(ctx, doneSQL).Scan(&done))
		if done -= before; done >= *flagN {
			break
		}
		if time.Now().After(deadline) {
			stopFlint(cmd)
			log.Fatalf("drain: %d of %d jobs done after 10 minutes", done, *flagN)
		}
	}
	var last time.Time
	var completed, runs int
	must(s.Pool().QueryRow(ctx, `SELECT max(finished_at), count(*) FILTER (WHERE status = 'completed') FROM jobs
		WHERE id >= $1`, firstID).Scan(&last, &completed))
	walBytes := walSince(ctx, s, wal)
	stopFlint(cmd)
	must(s.Pool().QueryRow(ctx, `SELECT count(*) FROM job_executions WHERE job_id >= $1`, firstID).Scan(&runs))
	if completed != *flagN || runs != *flagN {
		log.Fatalf("drain: %d completed and %d executions recorded for %d jobs", completed, runs, *flagN)
	}
	el := last.Sub(start)
	rate := float64(*flagN) / el.Seconds()
	fmt.Printf("drain %s n=%d: %v => %.0f jobs/s | WAL bytes/job %.0f\n", *flagLabel, *flagN, el.Round(time.Millisecond), rate, walBytes/float64(*flagN))
	fmt.Printf("RESULT flint drain %s rate=%.0f wal_per_job=%.0f\n", *flagLabel, rate, walBytes/float64(*flagN))
}

// modeBatch: fresh database, `flint api`, and n jobs sent in requests of
// -batch from -conc connections. Bodies are built before the clock starts.
func modeBatch(ctx context.Context) {
	dbURL, drop := freshDatabase(ctx)
	defer drop()
	key := benchKey
	addr := freePort()
	cmd := startFlint([]string{"api"}, benchEnv(dbURL, addr))
	defer stopFlint(cmd)
	base := "http://" + addr
	client := &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: *flagConc}, Timeout: time.Minute}
	for i := 0; ; i++ {
		resp, err := client.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if i > 300 {
			log.Fatalf("batch: flint api did not come up: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var bodies [][]byte
	run := time.Now().UnixNano()
	for off := 0; off < *flagN; off += *flagBatch {
		var b bytes.Buffer
		b.WriteString(`{"jobs":[`)
		for i := off; i < min(off+*flagBatch, *flagN); i++ {
			if i > off {
				b.WriteByte(',')
			}
			if *flagKeys {
				fmt.Fprintf(&b, `{"type":"noop","idempotency_key":"bench-%d-%d"}`, run, i)
			} else {
				b.WriteString(`{"type":"noop"}`)
			}
		}
		b.WriteString(`]}`)
		bodies = append(bodies, b.Bytes())
	}
	post := func(body []byte) {
		req, err := http.NewRequest(http.MethodPost, base+"/api/v1/jobs/batch", bytes.NewReader(body))
		must(err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", key)
		resp, err := client.Do(req)
		must(err)
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			log.Fatalf("batch: %s: %.300s", resp.Status, out)
		}
	}
	post(bodies[0]) // warm up the connection and the statement cache; not timed
	bodies = bodies[1:]
	n := *flagN - *flagBatch
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range *flagConc {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(bodies) {
					return
				}
				post(bodies[i])
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	rate := float64(n) / el.Seconds()
	if *flagKeys {
		// The same requests again: every job must come back as the existing one.
		s := openStore(ctx, dbURL)
		defer s.Close()
		post(bodies[0])
		var total int
		must(s.Pool().QueryRow(ctx, `SELECT count(*) FROM jobs`).Scan(&total))
		if total != *flagN {
			log.Fatalf("batch: %d jobs after resending keyed batch, want %d", total, *flagN)
		}
	}
	fmt.Printf("batch %s n=%d batch=%d conc=%d keys=%v: %v => %.0f jobs/s\n", *flagLabel, n, *flagBatch, *flagConc, *flagKeys, el.Round(time.Millisecond), rate)
	fmt.Printf("RESULT flint batch %s rate=%.0f\n", *flagLabel, rate)
}

// modeLatency runs an in-process pool wired as `flint worker` wires it
// (LISTEN/NOTIFY wakes it, events published) and measures enqueue ->
// handler start, either at a steady rate or one job at a time at idle.
func modeLatency(ctx context.Context, idle bool) {
	dbURL, drop := freshDatabase(ctx)
	defer drop()
	s := openStore(ctx, dbURL)
	defer s.Close()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	var rds *db.Redis
	if *flagRedis != "" {
		var err error
		rds, err = db.OpenRedis(ctx, *flagRedis, redisPrefix(), logger)
		must(err)
		defer rds.Close()
		s.SetRedis(rds)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	bus := db.NewEventBus(s, rds, false, logger, nil)
	s.SetEventSink(bus)
	go func() { _ = bus.Run(ctx) }()
	if rds != nil {
		go func() { _ = rds.Run(ctx) }()
	}

	var mu sync.Mutex
	var lats []time.Duration
	started := make(chan time.Duration, 1<<16)
	reg := jobs.NewRegistry()
	reg.Register("probe", jobs.HandlerFunc(func(_ context.Context, j *jobs.Job) (any, error) {
		now := time.Now()
		var p struct {
			At int64 `json:"at"`
		}
		_ = json.Unmarshal(j.Payload, &p)
		d := now.Sub(time.Unix(0, p.At))
		mu.Lock()
		lats = append(lats, d)
		mu.Unlock()
		started <- d
		return nil, nil
	}))
	pool := workers.NewPool(workers.Config{WorkerID: "flintbench"}, s, reg, logger)
	listener := db.NewListener(dbURL, logger, 0)
	listener.Handle(db.ChannelJobs, pool.Wake)
	connected := make(chan struct{}, 1)
	listener.OnConnect(func() {
		pool.Wake("")
		select {
		case connected <- struct{}{}:
		default:
		}
	})
	go func() { _ = listener.Run(ctx) }()
	<-connected
	go func() { _ = pool.Run(ctx) }()
	time.Sleep(time.Second)

	var callMu sync.Mutex
	var calls []time.Duration
	enqueue := func() {
		t := time.Now()
		payload := fmt.Appendf(nil, `{"at":%d}`, t.UnixNano())
		_, err := s.Enqueue(ctx, jobs.EnqueueParams{Type: "probe", Payload: payload})
		must(err)
		callMu.Lock()
		calls = append(calls, time.Since(t))
		callMu.Unlock()
	}
	var sent int
	if idle {
		for range *flagSamples {
			time.Sleep(time.Duration(200+rand.IntN(300)) * time.Millisecond) // as riverbench: let the pool go idle
			enqueue()
			sent++
			select {
			case <-started:
			case <-time.After(10 * time.Second):
				log.Fatal("idle: job not started within 10 s")
			}
		}
	} else {
		// riverbench offers the rate through 32 inserting goroutines.
		work := make(chan struct{}, 128)
		var wg sync.WaitGroup
		for range 32 {
			wg.Go(func() {
				for range work {
					enqueue()
				}
			})
		}
		start := time.Now()
		tick := time.NewTicker(time.Millisecond)
		for now := range tick.C {
			el := now.Sub(start)
			if el >= *flagDuration {
				break
			}
			for want := int(el.Seconds() * float64(*flagRate)); sent < want; sent++ {
				work <- struct{}{}
			}
		}
		tick.Stop()
		close(work)
		wg.Wait()
		deadline := time.After(time.Minute)
		for {
			mu.Lock()
			n := len(lats)
			mu.Unlock()
			if n >= sent {
				break
			}
			select {
			case <-deadline:
				log.Fatalf("latency: %d of %d started", n, sent)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lats)
	pct := func(p float64) float64 { return float64(lats[int(p*float64(len(lats)-1))]) / 1e6 }
	what := "latency"
	if idle {
		what = "idle"
	}
	slices.Sort(calls)
	fmt.Printf("%s %s jobs=%d: enqueue->start p50=%.2fms p90=%.2fms p99=%.2fms max=%.2fms | Enqueue call p50=%.2fms\n", what, *flagLabel, len(lats), pct(0.5), pct(0.9), pct(0.99), pct(1),
		float64(calls[len(calls)/2])/1e6)
	fmt.Printf("RESULT flint %s %s p50_ms=%.2f p99_ms=%.2f\n", what, *flagLabel, pct(0.5), pct(0.99))
}

// ---------------------------------------------------------------------------
// The table

var (
	reFlint       = regexp.MustCompile(`^RESULT flint (\w+) (\S+) (.*)$`)
	reKV          = regexp.MustCompile(`(\w+)=([0-9.]+)`)
	reRiverDrain  = regexp.MustCompile(`^RESULT drain n=\d+ workers=(\d+) jobs/s: median ([0-9.]+)`)
	reRiverInsert = regexp.MustCompile(`^RESULT insert (InsertMany[\w-]*) n=\d+ batch=\d+ jobs/s: median ([0-9.]+)`)
	reRiverSteady = regexp.MustCompile(`^RESULT steady rate=(\d+) .*start p50 ms median ([0-9.]+).*start p99 ms median ([0-9.]+)`)
	reRiverIdle   = regexp.MustCompile(`^RESULT idle insert->start p50 ms: median ([0-9.]+).*p99 ms: median ([0-9.]+)`)
	reRiverWAL    = regexp.MustCompile(`^drain rep=\d+ n=\d+ workers=(\d+):.*fetch\+complete ([0-9.]+)`)
)

type row struct {
	what, flint, river string
	ratio              string
}

func modeTable() {
	f, err := os.Open(*flagIn)
	must(err)
	defer f.Close()
	// A figure measured more than once (the flow-control drains run in the
	// order A B B A) is the mean of its runs.
	flint := map[string]map[string]float64{} // "drain worker-defaults-redis" → jobs/s, wal_per_job
	runs := map[string]float64{}
	river := map[string]float64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if m := reFlint.FindStringSubmatch(line); m != nil {
			key := m[1] + " " + m[2]
			kv := flint[key]
			if kv == nil {
				kv = map[string]float64{}
				flint[key] = kv
			}
			n := runs[key]
			for _, p := range reKV.FindAllStringSubmatch(m[3], -1) {
				v, _ := strconv.ParseFloat(p[2], 64)
				kv[p[1]] = (kv[p[1]]*n + v) / (n + 1)
			}
			runs[key] = n + 1
		} else if m := reRiverDrain.FindStringSubmatch(line); m != nil {
			river["drain"], _ = strconv.ParseFloat(m[2], 64)
		} else if m := reRiverWAL.FindStringSubmatch(line); m != nil {
			river["drain wal"], _ = strconv.ParseFloat(m[2], 64)
		} else if m := reRiverInsert.FindStringSubmatch(line); m != nil {
			river[m[1]], _ = strconv.ParseFloat(m[2], 64)
		} else if m := reRiverSteady.FindStringSubmatch(line); m != nil {
			river["steady p50"], _ = strconv.ParseFloat(m[2], 64)
			river["steady p99"], _ = strconv.ParseFloat(m[3], 64)
		} else if m := reRiverIdle.FindStringSubmatch(line); m != nil {
			river["idle p50"], _ = strconv.ParseFloat(m[1], 64)
			river["idle p99"], _ = strconv.ParseFloat(m[2], 64)
		}
	}
	must(sc.Err())

	rate := func(v float64) string {
		if v == 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.0f/s", v)
	}
	ratio := func(a, b float64) string {
		if a == 0 || b == 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.2fx", a/b)
	}
	var rows []row
	drains := []struct{ key, what string }{
		{"drain worker-defaults-redis", "drain: flint worker, defaults, Redis"},
		{"drain worker-defaults-noredis", "drain: flint worker, defaults, no Redis"},
		{"drain worker-1000-redis", "drain: flint worker, FLINT_WORKERS=1000, Redis"},
		{"drain worker-1000-noredis", "drain: flint worker, FLINT_WORKERS=1000, no Redis"},
		{"drain serve-defaults-redis", "drain: flint serve, defaults, Redis"},
		{"drain serve-defaults-noredis", "drain: flint serve, defaults, no Redis"},
	}
	for _, d := range drains {
		if kv, ok := flint[d.key]; ok {
			rows = append(rows, row{d.what + " (vs River 1,000 workers)", rate(kv["rate"]), rate(river["drain"]), ratio(kv["rate"], river["drain"])})
		}
	}
	// Flow control's cost: the same drain with limits that never bind,
	// against the drain without them (target >= 0.90x).
	for _, d := range drains {
		if kv, ok := flint[d.key+"-limits"]; ok {
			rows = append(rows, row{d.what + ", limits not binding (vs River 1,000 workers)", rate(kv["rate"]), rate(river["drain"]), ratio(kv["rate"], river["drain"])})
			if base, ok := flint[d.key]; ok {
				rows = append(rows, row{d.what + ": with limits not binding / without", rate(kv["rate"]), rate(base["rate"]), ratio(kv["rate"], base["rate"])})
			}
		}
	}
	if kv, ok := flint["drain worker-1000-noredis"]; ok && river["drain wal"] > 0 {
		rows = append(rows, row{"drain: WAL bytes per job (1000 workers, no Redis)", fmt.Sprintf("%.0f B", kv["wal_per_job"]), fmt.Sprintf("%.0f B", river["drain wal"]), ratio(kv["wal_per_job"], river["drain wal"])})
	}
	for _, b := range []struct{ key, rkey, what string }{
		{"batch nokeys", "InsertMany", "batch enqueue over HTTP, no keys (vs InsertMany)"},
		{"batch keys", "InsertMany", "batch enqueue over HTTP, idempotency keys (vs InsertMany)"},
		{"batch keys", "InsertMany-unique", "batch enqueue over HTTP, idempotency keys (vs InsertMany, unique by args)"},
	} {
		if kv, ok := flint[b.key]; ok && river[b.rkey] > 0 {
			rows = append(rows, row{b.what, rate(kv["rate"]), rate(river[b.rkey]), ratio(kv["rate"], river[b.rkey])})
		}
	}
	if river["InsertManyFast"] > 0 {
		rows = append(rows, row{"(River InsertManyFast, COPY, for scale)", "", rate(river["InsertManyFast"]), ""})
	}
	msf := func(v float64) string { return fmt.Sprintf("%.2f ms", v) }
	for _, l := range []struct{ key, rkey, what string }{
		{"idle", "idle", "pickup at idle"},
		{"latency", "steady", "pickup at 500/s"},
	} {
		keys := slices.Sorted(maps.Keys(flint))
		for _, k := range keys {
			kv := flint[k]
			if !strings.HasPrefix(k, l.key+" ") {
				continue
			}
			rows = append(rows,
				row{l.what + ", p50 (" + strings.TrimPrefix(k, l.key+" ") + ")", msf(kv["p50_ms"]), msf(river[l.rkey+" p50"]), ratio(kv["p50_ms"], river[l.rkey+" p50"])},
				row{l.what + ", p99 (" + strings.TrimPrefix(k, l.key+" ") + ")", msf(kv["p99_ms"]), msf(river[l.rkey+" p99"]), ratio(kv["p99_ms"], river[l.rkey+" p99"])})
		}
	}
	w := [3]int{len("measurement"), len("Flint"), len("River")}
	for _, r := range rows {
		w[0], w[1], w[2] = max(w[0], len(r.what)), max(w[1], len(r.flint)), max(w[2], len(r.river))
	}
	line := func(a, b, c, d string) { fmt.Printf("| %-*s | %*s | %*s | %7s |\n", w[0], a, w[1], b, w[2], c, d) }
	line("measurement", "Flint", "River", "F/R")
	fmt.Printf("|%s|%s:|%s:|%s:|\n", strings.Repeat("-", w[0]+2), strings.Repeat("-", w[1]+1), strings.Repeat("-", w[2]+1), strings.Repeat("-", 8))
	for _, r := range rows {
		line(r.what, r.flint, r.river, r.ratio)
	}
	fmt.Println("\nF/R: Flint's figure over River's. Rates: higher is better (drain target >= 1.50x, batch >= 1.00x); latencies: lower is better.")
	if len(rows) == 0 {
		fmt.Fprintln(os.Stderr, errors.New("no RESULT lines found"))
		os.Exit(1)
	}
}

// uuidV7Floor is the smallest version 7 UUID of the millisecond t: every
// id minted at or after t sorts after it.
func uuidV7Floor(t time.Time) uuid.UUID {
	var id uuid.UUID
	ms := uint64(t.UnixMilli())
	for i := range 6 {
		id[i] = byte(ms >> (40 - 8*i))
	}
	id[6] = 0x70 // version 7
	id[8] = 0x80 // RFC 4122 variant
	return id
}

// modeSustain feeds one `flint worker` -rate noop jobs a second for
// -duration (from a fresh database, or -db), with a `flint scheduler`
// moving finished jobs to the history -history-after minutes after they
// finish, holds a REPEATABLE READ
// transaction open from -hold-from for -hold, and samples the jobs table's
// row counts every -sample. Dead rows can only be removed once no snapshot
// needs them, so they pile up while the transaction is open; the figure
// of interest is whether they stay bounded outside it and come back down
// after it. Autovacuum must be on in the server (it says so if not).
func modeSustain(ctx context.Context) {
	dbURL, drop := freshDatabase(ctx)
	defer drop()
	s := openStore(ctx, dbURL)
	defer s.Close()
	var av string
	must(s.Pool().QueryRow(ctx, `SHOW autovacuum`).Scan(&av))
	if av != "on" {
		log.Printf("warning: autovacuum is %s in this server: nothing will remove dead rows", av)
	}
	_, _, err := s.UpdateSettings(ctx, map[string]json.RawMessage{
		"history_after_minutes": json.RawMessage(strconv.Itoa(*flagHistory))}, "flintbench")
	must(err)
	env := workerEnv(dbURL)
	cmd := startFlint([]string{"worker"}, env)
	defer stopFlint(cmd)
	sched := startFlint([]string{"scheduler"}, benchEnv(dbURL, freePort()))
	defer stopFlint(sched)

	start := time.Now()
	feedCtx, stopFeed := context.WithCancel(ctx)
	fed := make(chan int)
	go func() { // -rate a second, in tenths
		n, tick := 0, time.NewTicker(100*time.Millisecond)
		defer tick.Stop()
		for k := 1; ; k++ {
			select {
			case <-feedCtx.Done():
				fed <- n
				return
			case <-tick.C:
			}
			want := *flagRate*k/10 - *flagRate*(k-1)/10
			ps := make([]jobs.EnqueueParams, want)
			for i := range ps {
				ps[i] = jobs.EnqueueParams{Type: jobs.TypeNoop}
			}
			if want > 0 {
				_, err := s.Enqueue(feedCtx, ps...)
				if err != nil && feedCtx.Err() == nil {
					log.Fatal(err)
				}
				n += want
			}
		}
	}()

	var hold pgx.Tx
	holding, held := false, false
	fmt.Printf("%8s %10s %10s %8s %10s %10s %s\n", "t", "live", "dead", "queued", "vacuums", "history", "")
	next := time.Duration(0)
	var maxOutside, maxDuring, lastDead int64
	for el := time.Since(start); el < *flagDuration; el = time.Since(start) {
		switch {
		case !holding && !held && el >= *flagHoldFrom:
			tx, err := s.Pool().BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
			must(err)
			var one int
			must(tx.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM jobs LIMIT 1) x`).Scan(&one)) // takes the snapshot
			hold, holding = tx, true
		case holding && el >= *flagHoldFrom+*flagHold:
			must(hold.Commit(ctx))
			holding, held = false, true
		}
		if el >= next {
			var live, dead, vacuums int64
			var queued int
			must(s.Pool().QueryRow(ctx, `SELECT n_live_tup, n_dead_tup, autovacuum_count + vacuum_count FROM pg_stat_user_tables WHERE relname = 'jobs'`).Scan(&live, &dead, &vacuums))
			must(s.Pool().QueryRow(ctx, `SELECT count(*) FROM jobs WHERE status = 'queued' AND deleted_at IS NULL`).Scan(&queued))
			var history int64
			must(s.Pool().QueryRow(ctx, `SELECT coalesce(sum(n), 0)::bigint FROM job_history_counts`).Scan(&history))
			mark := ""
			if holding {
				mark = "REPEATABLE READ transaction open"
				maxDuring = max(maxDuring, dead)
			} else {
				maxOutside = max(maxOutside, dead)
			}
			lastDead = dead
			fmt.Printf("%8s %10d %10d %8d %10d %10d %s\n", el.Round(time.Second), live, dead, queued, vacuums, history, mark)
			next += *flagSample
		}
		time.Sleep(200 * time.Millisecond)
	}
	if holding {
		must(hold.Commit(ctx))
	}
	stopFeed()
	n := <-fed
	fmt.Printf("sustain %s: %d jobs offered at %d/s for %s; dead rows at most %d outside the transaction, %d while it was open, %d at the end\n",
		*flagLabel, n, *flagRate, *flagDuration, maxOutside, maxDuring, lastDead)
	fmt.Printf("RESULT flint sustain %s dead_max_outside=%d dead_max_during=%d dead_end=%d\n", *flagLabel, maxOutside, maxDuring, lastDead)
}
