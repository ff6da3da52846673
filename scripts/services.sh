#!/usr/bin/env bash
# Makes sure the services Flint needs for development and tests are reachable.
#
#   scripts/services.sh ensure [postgres|redis|mailpit|all]   (default: all)
#   scripts/services.sh ensure chromium                       (for browser tests)
#   scripts/services.sh ensure caddy                          (for the HTTPS proxy test)
#   scripts/services.sh ensure pgbouncer                      (for the PgBouncer test)
#
# For each service, in order of preference:
#   1. already reachable            -> nothing is done
#   2. installed but not running    -> it is started
#   3. not installed, and we are root (or passwordless sudo works)
#                                   -> the Debian package is installed and started
#   4. otherwise                    -> says what to run by hand, exits non-zero
#
# Targets: PostgreSQL at ${PGHOST:-127.0.0.1}:${PGPORT:-5432} (user postgres),
# Redis at 127.0.0.1:6379, Mailpit SMTP at 127.0.0.1:1025 and its web UI/API at
# 127.0.0.1:8025, PgBouncer at 127.0.0.1:${PGBOUNCER_PORT:-6432} in front of that
# PostgreSQL (transaction pooling, at most 40 server connections per database).
# Running it again is harmless.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

PG_HOST="${PGHOST:-127.0.0.1}"
PG_PORT="${PGPORT:-5432}"
REDIS_HOST=127.0.0.1
REDIS_PORT=6379
MAILPIT_SMTP=127.0.0.1:1025
MAILPIT_HTTP=127.0.0.1:8025
MAILPIT_MODULE=github.com/axllent/mailpit@v1.33.1
PGB_HOST=127.0.0.1
PGB_PORT="${PGBOUNCER_PORT:-6432}"
PGB_POOL=40 # server connections per database, however many clients
STATE_DIR="$ROOT/.flint" # git-ignored; logs and scratch data

# ---------------------------------------------------------------- helpers

say() { printf '%s\n' "$*"; }
err() { printf '%s\n' "$*" >&2; }

have() { command -v "$1" >/dev/null 2>&1; }

# tcp_open HOST PORT: true if something accepts TCP connections there.
tcp_open() {
	local host=$1 port=$2
	[[ $host == *:* ]] && host="[$host]" # bare IPv6 address
	timeout 2 bash -c "exec 3<>/dev/tcp/$host/$port" >/dev/null 2>&1
}

# wait_for SECONDS TEST...: runs TEST every half second until it succeeds.
wait_for() {
	local secs=$1 i
	shift
	for ((i = 0; i < secs * 2; i++)); do
		"$@" && return 0
		sleep 0.5
	done
	return 1
}

# Root access: we are root, or sudo works without a password prompt.
ROOT_MODE=
root_mode() {
	if [[ -z $ROOT_MODE ]]; then
		if [[ $(id -u) -eq 0 ]]; then
			ROOT_MODE=root
		elif have sudo && sudo -n true >/dev/null 2>&1; then
			ROOT_MODE=sudo
		else
			ROOT_MODE=none
		fi
	fi
	[[ $ROOT_MODE != none ]]
}

as_root() {
	if [[ $(id -u) -eq 0 ]]; then
		"$@"
	else
		sudo -n "$@"
	fi
}

# apt_install NAME PACKAGE...: installs Debian packages quietly; on failure
# shows the end of the apt log.
APT_UPDATED=
apt_install() {
	local name=$1 log
	shift
	if ! have apt-get; then
		err "$name: apt-get not found; install $* with your system's package manager"
		return 1
	fi
	log="$(mktemp "${TMPDIR:-/tmp}/flint-apt.XXXXXX")"
	say "$name: installing $* with apt-get (a minute or two)"
	if [[ -z $APT_UPDATED ]]; then
		if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get update >"$log" 2>&1; then
			err "$name: apt-get update failed; last lines of $log:"
			tail -n 15 "$log" >&2
			return 1
		fi
		APT_UPDATED=1
	fi
	if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@" >>"$log" 2>&1; then
		err "$name: apt-get install $* failed; last lines of $log:"
		tail -n 15 "$log" >&2
		return 1
	fi
	rm -f "$log"
}

no_root_help() {
	err "$1: needs root (we are not root and passwordless sudo is not available). Run:"
	shift
	local line
	for line in "$@"; do err "    $line"; done
	err "  then run scripts/services.sh ensure again."
}

# ---------------------------------------------------------------- PostgreSQL

pg_is_local() {
	case $PG_HOST in
	127.0.0.1 | localhost | ::1 | /*) return 0 ;;
	*) return 1 ;;
	esac
}

pg_reachable() {
	if have pg_isready; then
		pg_isready -q -h "$PG_HOST" -p "$PG_PORT" -t 2 >/dev/null 2>&1
	else
		tcp_open "$PG_HOST" "$PG_PORT"
	fi
}

# pg_passwordless: connecting as postgres over TCP without a password works,
# as Flint's development URL postgres://postgres@127.0.0.1:5432/flint does.
pg_passwordless() {
	env -u PGPASSWORD psql -w -X -q -A -t -h "$PG_HOST" -p "$PG_PORT" -U postgres -d postgres \
		-c 'select 1' >/dev/null 2>&1
}

pg_installed() {
	have pg_ctlcluster && compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null
}

# pg_clusters: versions of the Debian clusters "<version> main", oldest first.
pg_clusters() {
	local v
	for v in $(ls /etc/postgresql 2>/dev/null | sort -V); do
		[[ -f /etc/postgresql/$v/main/postgresql.conf ]] && printf '%s\n' "$v"
	done
	return 0
}

# pg_cluster_version: the version of the cluster "<version> main" configured
# for PG_PORT; empty if there is none.
pg_cluster_version() {
	local v
	for v in $(pg_clusters); do
		if grep -Eq "^[[:space:]]*port[[:space:]]*=[[:space:]]*$PG_PORT([^0-9]|\$)" \
			"/etc/postgresql/$v/main/postgresql.conf"; then
			printf '%s\n' "$v"
			return 0
		fi
	done
}

pg_newest_installed_version() {
	ls /usr/lib/postgresql 2>/dev/null | sort -V | tail -n 1
}

# pg_allow_local_trust VERSION: lets local TCP connections (127.0.0.1, ::1) in
# without a password, only if passwordless connecting does not work already.
pg_allow_local_trust() {
	local ver=$1 hba tmp
	pg_passwordless && return 0
	hba=/etc/postgresql/$ver/main/pg_hba.conf
	if ! as_root test -f "$hba"; then
		err "postgres: cannot connect as postgres without a password, and $hba is missing"
		return 1
	fi
	tmp="$(mktemp "${TMPDIR:-/tmp}/flint-hba.XXXXXX")"
	{
		printf '%s\n' \
			'# Added by flint scripts/services.sh: DEVELOPMENT ONLY. Local TCP connections' \
			'# from this machine need no password. Remove these lines for any other use.' \
			'host    all    all    127.0.0.1/32    trust' \
			'host    all    all    ::1/128         trust' \
			''
		as_root cat "$hba"
	} >"$tmp"
	# cp onto the existing file keeps its owner and mode.
	if ! as_root cp "$tmp" "$hba"; then
		rm -f "$tmp"
		err "postgres: could not write $hba"
		return 1
	fi
	rm -f "$tmp"
	if ! as_root pg_ctlcluster --skip-systemctl-redirect "$ver" main reload >/dev/null; then
		err "postgres: could not reload cluster $ver/main after editing $hba"
		return 1
	fi
	say "postgres: NOTE: set local TCP connections (127.0.0.1, ::1) to 'trust' in $hba; this is a development setting"
	if ! wait_for 10 pg_passwordless; then
		err "postgres: still cannot connect as postgres without a password on $PG_HOST:$PG_PORT; check $hba"
		return 1
	fi
}

ensure_postgres() {
	local ver how
	if pg_reachable; then
		say "postgres: reachable on $PG_HOST:$PG_PORT"
		if have psql && ! pg_passwordless; then
			err "postgres: warning: connecting as postgres without a password fails; Flint's development URL needs it" \
				"(set DATABASE_URL/TEST_DATABASE_URL with a password, or allow local trust in pg_hba.conf)"
		fi
		return 0
	fi
	if ! pg_is_local; then
		err "postgres: not reachable on $PG_HOST:$PG_PORT, which is not this machine; start it there or fix PGHOST/PGPORT"
		return 1
	fi

	if pg_installed; then
		how=started
	else
		if ! root_mode; then
			no_root_help postgres "sudo apt-get update && sudo apt-get install -y postgresql" \
				"(or do all of it, including passwordless local TCP: sudo scripts/services.sh ensure postgres)"
			return 1
		fi
		apt_install postgres postgresql || return 1
		how=installed
		if pg_reachable; then # the package started it
			pg_allow_local_trust "$(pg_cluster_version)" || return 1
			say "postgres: installed, reachable on $PG_HOST:$PG_PORT"
			return 0
		fi
	fi

	ver="$(pg_cluster_version)"
	if [[ -z $ver && -n $(pg_clusters) ]]; then
		err "postgres: no cluster is configured for port $PG_PORT (clusters: $(pg_clusters | sed 's/$/\/main/' | paste -sd ' ' -));" \
			"set PGPORT to its port, or change port in /etc/postgresql/<version>/main/postgresql.conf"
		return 1
	fi
	if ! root_mode; then
		if [[ -n $ver ]]; then
			no_root_help postgres "sudo pg_ctlcluster --skip-systemctl-redirect $ver main start" \
				"(or do all of it, including passwordless local TCP: sudo scripts/services.sh ensure postgres)"
		else
			no_root_help postgres "sudo pg_createcluster $(pg_newest_installed_version) main --start" \
				"(or do all of it, including passwordless local TCP: sudo scripts/services.sh ensure postgres)"
		fi
		return 1
	fi
	if [[ -z $ver ]]; then
		ver="$(pg_newest_installed_version)"
		if [[ -z $ver ]]; then
			err "postgres: no PostgreSQL server found under /usr/lib/postgresql"
			return 1
		fi
		if ! as_root pg_createcluster -p "$PG_PORT" "$ver" main >/dev/null; then
			err "postgres: pg_createcluster $ver main failed"
			return 1
		fi
	fi
	# "start" fails if the cluster is already running (e.g. on another port).
	if ! as_root pg_ctlcluster --skip-systemctl-redirect "$ver" main start >/dev/null 2>&1; then
		if ! as_root pg_ctlcluster --skip-systemctl-redirect "$ver" main status >/dev/null 2>&1; then
			err "postgres: could not start cluster $ver/main; see /var/log/postgresql/postgresql-$ver-main.log"
			return 1
		fi
	fi
	if ! wait_for 60 pg_reachable; then
		err "postgres: cluster $ver/main did not become reachable on $PG_HOST:$PG_PORT within 60s;" \
			"check its port in /etc/postgresql/$ver/main/postgresql.conf and /var/log/postgresql/postgresql-$ver-main.log"
		return 1
	fi
	pg_allow_local_trust "$ver" || return 1
	say "postgres: $how, reachable on $PG_HOST:$PG_PORT"
}

# ---------------------------------------------------------------- Redis

redis_reachable() {
	if have redis-cli; then
		[[ $(redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" ping 2>/dev/null) == PONG ]]
	else
		tcp_open "$REDIS_HOST" "$REDIS_PORT"
	fi
}

ensure_redis() {
	local how=started dir log
	if redis_reachable; then
		say "redis: reachable on $REDIS_HOST:$REDIS_PORT"
		return 0
	fi
	if tcp_open "$REDIS_HOST" "$REDIS_PORT"; then
		err "redis: something listens on $REDIS_HOST:$REDIS_PORT but does not answer PING with PONG (password set?)"
		return 1
	fi
	if ! have redis-server; then
		if ! root_mode; then
			no_root_help redis "sudo apt-get update && sudo apt-get install -y redis-server"
			return 1
		fi
		apt_install redis redis-server || return 1
		how=installed
		if wait_for 5 redis_reachable; then # the package started it
			say "redis: installed, reachable on $REDIS_HOST:$REDIS_PORT"
			return 0
		fi
	fi

	# Nothing is persisted (--save "", no AOF), so --dir only has to be writable.
	if [[ -d /var/lib/redis && -w /var/lib/redis ]]; then
		dir=/var/lib/redis
	else
		dir="$STATE_DIR/redis"
		mkdir -p "$dir"
	fi
	mkdir -p "$STATE_DIR"
	log="$STATE_DIR/redis.log"
	if ! redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$REDIS_PORT" \
		--save "" --appendonly no --dir "$dir" --logfile "$log" >/dev/null 2>&1; then
		err "redis: redis-server failed to start; see $log"
		return 1
	fi
	if ! wait_for 30 redis_reachable; then
		err "redis: not reachable on $REDIS_HOST:$REDIS_PORT 30s after starting; see $log"
		return 1
	fi
	say "redis: $how on $REDIS_HOST:$REDIS_PORT (log: .flint/redis.log)"
}

# ---------------------------------------------------------------- Mailpit

mailpit_reachable() {
	tcp_open "${MAILPIT_SMTP%:*}" "${MAILPIT_SMTP##*:}" && tcp_open "${MAILPIT_HTTP%:*}" "${MAILPIT_HTTP##*:}"
}

# go_bin_dir: where "go install" puts binaries.
go_bin_dir() {
	local gobin gopath
	gobin="$(go env GOBIN)"
	if [[ -n $gobin ]]; then
		printf '%s\n' "$gobin"
	else
		gopath="$(go env GOPATH)"
		printf '%s\n' "${gopath%%:*}/bin"
	fi
}

ensure_mailpit() {
	local bin= how=started log="$STATE_DIR/mailpit.log"
	if mailpit_reachable; then
		say "mailpit: reachable on $MAILPIT_SMTP (SMTP) and http://$MAILPIT_HTTP"
		return 0
	fi
	if have go; then
		bin="$(go_bin_dir)/mailpit"
	fi
	if [[ -z $bin || ! -x $bin ]]; then
		if have mailpit; then
			bin="$(command -v mailpit)"
		elif ! have go; then
			err "mailpit: not reachable and not installed, and Go is not on PATH to install it (go install $MAILPIT_MODULE)"
			return 1
		else
			say "mailpit: installing with go install $MAILPIT_MODULE (downloads modules, may take a few minutes)"
			mkdir -p "$STATE_DIR"
			if ! go install "$MAILPIT_MODULE" >"$STATE_DIR/mailpit-install.log" 2>&1; then
				err "mailpit: go install $MAILPIT_MODULE failed; last lines of .flint/mailpit-install.log:"
				tail -n 15 "$STATE_DIR/mailpit-install.log" >&2
				return 1
			fi
			rm -f "$STATE_DIR/mailpit-install.log"
			how=installed
		fi
	fi

	mkdir -p "$STATE_DIR"
	# setsid: its own session, so Ctrl-C on "make run" does not stop it too.
	local detach=()
	have setsid && detach=(setsid)
	# --disable-version-check: no calls to GitHub from the info API.
	nohup "${detach[@]}" "$bin" --smtp "$MAILPIT_SMTP" --listen "$MAILPIT_HTTP" --disable-version-check \
		</dev/null >"$log" 2>&1 &
	if ! wait_for 60 mailpit_reachable; then
		err "mailpit: not reachable on $MAILPIT_SMTP and $MAILPIT_HTTP 60s after starting $bin; last lines of .flint/mailpit.log:"
		tail -n 15 "$log" >&2
		return 1
	fi
	say "mailpit: $how on $MAILPIT_SMTP (SMTP) and http://$MAILPIT_HTTP (log: .flint/mailpit.log)"
}

# ---------------------------------------------------------------- programs

# ensure_program NAME VERSION-ARGS...: the Debian package NAME, which puts
# the program NAME on PATH (Chromium for browser tests, Caddy for the HTTPS
# proxy test). Nothing is started.
ensure_program() {
	local name=$1
	shift
	if ! have "$name"; then
		if ! root_mode; then
			no_root_help "$name" "sudo apt-get update && sudo apt-get install -y $name"
			return 1
		fi
		apt_install "$name" "$name" || return 1
		if ! have "$name"; then
			err "$name: the package installed but '$name' is not on PATH"
			return 1
		fi
	fi
	say "$name: installed ($("$name" "$@" 2>/dev/null | head -n 1 || true))"
}

ensure_chromium() { ensure_program chromium --version; }

# Debian's caddy package enables a service on port 80 where systemd runs;
# the tests start their own, so it is stopped.
ensure_caddy() {
	ensure_program caddy version || return 1
	if have systemctl && systemctl is-active --quiet caddy 2>/dev/null; then
		as_root systemctl disable --now caddy >/dev/null 2>&1 || true
	fi
}

# ---------------------------------------------------------------- PgBouncer

pgbouncer_bin() {
	if have pgbouncer; then
		command -v pgbouncer
	elif [[ -x /usr/sbin/pgbouncer ]]; then
		printf '%s\n' /usr/sbin/pgbouncer
	fi
}

# pgbouncer_admin SQL: runs SQL on the admin console (database "pgbouncer").
pgbouncer_admin() {
	env -u PGPASSWORD psql -w -X -q -A -t -F ' ' -h "$PGB_HOST" -p "$PGB_PORT" -U postgres -d pgbouncer -c "$1" 2>/dev/null
}

# pgbouncer_ours: what listens on PGB_PORT is a PgBouncer pooling transactions
# with the server-side limit the tests rely on.
pgbouncer_ours() {
	local conf
	conf="$(pgbouncer_admin 'SHOW CONFIG')" || return 1
	grep -Eq '^pool_mode transaction( |$)' <<<"$conf" && grep -Eq "^max_db_connections $PGB_POOL( |\$)" <<<"$conf"
}

# ensure_pgbouncer: PgBouncer in transaction-pooling mode on PGB_PORT, in
# front of the PostgreSQL on PG_HOST:PG_PORT, every database passed through
# ("*"), the server side capped at PGB_POOL connections per database; the
# admin console (database pgbouncer) is open to user postgres. Its config,
# auth file, log and pid live in .flint/pgbouncer.
ensure_pgbouncer() {
	local bin how=started dir="$STATE_DIR/pgbouncer" user=
	if pgbouncer_ours; then
		say "pgbouncer: reachable on $PGB_HOST:$PGB_PORT (transaction pooling, $PGB_POOL server connections)"
		return 0
	fi
	if tcp_open "$PGB_HOST" "$PGB_PORT"; then
		err "pgbouncer: something listens on $PGB_HOST:$PGB_PORT but is not a PgBouncer in transaction mode with" \
			"max_db_connections = $PGB_POOL (SHOW CONFIG as postgres on database pgbouncer); stop it or set PGBOUNCER_PORT"
		return 1
	fi
	if ! have psql; then
		err "pgbouncer: psql is needed to check it (install postgresql-client)"
		return 1
	fi
	bin="$(pgbouncer_bin)"
	if [[ -z $bin ]]; then
		if ! root_mode; then
			no_root_help pgbouncer "sudo apt-get update && sudo apt-get install -y pgbouncer"
			return 1
		fi
		apt_install pgbouncer pgbouncer || return 1
		how=installed
		# The package's own service (its /etc/pgbouncer config, same port) is not
		# the one the tests need.
		if have systemctl && systemctl is-active --quiet pgbouncer 2>/dev/null; then
			as_root systemctl disable --now pgbouncer >/dev/null 2>&1 || true
		elif [[ -x /etc/init.d/pgbouncer ]]; then
			as_root /etc/init.d/pgbouncer stop >/dev/null 2>&1 || true
		fi
		bin="$(pgbouncer_bin)"
		if [[ -z $bin ]]; then
			err "pgbouncer: the package installed but no pgbouncer binary was found"
			return 1
		fi
	fi

	mkdir -p "$dir"
	printf '"postgres" ""\n' >"$dir/userlist.txt"
	cat >"$dir/pgbouncer.ini" <<-INI
		; Written by scripts/services.sh for Flint's tests; rewritten on every start.
		[databases]
		* = host=$PG_HOST port=$PG_PORT

		[pgbouncer]
		listen_addr = $PGB_HOST
		listen_port = $PGB_PORT
		unix_socket_dir =
		pool_mode = transaction
		default_pool_size = $PGB_POOL
		max_db_connections = $PGB_POOL
		max_client_conn = 4000
		auth_type = trust
		auth_file = $dir/userlist.txt
		admin_users = postgres
		stats_users = postgres
		ignore_startup_parameters = extra_float_digits
		logfile = $dir/pgbouncer.log
		pidfile = $dir/pgbouncer.pid
	INI
	rm -f "$dir/pgbouncer.pid"
	# PgBouncer refuses to run as root; as root it becomes postgres.
	if [[ $(id -u) -eq 0 ]]; then
		user=postgres
		chown -R "$user" "$dir"
	fi
	if ! "$bin" -d ${user:+-u "$user"} "$dir/pgbouncer.ini" >"$dir/start.log" 2>&1; then
		err "pgbouncer: $bin failed to start; see .flint/pgbouncer/start.log and .flint/pgbouncer/pgbouncer.log:"
		tail -n 5 "$dir/start.log" "$dir/pgbouncer.log" >&2 2>/dev/null
		return 1
	fi
	if ! wait_for 20 pgbouncer_ours; then
		err "pgbouncer: not answering on $PGB_HOST:$PGB_PORT 20s after starting; last lines of .flint/pgbouncer/pgbouncer.log:"
		tail -n 15 "$dir/pgbouncer.log" >&2
		return 1
	fi
	say "pgbouncer: $how on $PGB_HOST:$PGB_PORT, transaction pooling, $PGB_POOL server connections (config and log: .flint/pgbouncer)"
}

# ---------------------------------------------------------------- main

usage() {
	err "usage: scripts/services.sh ensure [postgres|redis|mailpit|all|chromium|caddy|pgbouncer]"
	exit 2
}

[[ ${1:-} == ensure ]] || usage
[[ $# -le 2 ]] || usage
case ${2:-all} in
postgres) services=(postgres) ;;
redis) services=(redis) ;;
mailpit) services=(mailpit) ;;
chromium) services=(chromium) ;;
caddy) services=(caddy) ;;
pgbouncer) services=(pgbouncer) ;;
all) services=(postgres redis mailpit) ;;
*) usage ;;
esac

# Each ensure_* runs in an "||" context (so errexit is off inside it) and
# reports its own failures; carry on with the others and fail at the end.
failed=0
for s in "${services[@]}"; do
	"ensure_$s" || failed=1
done
exit "$failed"
