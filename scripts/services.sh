#!/usr/bin/env bash
# Makes sure the services Flint needs for development and tests are reachable.
#
#   scripts/services.sh ensure [postgres|redis|mailpit|all]   (default: all)
#   scripts/services.sh ensure chromium                       (for browser tests)
#   scripts/services.sh ensure caddy                          (for the HTTPS proxy test)
#   scripts/services.sh ensure pgbouncer                      (for the PgBouncer test)
#   scripts/services.sh ensure postgres-server                (for the failover tests: initdb,
#                                                              pg_ctl, pg_basebackup to build a pair)
#   scripts/services.sh ensure patroni                        (for the Patroni failover tests:
#                                                              patroni, patronictl, etcd)
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

# ---------------------------------------------------------------- services

# One file per service under scripts/services, each defining its ensure_*.
for part in postgres redis mailpit programs pgbouncer patroni; do
	# shellcheck source=/dev/null
	source "$ROOT/scripts/services/$part.sh"
done

# ---------------------------------------------------------------- main

usage() {
	err "usage: scripts/services.sh ensure [postgres|redis|mailpit|all|chromium|caddy|stress-ng|pgbouncer|postgres-server|patroni]"
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
stress-ng) services=(stress_ng) ;;
pgbouncer) services=(pgbouncer) ;;
postgres-server) services=(postgres-server) ;;
patroni) services=(patroni) ;;
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
