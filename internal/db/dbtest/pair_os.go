package dbtest

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// PostgresBinDir returns the directory of PostgreSQL's server binaries, or
// "" if they are not installed.
func PostgresBinDir() string {
	if d := os.Getenv("PG_BINDIR"); d != "" {
		return d
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	return ""
}

func (p *Pair) logTail(n *Node) string {
	b, _ := os.ReadFile(n.dir + ".log")
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// run runs a PostgreSQL binary, as the postgres user when we are root.
func (p *Pair) run(name string, args ...string) {
	p.t.Helper()
	cmd := exec.Command(filepath.Join(p.bin, name), args...)
	if p.owner != nil {
		cmd = exec.Command("runuser", append([]string{"-u", p.owner.Username, "--", filepath.Join(p.bin, name)}, args...)...)
	}
	cmd.Env = append(os.Environ(), "PGCONNECT_TIMEOUT=5", "LC_ALL=C")
	cmd.Dir = p.base
	out, err := cmd.CombinedOutput()
	if err != nil {
		var logs string
		for _, n := range p.nodes {
			if n != nil {
				logs += "\n--- " + n.Name + " log ---\n" + p.logTail(n)
			}
		}
		p.t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, logs)
	}
}

func (p *Pair) appendConf(n *Node, text string) {
	p.t.Helper()
	f, err := os.OpenFile(filepath.Join(n.dir, "postgresql.auto.conf"), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err == nil {
		_, err = f.WriteString(text)
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		p.t.Fatal(err)
	}
	p.chown(filepath.Join(n.dir, "postgresql.auto.conf"))
}

// destroy stops both servers and removes their files.
func (p *Pair) destroy() {
	for _, n := range p.nodes {
		if n != nil && n.up {
			cmd := exec.Command(filepath.Join(p.bin, "pg_ctl"), "-D", n.dir, "-m", "immediate", "-w", "stop")
			if p.owner != nil {
				cmd = exec.Command("runuser", "-u", p.owner.Username, "--", filepath.Join(p.bin, "pg_ctl"), "-D", n.dir, "-m", "immediate", "-w", "stop")
			}
			_ = cmd.Run()
		}
	}
	if p.t.Failed() && os.Getenv("FLINT_KEEP_PAIR") != "" {
		p.t.Logf("kept the pair's files in %s", p.base)
		return
	}
	_ = os.RemoveAll(p.base)
}

// freePort returns a local TCP port nothing listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
