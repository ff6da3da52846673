package dbtest

import (
	"fmt"
	"path/filepath"
	"strconv"
	"time"
)

// PatroniDCS is the cluster-wide part of the Patroni configuration the
// tests run (bootstrap.dcs, which Patroni keeps in etcd), as the README's
// High availability section shows it (a test holds the two equal). What
// matters for Flint:
//
//   - synchronous_mode: the leader commits only once the other member has
//     the commit's WAL, so the member Patroni promotes has every commit
//     Flint acknowledged; not strict, so that a leader left alone commits
//     alone rather than stalling (losing the second member is not an
//     outage);
//   - primary_start_timeout 0: when the leader's PostgreSQL crashes,
//     Patroni fails over to the synchronous standby at once instead of
//     restarting PostgreSQL in place (the default, 300 s, restarts it);
//   - ttl 20, loop_wait 2, retry_timeout 5: a lost leader's lock expires
//     after 20 s, and Patroni looks at its PostgreSQL every 2 s (the
//     defaults, 30, 10 and 10, only make failovers slower);
//   - use_pg_rewind (with Patroni's default wal_log_hints on): a former
//     leader rejoins as a standby by itself.
const PatroniDCS = `bootstrap:
  dcs:
    ttl: 20
    loop_wait: 2
    retry_timeout: 5
    maximum_lag_on_failover: 1048576
    primary_start_timeout: 0
    synchronous_mode: true
    synchronous_mode_strict: false
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        max_connections: 300
        wal_keep_size: 512MB
        wal_sender_timeout: 5s
        wal_receiver_status_interval: 1s
`

// patroniMember is the rest of one member's configuration: its name,
// addresses and paths, and re-cloning when rewinding fails or the
// timelines diverged. fsync is off, as in every server the tests build,
// since they survive process crashes only, never the machine's.
const patroniMember = `  initdb:
    - encoding: UTF8
    - locale: C
scope: flint-test
name: %[1]s
log:
  level: INFO
restapi:
  listen: 127.0.0.1:%[2]d
  connect_address: 127.0.0.1:%[2]d
etcd3:
  hosts: %[3]s
postgresql:
  listen: 127.0.0.1:%[4]d
  connect_address: 127.0.0.1:%[4]d
  data_dir: %[5]s
  bin_dir: %[6]s
  pgpass: %[7]s
  authentication:
    superuser:
      username: postgres
    replication:
      username: postgres
    rewind:
      username: postgres
  parameters:
    unix_socket_directories: %[8]s
    shared_buffers: 32MB
    log_min_messages: warning
    fsync: "off"
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
  remove_data_directory_on_rewind_failure: true
  remove_data_directory_on_diverged_timelines: true
  basebackup:
    - checkpoint: fast
watchdog:
  mode: "off"
`

// writeConfig writes m's Patroni configuration file.
func (p *Patroni) writeConfig(m *Member) {
	p.t.Helper()
	text := PatroniDCS + fmt.Sprintf(patroniMember, m.Name, m.APIPort, p.EtcdAddr, m.Port, m.dir, p.bin,
		filepath.Join(p.base, m.Name+".pgpass"), p.base)
	p.writeFile(m.conf, text)
}

// startEtcd starts a one-member etcd on two free loopback ports, and
// waits until it answers.
func (p *Patroni) startEtcd() {
	p.t.Helper()
	client, peer := freePort(p.t), freePort(p.t)
	p.EtcdAddr = "127.0.0.1:" + strconv.Itoa(client)
	clientURL := "http://" + p.EtcdAddr
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peer)
	p.etcd = p.startProcess(filepath.Join(p.base, "etcd.log"), false, "etcd",
		"--name", "etcd1", "--data-dir", filepath.Join(p.base, "etcd"),
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "etcd1="+peerURL, "--initial-cluster-state", "new")
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if ok := httpOK(clientURL + "/health"); ok {
			return
		}
		time.Sleep(100 * time.Millisecond) // the poll interval
	}
	p.t.Fatalf("etcd did not answer on %s within 60 s\n%s", p.EtcdAddr, tail(filepath.Join(p.base, "etcd.log")))
}
