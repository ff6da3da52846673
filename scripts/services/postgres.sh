# shellcheck shell=bash
# PostgreSQL, and the server binaries the failover tests need.
# Sourced by scripts/services.sh, whose settings and helpers it uses.

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

# ------------------------------------------------- PostgreSQL server binaries

# The failover tests (dbtest.NewPair) build a primary and a standby of their
# own from the server binaries, whatever serves $PG_HOST:$PG_PORT: they need
# initdb, pg_ctl, pg_basebackup and postgres under /usr/lib/postgresql/*/bin
# (or PG_BINDIR), and, when run as root, the postgres user to run them as.
pg_server_binaries() {
	local d
	if [[ -n ${PG_BINDIR:-} ]]; then
		[[ -x $PG_BINDIR/initdb && -x $PG_BINDIR/pg_basebackup && -x $PG_BINDIR/pg_ctl ]]
		return
	fi
	for d in /usr/lib/postgresql/*/bin; do
		[[ -x $d/initdb && -x $d/pg_basebackup && -x $d/pg_ctl && -x $d/postgres ]] && return 0
	done
	return 1
}

ensure_postgres-server() {
	if ! pg_server_binaries; then
		if ! root_mode; then
			no_root_help postgres-server "sudo apt-get update && sudo apt-get install -y postgresql" \
				"(the failover tests build a primary and standby from its binaries)"
			return 1
		fi
		apt_install postgres-server postgresql || return 1
		if ! pg_server_binaries; then
			err "postgres-server: installed postgresql, but initdb/pg_basebackup are still missing under /usr/lib/postgresql/*/bin"
			return 1
		fi
	fi
	if [[ $(id -u) -eq 0 ]] && ! id postgres >/dev/null 2>&1; then
		err "postgres-server: running as root, the failover tests run PostgreSQL as the postgres user, which does not exist" \
			"(the postgresql package creates it: apt-get install -y postgresql)"
		return 1
	fi
	say "postgres-server: binaries in $(dirname "$(compgen -G '/usr/lib/postgresql/*/bin/initdb' | sort -V | tail -n 1)" 2>/dev/null || echo "$PG_BINDIR")"
}
