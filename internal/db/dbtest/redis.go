package dbtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisURL returns TEST_REDIS_URL, failing (or, with -short, skipping) the
// test when it is unset.
func RedisURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("TEST_REDIS_URL")
	if u == "" {
		if testing.Short() {
			t.Skip("TEST_REDIS_URL is unset; skipping Redis test in -short mode")
		}
		t.Fatal("TEST_REDIS_URL is unset: point it at a Redis server (make test does)")
	}
	return u
}

// RedisPrefix returns a key prefix unique to the test on the shared Redis;
// every key under it is deleted when the test ends (never FLUSHDB: other
// tests share the server).
func RedisPrefix(t testing.TB) (url, prefix string) {
	t.Helper()
	url = RedisURL(t)
	prefix = "flinttest:" + randomHex(6) + ":"
	t.Cleanup(func() {
		opt, err := redis.ParseURL(url)
		if err != nil {
			return
		}
		c := redis.NewClient(opt)
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := c.Scan(ctx, 0, prefix+"*", 500).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
	})
	return url, prefix
}

// RedisServer is a private redis-server for tests that stop, kill or flush
// Redis, which they must not do to the shared one.
type RedisServer struct {
	t     testing.TB
	port  int
	dir   string
	extra []string // more redis-server arguments
	cmd   *exec.Cmd
}

// StartRedis starts a private redis-server on a free port, stopped when
// the test ends.
func StartRedis(t testing.TB) *RedisServer {
	t.Helper()
	return StartRedisWith(t)
}

// StartRedisWith is StartRedis with more redis-server arguments
// (--replicaof 127.0.0.1 6379, say).
func StartRedisWith(t testing.TB, extra ...string) *RedisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server is not installed (scripts/services.sh installs it)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s := &RedisServer{t: t, port: port, dir: t.TempDir(), extra: extra}
	s.Start()
	t.Cleanup(s.Kill)
	return s
}

// Addr returns the server's host:port.
func (s *RedisServer) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

// URL returns the server's URL.
func (s *RedisServer) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.port) }

// Start (re)starts the server and waits until it answers.
func (s *RedisServer) Start() {
	s.t.Helper()
	args := []string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", s.dir}
	s.cmd = exec.Command("redis-server", append(args, s.extra...)...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	go func(c *exec.Cmd) { _ = c.Wait() }(s.cmd)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", s.port), 200*time.Millisecond); err == nil {
			conn.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.t.Fatal("redis-server did not start")
}

// Kill stops the server with SIGKILL.
func (s *RedisServer) Kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		s.cmd = nil
		// Wait for the port to close.
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", s.port), 100*time.Millisecond)
			if err != nil {
				return
			}
			conn.Close()
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// Client returns a client to the server, closed when the test ends.
func (s *RedisServer) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", s.port)})
	s.t.Cleanup(func() { c.Close() })
	return c
}
