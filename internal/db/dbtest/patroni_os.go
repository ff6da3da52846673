package dbtest

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// daemon is a long-running program a Patroni started (etcd, a member's
// Patroni), in a process group of its own.
type daemon struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// kill kills the daemon's process group (SIGKILL) and waits for it.
func (d *daemon) kill() {
	_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
	<-d.done
}

// startProcess starts prog with its output appended to logPath; asOwner
// runs it as the owner of the servers (the postgres user, when we are
// root). Output goes to a file, not a pipe: PostgreSQL, which Patroni
// starts in a session of its own, inherits it and outlives Patroni.
func (p *Patroni) startProcess(logPath string, asOwner bool, prog string, args ...string) *daemon {
	p.t.Helper()
	f, err := os.OpenFile(logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	defer f.Close() // the child has its own copy
	cmd := exec.Command(prog, args...)
	cmd.Env = p.env()
	cmd.Dir = p.base
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if asOwner && p.owner != nil {
		uid, _ := strconv.Atoi(p.owner.Uid)
		gid, _ := strconv.Atoi(p.owner.Gid)
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("start %s: %v", prog, err)
	}
	d := &daemon{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(d.done)
	}()
	return d
}

// env is the environment of etcd, Patroni and patronictl: this process's
// without libpq's and Patroni's variables, which would override the
// configuration files.
func (p *Patroni) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PG") || strings.HasPrefix(kv, "PATRONI") || strings.HasPrefix(kv, "ETCD") ||
			strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "LC_") || strings.HasPrefix(kv, "LANG") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+p.base, "LC_ALL=C.UTF-8", "PGCONNECT_TIMEOUT=5")
}

// postmasterPID reads the postmaster's PID from its data directory, 0 if
// it is not running.
func postmasterPID(dataDir string) int {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	first, _, _ := bytes.Cut(b, []byte("\n"))
	pid, err := strconv.Atoi(strings.TrimSpace(string(first)))
	if err != nil || pid <= 0 || syscall.Kill(pid, 0) != nil {
		return 0
	}
	return pid
}

// killGroup kills the process group led by pid (a postmaster, which
// Patroni starts with a session of its own, and its backends) with
// SIGKILL, and waits until the postmaster is gone.
func killGroup(pid int) {
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && syscall.Kill(pid, 0) == nil {
		time.Sleep(20 * time.Millisecond) // the poll interval
	}
}

func httpOK(url string) bool {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// tail is the end of a log file.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 6000 {
		b = b[len(b)-6000:]
	}
	return string(b)
}

// logs is the end of every member's log and patronictl list, for failures.
func (p *Patroni) logs() string {
	var out strings.Builder
	for _, m := range p.Members {
		if m != nil {
			out.WriteString("\n--- " + m.Name + " (Patroni and PostgreSQL) ---\n" + tail(m.log))
		}
	}
	out.WriteString("\n--- etcd ---\n" + tail(filepath.Join(p.base, "etcd.log")))
	return out.String()
}

// destroy kills both members (Patroni and PostgreSQL) and etcd, and
// removes their files; FLINT_KEEP_PATRONI keeps them when the test failed.
func (p *Patroni) destroy() {
	for _, m := range p.Members {
		if m != nil {
			p.KillNode(m)
		}
	}
	if p.etcd != nil {
		p.etcd.kill()
	}
	if p.t.Failed() {
		p.t.Logf("Patroni cluster at the end:%s", p.logs())
		if os.Getenv("FLINT_KEEP_PATRONI") != "" {
			p.t.Logf("kept the cluster's files in %s", p.base)
			return
		}
	}
	_ = os.RemoveAll(p.base)
}
