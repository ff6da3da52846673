package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// modeHTTP measures single enqueues as an outside client sees them: a
// fresh database first drains -n noop jobs through `flint worker` (so that
// the jobs table and its indexes hold what a database in use holds), then
// `flint api` alone is started and the load generator at -httpload posts
// {"type":"noop","payload":{"n":1}} -http-n times from -conc keep-alive
// connections. Its RESULT line is printed as it is.
func modeHTTP(ctx context.Context) {
	dbURL, drop := freshDatabase(ctx)
	defer drop()
	s := openStore(ctx, dbURL)
	if *flagN > 0 {
		el, _ := drain(ctx, s, dbURL, *flagN)
		fmt.Printf("http %s: drained %d jobs first in %v\n", *flagLabel, *flagN, el.Round(1e6))
	}
	s.Close()
	base, _, stop := startAPI(dbURL)
	defer stop()
	fmt.Print(string(httpLoad(ctx, base)))
}

// httpLoad runs the load generator at -httpload against the flint api at
// base: -http-n single noop enqueues from -conc keep-alive connections. It
// returns what the generator printed (its RESULT line).
func httpLoad(ctx context.Context, base string) []byte {
	dir, err := os.MkdirTemp("", "flintbench-http")
	must(err)
	defer os.RemoveAll(dir)
	body := filepath.Join(dir, "body.json")
	must(os.WriteFile(body, []byte(`{"type":"noop","payload":{"n":1}}`), 0o600))
	cmd := exec.CommandContext(ctx, *flagHTTPLoad, "-url", base+"/api/v1/jobs", "-body", body,
		"-key", benchKey, "-n", fmt.Sprint(*flagHTTPN), "-c", fmt.Sprint(*flagConc))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	must(err)
	return out
}
