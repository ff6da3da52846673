# shellcheck shell=bash
# Patroni and etcd, for the tests that run PostgreSQL under a real HA manager.
# Sourced by scripts/services.sh, whose settings and helpers it uses.

# ---------------------------------------------------------------- Patroni

# The Patroni tests (dbtest.NewPatroni) start an etcd and two Patroni members
# of their own on free loopback ports, from the Debian packages patroni
# (patroni, patronictl) and etcd-server (etcd), and the PostgreSQL server
# binaries (ensure_postgres-server). Nothing is left running: Debian's etcd
# service, which the package starts where systemd runs, is stopped, and
# patroni's service does nothing without /etc/patroni/config.yml.
patroni_installed() { have patroni && have patronictl && have etcd; }

ensure_patroni() {
	ensure_postgres-server || return 1
	if ! patroni_installed; then
		if ! root_mode; then
			no_root_help patroni "sudo apt-get update && sudo apt-get install -y patroni etcd-server"
			return 1
		fi
		apt_install patroni patroni etcd-server || return 1
		if ! patroni_installed; then
			err "patroni: installed patroni and etcd-server, but patroni, patronictl or etcd is still not on PATH"
			return 1
		fi
	fi
	if have systemctl && systemctl is-active --quiet etcd 2>/dev/null && root_mode; then
		as_root systemctl disable --now etcd >/dev/null 2>&1 || true
	fi
	say "patroni: installed ($(patroni --version 2>/dev/null | head -n 1 || true), etcd $(etcd --version 2>/dev/null | sed -n 's/^etcd Version: //p' || true))"
}
