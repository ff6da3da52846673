package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/jobs"
)

// freshDatabase creates an empty database on the admin URL's server, runs
// Flint's migrations in it and returns its URL and a function dropping it.
func freshDatabase(ctx context.Context) (string, func()) {
	if *flagDB != "" {
		must(db.Migrate(ctx, *flagDB, slog.New(slog.NewTextHandler(io.Discard, nil))))
		return *flagDB, func() {}
	}
	name := fmt.Sprintf("flintbench_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9)
	conn, err := adminConn(ctx)
	must(err)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+name)
	must(err)
	conn.Close(ctx)
	u, err := url.Parse(*flagAdmin)
	must(err)
	u.Path = "/" + name
	dbURL := u.String()
	must(db.Migrate(ctx, dbURL, slog.New(slog.NewTextHandler(io.Discard, nil))))
	return dbURL, func() {
		if *flagKeep {
			fmt.Fprintf(os.Stderr, "kept database %s\n", name)
			return
		}
		conn, err := adminConn(ctx)
		must(err)
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		must(err)
	}
}

// adminConn connects to the admin URL, read as Flint reads connection
// strings.
func adminConn(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := db.ParseConnConfig("-admin", *flagAdmin)
	if err != nil {
		return nil, err
	}
	return pgx.ConnectConfig(ctx, cfg)
}

// openStore opens a store on dbURL with room for the modes' concurrency.
func openStore(ctx context.Context, dbURL string) *db.Store {
	s, err := db.Open(ctx, db.Config{URL: dbURL, MaxConns: 20})
	must(err)
	return s
}

// walLSN is the server's current WAL position.
func walLSN(ctx context.Context, s *db.Store) string {
	var lsn string
	must(s.Pool().QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn))
	return lsn
}

// walSince is how many bytes of WAL the server wrote since from.
func walSince(ctx context.Context, s *db.Store, from string) float64 {
	var d float64
	must(s.Pool().QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::float8", from).Scan(&d))
	return d
}

// flintEnv is the environment of a flint child process: the caller's,
// without anything of Flint's that could change the measurement, plus env.
func flintEnv(env ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "FLINT_") || k == "DATABASE_URL" || k == "REDIS_URL" || k == "LOG_LEVEL" || k == "LOG_FORMAT" {
			continue
		}
		out = append(out, kv)
	}
	out = append(out, env...)
	if *flagEnv != "" {
		out = append(out, strings.Split(*flagEnv, ",")...)
	}
	return out
}

// benchKey is the API key of the flint processes flintbench starts.
const benchKey = "flintbench-api-key-0123456789"

// benchEnv is the environment of a flint process serving dbURL, its HTTP
// on addr, logging errors only.
func benchEnv(dbURL, addr string) []string {
	return flintEnv("DATABASE_URL="+dbURL, "REDIS_URL="+*flagRedis, "FLINT_REDIS_PREFIX="+redisPrefix(),
		"FLINT_LOG_FILE=-", "LOG_LEVEL=error", "FLINT_ADDR="+addr, "FLINT_API_KEY="+benchKey,
		"FLINT_ADMIN_PASSWORD=flintbench-password", "FLINT_SESSION_KEY="+sessionKey)
}

// workerEnv is benchEnv for a worker, with -workers when given.
func workerEnv(dbURL string) []string {
	env := benchEnv(dbURL, freePort())
	if *flagWorkers > 0 {
		env = append(env, fmt.Sprintf("FLINT_WORKERS=%d", *flagWorkers))
	}
	return env
}

// startFlint starts the flint binary with args and env, its output
// discarded and its errors on ours.
func startFlint(args []string, env []string) *exec.Cmd {
	cmd := exec.Command(*flagBin, args...)
	cmd.Env = env
	cmd.Stdout = io.Discard
	cmd.Stderr = os.Stderr
	must(cmd.Start())
	return cmd
}

// stopFlint stops a flint process as a container runtime would: SIGTERM,
// then SIGKILL after 30 s.
func stopFlint(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// freePort is a loopback address that nothing listens on.
func freePort() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(err)
	defer l.Close()
	return l.Addr().String()
}

// sessionKey is the session key of the flint processes flintbench starts.
const sessionKey = "flintbench-session-key-0123456789abcdef"

// redisPrefix is a Redis key prefix of this run's own.
func redisPrefix() string {
	return fmt.Sprintf("flintbench:%d:%d:", os.Getpid(), time.Now().UnixNano())
}

// enqueueDrained pre-inserts n jobs of -type with -payload in batches of
// 5,000 (as riverbench pre-inserts River's), without events: no process is
// listening yet.
func enqueueDrained(ctx context.Context, s *db.Store, n int) {
	const chunk = 5000
	job := jobs.EnqueueParams{Type: *flagType}
	if *flagPayload != "" {
		job.Payload = json.RawMessage(*flagPayload)
	}
	batch := make([]jobs.EnqueueParams, 0, chunk)
	for done := 0; done < n; done += len(batch) {
		batch = batch[:0]
		for range min(chunk, n-done) {
			batch = append(batch, job)
		}
		_, err := s.Enqueue(ctx, batch...)
		must(err)
	}
}

// startAPI starts `flint api` on dbURL and returns its base URL, a client
// keeping up to -conc connections alive, and a function stopping it.
func startAPI(dbURL string) (string, *http.Client, func()) {
	addr := freePort()
	cmd := startFlint([]string{"api"}, benchEnv(dbURL, addr))
	base := "http://" + addr
	client := &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: *flagConc, MaxConnsPerHost: *flagConc}, Timeout: time.Minute}
	for i := 0; ; i++ {
		resp, err := client.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if i > 300 {
			stopFlint(cmd)
			log.Fatalf("flint api did not come up: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return base, client, func() { stopFlint(cmd) }
}

// uuidV7Floor is the smallest version 7 UUID of the millisecond t: every
// id minted at or after t sorts after it.
func uuidV7Floor(t time.Time) uuid.UUID {
	var id uuid.UUID
	ms := uint64(t.UnixMilli())
	for i := range 6 {
		id[i] = byte(ms >> (40 - 8*i))
	}
	id[6] = 0x70 // version 7
	id[8] = 0x80 // RFC 4122 variant
	return id
}
