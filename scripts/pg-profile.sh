#!/usr/bin/env bash
# Run a command against a private PostgreSQL that has pg_stat_statements
# loaded, then print where that server spent its time, by statement.
#
#   scripts/pg-profile.sh [-n ROWS] -- COMMAND [ARGS...]
#
# The server is made for this run (initdb in a temporary directory, a free
# port on 127.0.0.1, trust authentication) with the settings that matter
# for timing as a stock PostgreSQL has them: fsync and synchronous_commit
# on, 128 MB of shared buffers, autovacuum off (as the benchmarks settle
# their tables themselves). COMMAND runs with TEST_DATABASE_URL and
# DATABASE_URL pointing at it, so benchmarks and tests that make their
# own databases work unchanged:
#
#   scripts/pg-profile.sh -- go test -run '^$' -bench 'BenchmarkDurableSignal' \
#       -benchtime 1x ./internal/e2e
#
# The report lists the ROWS (default 25) statements with the most total
# execution time across every database of the server: calls, total and
# mean milliseconds, plans made and their total milliseconds, rows, WAL bytes, and the statement's first 160
# characters; then the server's commits, WAL and the time it waited for
# WAL flushes. The data directory is removed afterwards.
set -euo pipefail

rows=25
while [ $# -gt 0 ]; do
	case "$1" in
	-n) rows="$2"; shift 2 ;;
	--) shift; break ;;
	*) break ;;
	esac
done
if [ $# -eq 0 ]; then
	echo "usage: scripts/pg-profile.sh [-n ROWS] -- COMMAND [ARGS...]" >&2
	exit 2
fi

bindir="${PG_BINDIR:-}"
if [ -z "$bindir" ]; then
	for d in /usr/lib/postgresql/*/bin; do
		[ -x "$d/initdb" ] && bindir="$d"
	done
fi
if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
	echo "pg-profile: PostgreSQL server binaries not found; scripts/services.sh ensure postgres-server installs them, or set PG_BINDIR" >&2
	exit 1
fi

base="$(mktemp -d /tmp/flint-pgprofile.XXXXXX)"
as=()
if [ "$(id -u)" = 0 ]; then
	chown postgres "$base" 2>/dev/null || { echo "pg-profile: running as root needs a postgres user" >&2; exit 1; }
	as=(runuser -u postgres --)
fi
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
data="$base/data"
cleanup() {
	"${as[@]}" "$bindir/pg_ctl" -D "$data" -m immediate stop >/dev/null 2>&1 || true
	rm -rf "$base"
}
trap cleanup EXIT

"${as[@]}" "$bindir/initdb" -D "$data" -U postgres -A trust -E UTF8 --no-sync >/dev/null
cat >>"$data/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$base'
max_connections = 300
shared_buffers = 128MB
autovacuum = off
fsync = on
synchronous_commit = on
shared_preload_libraries = 'pg_stat_statements'
pg_stat_statements.max = 5000
pg_stat_statements.track = all
pg_stat_statements.track_planning = on
track_io_timing = on
track_wal_io_timing = on
log_min_messages = warning
EOF
"${as[@]}" "$bindir/pg_ctl" -D "$data" -l "$base/log" -w start >/dev/null
url="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
psql "$url" -qc 'CREATE EXTENSION pg_stat_statements' >/dev/null
psql "$url" -qc 'SELECT pg_stat_statements_reset(), pg_stat_reset_shared($$wal$$)' >/dev/null

echo "pg-profile: PostgreSQL with pg_stat_statements on 127.0.0.1:$port" >&2
set +e
TEST_DATABASE_URL="$url" DATABASE_URL="$url" "$@"
rc=$?
set -e

echo
echo "== statements by total time (every database of the server) =="
psql "$url" -P pager=off -c "
SELECT calls, round(total_exec_time::numeric, 1) AS total_ms, round(mean_exec_time::numeric, 3) AS mean_ms,
       plans, round(total_plan_time::numeric, 1) AS plan_total_ms, rows, wal_bytes, left(regexp_replace(query, '\s+', ' ', 'g'), 160) AS query
FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT $rows"
echo "== the server =="
psql "$url" -P pager=off -c "
SELECT sum(xact_commit) AS commits, sum(xact_rollback) AS rollbacks FROM pg_stat_database" -c "
SELECT wal_records, wal_bytes, wal_write, wal_sync, round(wal_sync_time::numeric, 1) AS wal_sync_ms FROM pg_stat_wal"
exit $rc
