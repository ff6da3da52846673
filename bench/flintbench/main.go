// Command flintbench measures Flint the way bench/riverbench measures River,
// so that scripts/bench-compare.sh can run both against one PostgreSQL
// server in one run and print their ratios.
//
// Modes (flintbench -mode=MODE [flags]):
//
//	drain    fresh database, pre-insert -n noop jobs, start the flint binary
//	         (-cmd worker or serve) and time it until every job is completed
//	single   fresh database, start `flint api`, POST /api/v1/jobs (one job
//	         a request) from -conc keep-alive connections for -duration;
//	         rate and per-request p50/p99
//	http     fresh database that first drains -n jobs through `flint worker`,
//	         then `flint api` alone under the outside load generator
//	         -httpload (../shared/peers/httpload): -http-n single enqueues
//	         from -conc keep-alive connections
//	scale    fresh database, `flint api` and -procs `flint worker` processes;
//	         -http-n single enqueues by -httpload from -conc connections,
//	         timed until every job has run; WAL and commits per job
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
//	waits    sample pg_stat_activity every 10 ms for -duration (or until
//	         killed) and print what the active backends of databases
//	         matching -match waited on, busiest first (the profile of
//	         whatever load runs meanwhile)
//	table    read RESULT lines (Flint's and River's) from -in and print the
//	         comparison table
//
// Each measuring mode prints one RESULT line; see parseResults for the shape.
package main

import (
	"context"
	"flag"
	"log"
	"os"
	"time"
)

var (
	flagMode     = flag.String("mode", "", "drain|batch|latency|idle|table")
	flagAdmin    = flag.String("admin", envOr("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"), "URL of a database from which fresh ones can be created")
	flagRedis    = flag.String("redis", "", "REDIS_URL for Flint; empty for PostgreSQL-only mode")
	flagBin      = flag.String("bin", "bin/flint", "the flint binary")
	flagCmd      = flag.String("cmd", "worker", "drain: flint subcommand that drains (worker or serve)")
	flagWorkers  = flag.Int("workers", 0, "drain: FLINT_WORKERS (0 leaves Flint's default)")
	flagType     = flag.String("type", "noop", "drain: the job type pre-inserted (a type of one's own needs -bin to serve it)")
	flagPayload  = flag.String("payload", "", "drain: the jobs' payload, JSON (empty: none)")
	flagLabel    = flag.String("label", "", "name of the figure in the RESULT line")
	flagN        = flag.Int("n", 100_000, "drain: jobs to pre-insert; batch: jobs to enqueue")
	flagBatch    = flag.Int("batch", 1000, "batch: jobs per request")
	flagConc     = flag.Int("conc", 4, "batch: concurrent connections")
	flagKeys     = flag.Bool("keys", false, "batch: give every job an idempotency key")
	flagRate     = flag.Int("rate", 500, "latency: jobs per second")
	flagDuration = flag.Duration("duration", 10*time.Second, "latency: how long to offer the rate")
	flagSamples  = flag.Int("samples", 100, "idle: jobs")
	flagIn       = flag.String("in", "", "table: file holding RESULT lines")
	flagEnv      = flag.String("flint-env", "", "extra settings for the flint processes started, comma-separated KEY=VALUE (FLINT_ENQUEUE_WINDOW=2ms, say)")
	flagMatch    = flag.String("match", "^(flintbench|riverbench)_", "waits: a regexp of the database names to sample")
	flagKeep     = flag.Bool("keep", false, "keep the fresh database (for profiling)")
	flagDB       = flag.String("db", "", "use this database as it is (one holding a history from flint bench history, say) instead of a fresh one; it is migrated, never dropped")
	flagHoldFrom = flag.Duration("hold-from", 4*time.Minute, "sustain: when the REPEATABLE READ transaction starts")
	flagHold     = flag.Duration("hold", 2*time.Minute, "sustain: how long it stays open")
	flagSample   = flag.Duration("sample", 10*time.Second, "sustain: how often dead rows are sampled")
	flagHistory  = flag.Int("history-after", 1, "sustain: the history_after_minutes setting (0 keeps finished jobs in jobs); a flint scheduler moves them")
	flagCold     = flag.Bool("cold", false, "drain: do not ANALYZE the jobs table after the insert (the first burst into a table nothing has analyzed)")
	flagHTTPLoad = flag.String("httpload", "", "http, scale: the load generator's binary")
	flagHTTPN    = flag.Int("http-n", 20000, "http, scale: requests")
	flagProcs    = flag.Int("procs", 2, "scale: worker processes")
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
	case "http":
		modeHTTP(ctx)
	case "scale":
		modeScale(ctx)
	case "single":
		modeSingle(ctx)
	case "latency":
		modeLatency(ctx, false)
	case "idle":
		modeLatency(ctx, true)
	case "sustain":
		modeSustain(ctx)
	case "waits":
		modeWaits(ctx)
	case "table":
		modeTable()
	default:
		log.Fatalf("unknown -mode %q", *flagMode)
	}
}
