#!/usr/bin/env bash
# Flint against River (bench/riverbench, River v0.51.2) on one PostgreSQL
# server, with Asynq (bench/asynqbench, Asynq v0.26.0, on Redis) beside it
# for single enqueues and drains, and DBOS Transact Go (v1.9.0, the harness
# in ../shared/peers/dbosbench) for durable steps, sleeps and signals, in
# one run, one measurement at a time,
# and one table of rates and ratios at the end. Absolute rates drift between machines and minutes; the
# ratio measured in one run is the figure that means something.
#
#   make bench-compare                   (or scripts/bench-compare.sh)
#
# Settings (environment):
#   BENCH_DATABASE_URL  a database on the server from which fresh ones are
#                       created (default: TEST_DATABASE_URL, else the local postgres)
#   BENCH_REDIS_URL     Redis for the "Redis" runs (default: TEST_REDIS_URL, else local)
#   ASYNQ_REDIS_URL     Redis database for Asynq's tasks (default: database 9
#                       of the local server; its asynq:* keys are deleted)
#   DRAIN_N=100000      jobs pre-inserted for each drain
#   RIVER_WORKERS=1000  River's MaxWorkers in its drain at its defaults
#   RIVER_TUNED_WORKERS=2000 RIVER_TUNED_COOLDOWN=2ms   River tuned for
#                       throughput: the drain the targets compare with
#   HTTP_N=100000       single enqueues sent by the outside client
#                       (bench/httpload) to a flint api whose database has
#                       drained DRAIN_N jobs first
#   BATCH_N=100000      jobs enqueued over HTTP (and by River's InsertMany)
#   BATCH_SIZE=1000     jobs per request / per InsertMany call
#   BATCH_CONC=4        concurrent HTTP connections
#   SINGLE_CONC=64 SINGLE_DURATION=15s   single enqueues: POST /api/v1/jobs
#                       from keep-alive connections against River's Insert
#                       from as many goroutines (and as many connections)
#   RATE=500 RATE_DURATION=10s   steady pickup latency
#   IDLE_SAMPLES=100    pickup latency at idle, one job at a time
#   ONLY=""             a regexp: run only the steps whose names match
#                       (river-drain, river-drain-tuned, river-claim,
#                       river-drain-tuned-cold, drain-worker-defaults-cold,
#                       http, scale-1, scale-2, river-insert, river-latency, river-idle,
#                       drain-worker-defaults-redis, ...,
#                       drain-worker-defaults-noredis-limits,
#                       drain-worker-1000-noredis-limits, river-single,
#                       single, batch-nokeys, batch-keys, latency, idle,
#                       dbos-steps, durable-steps, dbos-sleep, durable-sleep,
#                       dbos-signal, dbos-signal16, durable-signal)
#   DBOSBENCH_DIR       the DBOS Transact Go harness for the durable rows
#                       (default ../shared/peers/dbosbench beside the repository;
#                       when it is missing, Flint's durable side runs alone)
#   WAITS=1             sample pg_stat_activity during each step and print
#                       what PostgreSQL's backends waited on (WAITS lines)
#   OUT=.flint/bench-compare-<time>.txt   where every step's output goes
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

ADMIN="${BENCH_DATABASE_URL:-${TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}}"
REDIS="${BENCH_REDIS_URL:-${TEST_REDIS_URL:-redis://127.0.0.1:6379/0}}"
ASYNQ_REDIS="${ASYNQ_REDIS_URL:-redis://127.0.0.1:6379/9}"
DRAIN_N="${DRAIN_N:-100000}"
RIVER_WORKERS="${RIVER_WORKERS:-1000}"
RIVER_TUNED_WORKERS="${RIVER_TUNED_WORKERS:-2000}"
RIVER_TUNED_COOLDOWN="${RIVER_TUNED_COOLDOWN:-2ms}"
HTTP_N="${HTTP_N:-100000}"
BATCH_N="${BATCH_N:-100000}"
BATCH_SIZE="${BATCH_SIZE:-1000}"
BATCH_CONC="${BATCH_CONC:-4}"
RATE="${RATE:-500}"
RATE_DURATION="${RATE_DURATION:-10s}"
IDLE_SAMPLES="${IDLE_SAMPLES:-100}"
SINGLE_CONC="${SINGLE_CONC:-64}"
SINGLE_DURATION="${SINGLE_DURATION:-15s}"
WAITS="${WAITS:-1}"
ONLY="${ONLY:-.}"
mkdir -p .flint
OUT="${OUT:-.flint/bench-compare-$(date +%Y%m%d-%H%M%S).txt}"
: >"$OUT"

BIN="$(mktemp -d)"
trap 'rm -rf "$BIN"' EXIT

echo "building flint, flintbench, httpload, riverbench and asynqbench..."
go build -o "$BIN/flint" .
go build -o "$BIN/flintbench" ./bench/flintbench
(cd bench/riverbench && go build -o "$BIN/riverbench" .)
(cd bench/httpload && go build -o "$BIN/httpload" .)
(cd bench/asynqbench && go build -o "$BIN/asynqbench" .)
DBOSBENCH_DIR="${DBOSBENCH_DIR:-$ROOT/../shared/peers/dbosbench}"
if [[ -f $DBOSBENCH_DIR/go.mod ]]; then
	(cd "$DBOSBENCH_DIR" && go build -o "$BIN/dbosbench" .)
else
	echo "no DBOS harness at $DBOSBENCH_DIR: the durable rows run Flint's side alone"
fi

FB=("$BIN/flintbench" -admin "$ADMIN" -bin "$BIN/flint")

# step NAME CMD...: runs CMD when NAME matches ONLY, output to the terminal and $OUT.
step() {
	local name=$1
	shift
	[[ $name =~ $ONLY ]] || return 0
	echo "== $name" | tee -a "$OUT"
	local sampler=""
	if [[ $WAITS == 1 ]]; then
		"$BIN/flintbench" -mode=waits -admin "$ADMIN" -duration 30m -label "$name" >"$BIN/waits" 2>&1 &
		sampler=$!
	fi
	"$@" 2>&1 | tee -a "$OUT"
	if [[ -n $sampler ]]; then
		kill -TERM "$sampler" 2>/dev/null || true
		wait "$sampler" || true
		tee -a "$OUT" <"$BIN/waits"
	fi
}

# River gets its own fresh database, as each Flint step does.
RIVER_DB_NAME="riverbench_$$"
RIVER_DB="$(sed -E "s#/[^/?]*(\?|$)#/$RIVER_DB_NAME\1#" <<<"$ADMIN")"
psql -q "$ADMIN" -c "CREATE DATABASE $RIVER_DB_NAME" >/dev/null
trap 'psql -q "$ADMIN" -c "DROP DATABASE IF EXISTS $RIVER_DB_NAME WITH (FORCE)" >/dev/null; rm -rf "$BIN"' EXIT
"$BIN/riverbench" -mode=migrate -db "$RIVER_DB" >/dev/null

step river-drain "$BIN/riverbench" -mode=drain -n "$DRAIN_N" -workers "$RIVER_WORKERS" -reps 1 -db "$RIVER_DB"
step river-drain-tuned "$BIN/riverbench" -mode=drain -n "$DRAIN_N" -workers "$RIVER_TUNED_WORKERS" -fetch-cooldown "$RIVER_TUNED_COOLDOWN" -reps 1 -db "$RIVER_DB"
# The ceiling: FOR UPDATE SKIP LOCKED claims of 100 and their completion
# on a bare one-index table, 8 claimers, nothing else.
step river-claim "$BIN/riverbench" -mode=claim -n "$DRAIN_N" -claim-batches 100 -claim-conc 8 -reps 1 -db "$RIVER_DB"
step asynq-drain "$BIN/asynqbench" -mode=drain -n "$DRAIN_N" -workers "$RIVER_WORKERS" -redis "$ASYNQ_REDIS"
step drain-worker-defaults-redis "${FB[@]}" -mode=drain -cmd worker -n "$DRAIN_N" -redis "$REDIS" -label worker-defaults-redis
step drain-worker-defaults-noredis "${FB[@]}" -mode=drain -cmd worker -n "$DRAIN_N" -redis "" -label worker-defaults-noredis
step drain-worker-1000-redis "${FB[@]}" -mode=drain -cmd worker -workers 1000 -n "$DRAIN_N" -redis "$REDIS" -label worker-1000-redis
step drain-worker-1000-noredis "${FB[@]}" -mode=drain -cmd worker -workers 1000 -n "$DRAIN_N" -redis "" -label worker-1000-noredis
step drain-serve-defaults-redis "${FB[@]}" -mode=drain -cmd serve -n "$DRAIN_N" -redis "$REDIS" -label serve-defaults-redis
step drain-serve-defaults-noredis "${FB[@]}" -mode=drain -cmd serve -n "$DRAIN_N" -redis "" -label serve-defaults-noredis
# Cold: the burst drained without the ANALYZE that settles the table, as
# users first meet it.
step river-drain-tuned-cold "$BIN/riverbench" -mode=drain -cold -n "$DRAIN_N" -workers "$RIVER_TUNED_WORKERS" -fetch-cooldown "$RIVER_TUNED_COOLDOWN" -reps 1 -db "$RIVER_DB"
step drain-worker-defaults-cold "${FB[@]}" -mode=drain -cold -cmd worker -n "$DRAIN_N" -redis "$REDIS" -label worker-defaults-cold
# Flow control's cost: the same drains with limits on the queue that never
# bind (the table compares each with its runs without limits). Runs in the
# order A B B A (the table averages a figure measured twice): the later
# runs of a series meet the WAL of the earlier ones to checkpoint, and
# limits measured only after their baseline came out 10-20% worse than
# when interleaved.
step drain-worker-defaults-noredis-limits "${FB[@]}" -mode=drain -cmd worker -limits -n "$DRAIN_N" -redis "" -label worker-defaults-noredis-limits
step drain-worker-defaults-noredis-limits "${FB[@]}" -mode=drain -cmd worker -limits -n "$DRAIN_N" -redis "" -label worker-defaults-noredis-limits
step drain-worker-defaults-noredis-again "${FB[@]}" -mode=drain -cmd worker -n "$DRAIN_N" -redis "" -label worker-defaults-noredis
step drain-worker-1000-noredis-limits "${FB[@]}" -mode=drain -cmd worker -workers 1000 -limits -n "$DRAIN_N" -redis "" -label worker-1000-noredis-limits
step drain-worker-1000-noredis-limits "${FB[@]}" -mode=drain -cmd worker -workers 1000 -limits -n "$DRAIN_N" -redis "" -label worker-1000-noredis-limits
step drain-worker-1000-noredis-again "${FB[@]}" -mode=drain -cmd worker -workers 1000 -n "$DRAIN_N" -redis "" -label worker-1000-noredis

step river-single "$BIN/riverbench" -mode=insert1 -conc "$SINGLE_CONC" -pool "$SINGLE_CONC" -duration "$SINGLE_DURATION" -reps 1 -db "$RIVER_DB"
step asynq-single "$BIN/asynqbench" -mode=single -conc "$SINGLE_CONC" -duration "$SINGLE_DURATION" -redis "$ASYNQ_REDIS"
step http "${FB[@]}" -mode=http -httpload "$BIN/httpload" -n "$DRAIN_N" -http-n "$HTTP_N" -conc "$SINGLE_CONC" -redis "$REDIS" -label outside-client
# Flint as separate processes: one flint api taking single enqueues from
# the outside client while one, then two flint worker processes run them.
step scale-1 "${FB[@]}" -mode=scale -httpload "$BIN/httpload" -procs 1 -http-n "$HTTP_N" -conc "$SINGLE_CONC" -redis "$REDIS" -label api+1worker
step scale-2 "${FB[@]}" -mode=scale -httpload "$BIN/httpload" -procs 2 -http-n "$HTTP_N" -conc "$SINGLE_CONC" -redis "$REDIS" -label api+2workers
step single "${FB[@]}" -mode=single -conc "$SINGLE_CONC" -duration "$SINGLE_DURATION" -redis "$REDIS" -label "${SINGLE_CONC}conn"

step river-insert "$BIN/riverbench" -mode=insert -unique -n "$BATCH_N" -batch "$BATCH_SIZE" -reps 1 -db "$RIVER_DB"
step batch-nokeys "${FB[@]}" -mode=batch -n "$BATCH_N" -batch "$BATCH_SIZE" -conc "$BATCH_CONC" -redis "$REDIS" -label nokeys
step batch-keys "${FB[@]}" -mode=batch -keys -n "$BATCH_N" -batch "$BATCH_SIZE" -conc "$BATCH_CONC" -redis "$REDIS" -label keys

step river-latency "$BIN/riverbench" -mode=latency -rate "$RATE" -duration "$RATE_DURATION" -reps 1 -db "$RIVER_DB"
step latency "${FB[@]}" -mode=latency -rate "$RATE" -duration "$RATE_DURATION" -redis "$REDIS" -label "${RATE}/s"
step river-idle "$BIN/riverbench" -mode=idle -samples "$IDLE_SAMPLES" -reps 1 -db "$RIVER_DB"
step idle "${FB[@]}" -mode=idle -samples "$IDLE_SAMPLES" -redis "$REDIS" -label idle

# Durable execution against DBOS Transact Go v1.9.0 (its harness's README
# says what each mode does): each DBOS mode on a fresh database of its own,
# Flint's side as the benchmarks in internal/e2e (fresh test databases,
# one in-process pool of 100 workers, DBOS's -conc 100).
dbos() { # dbos NAME ARGS...: the DBOS harness on a fresh database
	local dbname="dbosbench_$$_${1//-/_}" rc=0
	shift
	psql -q "$ADMIN" -c "CREATE DATABASE $dbname" >/dev/null
	"$BIN/dbosbench" -db "$(sed -E "s#/[^/?]*(\?|$)#/$dbname\1#" <<<"$ADMIN")" "$@" || rc=$?
	psql -q "$ADMIN" -c "DROP DATABASE IF EXISTS $dbname WITH (FORCE)" >/dev/null
	return $rc
}
durable() { TEST_DATABASE_URL="$ADMIN" go test -run '^$' -bench "$1" -benchtime 1x -timeout 30m ./internal/e2e; }
if [[ -x $BIN/dbosbench ]]; then
	step dbos-steps dbos steps -mode steps -poll 100ms
fi
step durable-steps durable 'BenchmarkDurableSteps$'
if [[ -x $BIN/dbosbench ]]; then
	step dbos-sleep dbos sleep -mode sleep -sleep 60s
fi
step durable-sleep durable 'BenchmarkDurableSleep$'
if [[ -x $BIN/dbosbench ]]; then
	step dbos-signal dbos signal -mode signal
	step dbos-signal16 dbos signal16 -mode signal -senders 16
fi
step durable-signal durable 'BenchmarkDurableSignal$'

echo
echo "Flint ($(git describe --always --dirty 2>/dev/null || echo dev)) vs River v0.51.2, Asynq v0.26.0 and DBOS Transact Go v1.9.0, $(nproc) cores, $(psql -tAq "$ADMIN" -c 'SHOW server_version'), drain n=$DRAIN_N"
"$BIN/flintbench" -mode=table -in "$OUT" | tee -a "$OUT"
echo "(all output: $OUT)"
