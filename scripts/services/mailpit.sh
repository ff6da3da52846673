# shellcheck shell=bash
# Mailpit.
# Sourced by scripts/services.sh, whose settings and helpers it uses.

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
