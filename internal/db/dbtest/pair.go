package dbtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A Pair is a PostgreSQL primary with a synchronous streaming standby,
// built for one test from the PostgreSQL server binaries (initdb,
// pg_basebackup -R, synchronous_standby_names), on free local ports, and
// torn down when the test ends. Failover kills the primary and promotes
// the standby; Switchover demotes the primary cleanly and promotes the
// standby; Rejoin makes the lost server a synchronous standby again. URL
// names both servers, as an HA connection string does.
//
// The binaries come from PG_BINDIR, else the newest
// /usr/lib/postgresql/*/bin, else PATH; the test is skipped, saying so,
// when there are none (scripts/services.sh installs them). As root the
// servers run as the postgres user, since PostgreSQL refuses to run as
// root.
type Pair struct {
	scratch
	bin string

	mu      sync.Mutex
	nodes   [2]*Node
	primary int
}

// Node is one server of a Pair.
type Node struct {
	// Name is "node1" or "node2", used in failures and the servers' logs.
	Name string
	// Port is the node's local TCP port, fixed for the life of the Pair.
	Port int
	dir  string
	up   bool
}

// Addr is the node's host:port.
func (n *Node) Addr() string { return "127.0.0.1:" + strconv.Itoa(n.Port) }

// NewPair builds and starts a primary and its synchronous standby.
func NewPair(t testing.TB) *Pair {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a PostgreSQL primary and standby")
	}
	bin := PostgresBinDir()
	if bin == "" {
		t.Skip("PostgreSQL server binaries (initdb, pg_ctl, pg_basebackup) are not installed; " +
			"scripts/services.sh ensure postgres installs them, or set PG_BINDIR")
	}
	p := &Pair{bin: bin}
	p.scratch = newScratch(t, "flint-pair-", "the servers", func() { p.destroy() })
	base := p.base
	for i := range p.nodes {
		p.nodes[i] = &Node{Name: fmt.Sprintf("node%d", i+1), Port: freePort(t), dir: filepath.Join(base, fmt.Sprintf("node%d", i+1))}
	}
	first := p.nodes[0]
	p.run("initdb", "-D", first.dir, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync")
	conf := fmt.Sprintf(`
listen_addresses = '127.0.0.1'
port = %d
unix_socket_directories = '%s'
max_connections = 300
shared_buffers = 32MB
wal_level = replica
max_wal_senders = 10
wal_keep_size = '512MB'
hot_standby = on
fsync = off
wal_sender_timeout = '5s'
wal_receiver_status_interval = '1s'
log_min_messages = warning
`, first.Port, base)
	p.appendConf(first, conf)
	p.start(first)
	p.addStandby(p.nodes[1], first)
	return p
}

// URL is a libpq multi-host connection string naming both servers, with
// target_session_attrs=read-write, for database name.
func (p *Pair) URL(name string) string {
	return fmt.Sprintf("postgres://postgres@%s,%s/%s?sslmode=disable&target_session_attrs=read-write&connect_timeout=3",
		p.nodes[0].Addr(), p.nodes[1].Addr(), name)
}

// NodeURL is a connection string for database name on node n alone.
func (p *Pair) NodeURL(n *Node, name string) string {
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable&connect_timeout=3", n.Addr(), name)
}

// Primary returns the server that takes writes now.
func (p *Pair) Primary() *Node {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nodes[p.primary]
}

// Standby returns the other server.
func (p *Pair) Standby() *Node {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nodes[1-p.primary]
}

// CreateDatabase creates database name on the primary (the standby gets
// it by replication).
func (p *Pair) CreateDatabase(name string) {
	p.t.Helper()
	p.exec(p.Primary(), "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
}

// Failover kills the primary (pg_ctl stop -m immediate, as a crash does)
// and promotes the standby, which commits on its own until Rejoin. It
// returns when the promoted server takes writes.
func (p *Pair) Failover() time.Time {
	p.t.Helper()
	old, next := p.Primary(), p.Standby()
	p.stop(old, "immediate")
	return p.promote(next)
}

// Kill stops the primary as a crash does, without promoting anything.
func (p *Pair) Kill() {
	p.t.Helper()
	p.stop(p.Primary(), "immediate")
}

// Promote promotes the standby after Kill, returning when it takes writes.
func (p *Pair) Promote() time.Time {
	p.t.Helper()
	return p.promote(p.Standby())
}

// Rejoin rebuilds the server lost in a Failover as a synchronous standby
// of the new primary (pg_basebackup), and returns once it is in sync.
func (p *Pair) Rejoin() {
	p.t.Helper()
	lost := p.Standby()
	if lost.up {
		p.stop(lost, "immediate")
	}
	if err := os.RemoveAll(lost.dir); err != nil {
		p.t.Fatal(err)
	}
	p.addStandby(lost, p.Primary())
}

// Switchover shuts the primary down cleanly, promotes the standby and
// starts the old primary again as its synchronous standby, which keeps
// answering, read-only, at its old address. It returns the time the new
// primary took writes.
func (p *Pair) Switchover() time.Time {
	p.t.Helper()
	old, next := p.Primary(), p.Standby()
	p.stop(old, "fast")
	promoted := p.promote(next)
	p.appendConf(old, fmt.Sprintf("\nprimary_conninfo = 'host=127.0.0.1 port=%d user=postgres application_name=%s'\nsynchronous_standby_names = ''\n", next.Port, old.Name))
	p.writeFile(filepath.Join(old.dir, "standby.signal"), "")
	p.start(old)
	p.makeSync(next)
	return promoted
}

// SetReadOnly turns default_transaction_read_only on (or off) on node n:
// its sessions can read but every write fails with SQLSTATE 25006, as on
// a primary being demoted.
func (p *Pair) SetReadOnly(n *Node, on bool) {
	p.t.Helper()
	p.exec(n, fmt.Sprintf("ALTER SYSTEM SET default_transaction_read_only = %t", on))
	p.exec(n, "SELECT pg_reload_conf()")
}

// addStandby makes n a streaming standby of primary, in sync.
func (p *Pair) addStandby(n, primary *Node) {
	p.run("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(primary.Port), "-U", "postgres",
		"-D", n.dir, "-R", "-X", "stream", "-c", "fast", "--no-sync")
	// The copy has the primary's settings: give it its own port and name,
	// and no synchronous standby of its own (after a promotion it commits
	// alone until another standby joins).
	p.appendConf(n, fmt.Sprintf("\nport = %d\nprimary_conninfo = 'host=127.0.0.1 port=%d user=postgres application_name=%s'\nsynchronous_standby_names = ''\ndefault_transaction_read_only = off\n",
		n.Port, primary.Port, n.Name))
	p.start(n)
	p.makeSync(primary)
}

// makeSync makes primary wait for its standby on every commit, and waits
// until the standby streams in sync.
func (p *Pair) makeSync(primary *Node) {
	p.exec(primary, "ALTER SYSTEM SET synchronous_standby_names = '*'")
	p.exec(primary, "SELECT pg_reload_conf()")
	p.waitFor(primary, 60*time.Second, "the standby to stream in sync",
		`SELECT EXISTS (SELECT 1 FROM pg_stat_replication WHERE sync_state = 'sync' AND state = 'streaming')`)
}

func (p *Pair) promote(n *Node) time.Time {
	p.run("pg_ctl", "-D", n.dir, "promote", "-w", "-t", "60")
	p.waitFor(n, 60*time.Second, "the promoted server to take writes", `SELECT NOT pg_is_in_recovery()`)
	at := time.Now()
	// Commit alone until a standby joins, as an HA manager does.
	p.exec(n, "ALTER SYSTEM SET synchronous_standby_names = ''")
	p.exec(n, "SELECT pg_reload_conf()")
	p.mu.Lock()
	for i := range p.nodes {
		if p.nodes[i] == n {
			p.primary = i
		}
	}
	p.mu.Unlock()
	return at
}

func (p *Pair) start(n *Node) {
	p.run("pg_ctl", "-D", n.dir, "-l", n.dir+".log", "-w", "-t", "60", "start")
	n.up = true
}

func (p *Pair) stop(n *Node, mode string) {
	p.run("pg_ctl", "-D", n.dir, "-m", mode, "-w", "-t", "60", "stop")
	n.up = false
}

// exec runs sql on node n's postgres database.
func (p *Pair) exec(n *Node, sql string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.NodeURL(n, "postgres"))
	if err != nil {
		p.t.Fatalf("connect to %s: %v", n.Name, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		p.t.Fatalf("%s on %s: %v", sql, n.Name, err)
	}
}

// waitFor polls query (one boolean) on n until it is true.
func (p *Pair) waitFor(n *Node, limit time.Duration, what, query string) {
	p.t.Helper()
	deadline := time.Now().Add(limit)
	var last error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		conn, err := pgx.Connect(ctx, p.NodeURL(n, "postgres"))
		if err == nil {
			var ok bool
			err = conn.QueryRow(ctx, query).Scan(&ok)
			conn.Close(ctx)
			if err == nil && ok {
				cancel()
				return
			}
		}
		cancel()
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	p.t.Fatalf("waiting for %s on %s: gave up after %s (last error: %v)\n%s", what, n.Name, limit, last, p.logTail(n))
}
