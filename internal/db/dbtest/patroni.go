package dbtest

import (
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// A Patroni is a PostgreSQL cluster run by a real HA manager, built for one
// test on loopback ports and torn down when the test ends: one etcd (the
// DCS) and two members, each a Patroni daemon running its own PostgreSQL,
// in Patroni's synchronous mode. Patroni bootstraps the first member
// (initdb), clones the second (pg_basebackup), and does every failover,
// rejoin (pg_rewind, or a new clone) and switchover itself; the test only
// kills things (KillPostgres, KillNode), starts a member's Patroni again
// (Start) and asks for a switchover the way an operator does
// (patronictl switchover).
//
// The configuration is PatroniDCS and patroniMember
// (db/dbtest/patroni_conf.go); the README's High availability section
// shows it. The test is skipped,
// saying so, when patroni, patronictl, etcd or the PostgreSQL server
// binaries are missing (scripts/services.sh ensure patroni installs them).
// As root, Patroni and its PostgreSQL run as the postgres user.
type Patroni struct {
	scratch
	bin  string // PostgreSQL server binaries
	etcd *daemon

	// EtcdAddr is the DCS's client address, host:port.
	EtcdAddr string
	// Members are the two members, node1 and node2, in a fixed order;
	// which one leads changes (Leader).
	Members [2]*Member
}

// Member is one Patroni member: a Patroni daemon and its PostgreSQL.
type Member struct {
	// Name is the member's Patroni name, "node1" or "node2".
	Name string
	// Port is its PostgreSQL's TCP port on 127.0.0.1.
	Port int
	// APIPort is its Patroni REST API's port on 127.0.0.1.
	APIPort int

	dir  string // PostgreSQL data directory
	conf string // Patroni configuration file
	log  string // Patroni's and PostgreSQL's output

	mu      sync.Mutex
	patroni *daemon // nil while killed
}

// Addr is the member's PostgreSQL address, host:port.
func (m *Member) Addr() string { return "127.0.0.1:" + strconv.Itoa(m.Port) }

func (m *Member) api(path string) string {
	return "http://127.0.0.1:" + strconv.Itoa(m.APIPort) + path
}

// NewPatroni starts etcd and both members, and returns once node1 leads
// and node2 is its synchronous standby.
func NewPatroni(t testing.TB) *Patroni {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a Patroni cluster")
	}
	bin := PostgresBinDir()
	var missing []string
	for _, prog := range []string{"patroni", "patronictl", "etcd"} {
		if _, err := exec.LookPath(prog); err != nil {
			missing = append(missing, prog)
		}
	}
	if bin == "" {
		missing = append(missing, "the PostgreSQL server binaries")
	}
	if len(missing) > 0 {
		t.Skipf("%s not installed; scripts/services.sh ensure patroni installs them", strings.Join(missing, ", "))
	}
	p := &Patroni{bin: bin}
	p.scratch = newScratch(t, "flint-patroni-", "Patroni and PostgreSQL", func() { p.destroy() })
	base := p.base
	p.startEtcd()
	for i := range p.Members {
		name := fmt.Sprintf("node%d", i+1)
		m := &Member{Name: name, Port: freePort(t), APIPort: freePort(t),
			dir: filepath.Join(base, name), conf: filepath.Join(base, name+".yml"), log: filepath.Join(base, name+".log")}
		p.Members[i] = m
		p.writeConfig(m)
	}
	// node1 first, so that it bootstraps the cluster and leads.
	p.Start(p.Members[0])
	if got, _ := p.WaitLeader(nil, 120*time.Second); got != p.Members[0] {
		t.Fatalf("node2 leads before it was started")
	}
	p.Start(p.Members[1])
	p.WaitSync(p.Members[1], 120*time.Second)
	return p
}

// URL is a multi-host connection string naming both members, with
// target_session_attrs=read-write, for database name.
func (p *Patroni) URL(name string) string {
	return fmt.Sprintf("postgres://postgres@%s,%s/%s?sslmode=disable&target_session_attrs=read-write&connect_timeout=3",
		p.Members[0].Addr(), p.Members[1].Addr(), name)
}

// Other returns the member that is not m.
func (p *Patroni) Other(m *Member) *Member {
	if m == p.Members[0] {
		return p.Members[1]
	}
	return p.Members[0]
}

// status GETs one of the member's REST API health endpoints (/primary,
// /sync, /replica…) and returns the HTTP status, 0 if it did not answer.
func (m *Member) status(path string) int {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(m.api(path))
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Leader returns the member whose Patroni holds the leader lock now, or
// nil if none does.
func (p *Patroni) Leader() *Member {
	for _, m := range p.Members {
		if m.status("/primary") == http.StatusOK {
			return m
		}
	}
	return nil
}

// WaitLeader waits until a member other than not (nil: any) holds the
// leader lock, as its REST API's /primary says, and returns it and the
// time it was first seen leading: when Patroni elected it.
func (p *Patroni) WaitLeader(not *Member, limit time.Duration) (*Member, time.Time) {
	p.t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		for _, m := range p.Members {
			if m != not && m.status("/primary") == http.StatusOK {
				return m, time.Now()
			}
		}
		time.Sleep(100 * time.Millisecond) // the poll interval
	}
	p.t.Fatalf("no member other than %v took the leader lock within %s\n%s", memberName(not), limit, p.logs())
	return nil, time.Time{}
}

// WaitSync waits until m runs as the leader's synchronous standby.
func (p *Patroni) WaitSync(m *Member, limit time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if m.status("/sync") == http.StatusOK {
			return
		}
		time.Sleep(200 * time.Millisecond) // the poll interval
	}
	p.t.Fatalf("%s did not become the synchronous standby within %s\n%s", m.Name, limit, p.logs())
}

// KillPostgres kills m's PostgreSQL, the postmaster and every backend
// (SIGKILL to its process group), as a crash does; m's Patroni lives on.
func (p *Patroni) KillPostgres(m *Member) {
	p.t.Helper()
	pid := postmasterPID(m.dir)
	if pid == 0 {
		p.t.Fatalf("%s: no postmaster.pid: PostgreSQL is not running\n%s", m.Name, p.logs())
	}
	killGroup(pid)
}

// KillNode kills m's Patroni and its PostgreSQL at once (SIGKILL), as
// losing the machine does: nobody releases the leader lock, which expires
// after Patroni's ttl.
func (p *Patroni) KillNode(m *Member) {
	p.t.Helper()
	p.KillPatroni(m)
	if pid := postmasterPID(m.dir); pid != 0 {
		killGroup(pid)
	}
}

// KillPatroni kills m's Patroni alone (SIGKILL), leaving its PostgreSQL
// running, as a crash of the daemon does on a node without a watchdog.
func (p *Patroni) KillPatroni(m *Member) {
	p.t.Helper()
	m.mu.Lock()
	d := m.patroni
	m.patroni = nil
	m.mu.Unlock()
	if d != nil {
		d.kill()
	}
}

// Start starts m's Patroni (again, after KillNode): it starts PostgreSQL,
// and rejoins the cluster, rewinding or re-cloning as it needs.
func (p *Patroni) Start(m *Member) {
	p.t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.patroni != nil {
		p.t.Fatalf("%s: Patroni is already running", m.Name)
	}
	m.patroni = p.startProcess(m.log, true, "patroni", m.conf)
}

// Switchover asks for a planned switchover from leader to candidate with
// patronictl, as an operator does, and returns its output.
func (p *Patroni) Switchover(leader, candidate *Member) string {
	p.t.Helper()
	cmd := exec.Command("patronictl", "-c", leader.conf, "switchover", "--leader", leader.Name,
		"--candidate", candidate.Name, "--force")
	cmd.Env = p.env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		p.t.Fatalf("patronictl switchover: %v\n%s\n%s", err, out, p.logs())
	}
	return string(out)
}

// Reinit has m's Patroni clone m afresh from the leader (patronictl
// reinit), as an operator does for a member that cannot rejoin by itself:
// one that needs WAL of its old timeline the leader no longer keeps. It
// returns patronictl's error, if any, with its output.
func (p *Patroni) Reinit(m *Member) error {
	cmd := exec.Command("patronictl", "-c", m.conf, "reinit", "flint-test", m.Name, "--force")
	cmd.Env = p.env()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("patronictl reinit %s: %w\n%s", m.Name, err, out)
	}
	return nil
}

// List is what patronictl list says about the cluster now, for logs.
func (p *Patroni) List() string {
	cmd := exec.Command("patronictl", "-c", p.Members[0].conf, "list")
	cmd.Env = p.env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Sprintf("patronictl list: %v\n%s", err, out)
	}
	return string(out)
}

func memberName(m *Member) string {
	if m == nil {
		return "nil"
	}
	return m.Name
}
