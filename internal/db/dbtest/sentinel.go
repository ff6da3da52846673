package dbtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisSentinel is a Redis master, its replica and one Sentinel watching
// them (quorum 1), private to a test.
type RedisSentinel struct {
	t testing.TB
	// Master is the server the Sentinel names the master at start; after
	// Failover, Replica is.
	Master *RedisServer
	// Replica replicates Master until Failover promotes it.
	Replica  *RedisServer
	sentinel string // host:port
	Name     string // the master's name in Sentinel
}

// StartRedisSentinel starts a master, a replica and a Sentinel, and waits
// until the Sentinel knows both.
func StartRedisSentinel(t testing.TB) *RedisSentinel {
	t.Helper()
	master := StartRedis(t)
	replica := StartRedisWith(t, "--replicaof", "127.0.0.1", fmt.Sprint(master.port))
	port := freePort(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor flint 127.0.0.1 %d 1\n"+
		"sentinel down-after-milliseconds flint 1000\nsentinel failover-timeout flint 5000\n", port, dir, master.port)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("redis-server", conf, "--sentinel")
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis sentinel: %v", err)
	}
	go func() { _ = cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	s := &RedisSentinel{t: t, Master: master, Replica: replica, sentinel: net.JoinHostPort("127.0.0.1", fmt.Sprint(port)), Name: "flint"}
	sc := s.client()
	defer sc.Close() //nolint:errcheck // a test helper's client
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		replicas, err := sc.Replicas(ctx, s.Name).Result()
		cancel()
		if err == nil && len(replicas) == 1 && replicas[0]["master-link-status"] == "ok" {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("sentinel never saw the replica: %v %v", replicas, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *RedisSentinel) client() *redis.SentinelClient {
	return redis.NewSentinelClient(&redis.Options{Addr: s.sentinel})
}

// URL is a redis-sentinel:// URL for the master.
func (s *RedisSentinel) URL() string {
	return fmt.Sprintf("redis-sentinel://%s/%s/0", s.sentinel, s.Name)
}

// SentinelAddr is the Sentinel's host:port.
func (s *RedisSentinel) SentinelAddr() string { return s.sentinel }

// Failover makes the Sentinel promote the replica (SENTINEL FAILOVER) and
// waits until it reports the replica as the master.
func (s *RedisSentinel) Failover() {
	s.t.Helper()
	sc := s.client()
	defer sc.Close() //nolint:errcheck // a test helper's client
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sc.Failover(ctx, s.Name).Err(); err != nil {
		s.t.Fatalf("sentinel failover: %v", err)
	}
	for {
		addr, err := sc.GetMasterAddrByName(ctx, s.Name).Result()
		if err == nil && len(addr) == 2 && net.JoinHostPort(addr[0], addr[1]) == s.Replica.Addr() {
			return
		}
		if ctx.Err() != nil {
			s.t.Fatalf("sentinel did not promote the replica: %v %v", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
