# shellcheck shell=bash
# Programs the tests start themselves (Chromium, Caddy, stress-ng).
# Sourced by scripts/services.sh, whose settings and helpers it uses.

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

# stress-ng keeps the CPUs busy beside the suite in make test-stress.
ensure_stress_ng() { ensure_program stress-ng --version; }

# Debian's caddy package enables a service on port 80 where systemd runs;
# the tests start their own, so it is stopped.
ensure_caddy() {
	ensure_program caddy version || return 1
	if have systemctl && systemctl is-active --quiet caddy 2>/dev/null; then
		as_root systemctl disable --now caddy >/dev/null 2>&1 || true
	fi
}
