# shellcheck shell=bash
# PgBouncer in front of the PostgreSQL above.
# Sourced by scripts/services.sh, whose settings and helpers it uses.

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
