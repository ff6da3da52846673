# shellcheck shell=bash
# Redis.
# Sourced by scripts/services.sh, whose settings and helpers it uses.

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
