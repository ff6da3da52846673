package e2e

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db/dbtest"
)

// The guides' examples must work as written. A code block the tests run
// is marked by a "<!-- doc-test: NAME -->" line just before its fence
// (docBlock reads one page's; guideBlock finds it in any page).

// guideBlock returns the code block marked with name in README.md or any
// page under docs/; the name must mark one block only.
func guideBlock(t *testing.T, name string) string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	require.NoError(t, err)
	var found []string
	for _, p := range append([]string{filepath.Join("..", "..", "README.md")}, pages...) {
		text, err := os.ReadFile(p)
		require.NoError(t, err)
		if strings.Contains(string(text), "<!-- doc-test: "+name+" -->\n") {
			found = append(found, strings.TrimPrefix(p, filepath.Join("..", "..")+string(filepath.Separator)))
		}
	}
	require.Len(t, found, 1, "exactly one page marks a block %q", name)
	return docBlock(t, found[0], name)
}

// TestReadmeGoProgramIsTheExample: the Go program the README shows is the
// example program the tests build and run (TestExampleProgramServes).
func TestReadmeGoProgramIsTheExample(t *testing.T) {
	t.Parallel()
	want, err := os.ReadFile(filepath.Join("..", "..", "examples", "invoices", "main.go"))
	require.NoError(t, err)
	require.Equal(t, string(want), guideBlock(t, "examples/invoices/main.go"),
		"the README's Go program and examples/invoices/main.go have drifted apart")
}

// TestReadmePushReceiver runs the README's push receiver and its commands
// as written against a real flint serve: the queue is pointed at the
// receiver, the receiver verifies Flint's signature, and the job completes
// with the result the receiver answered. A request with a forged signature
// is refused by the receiver.
func TestReadmePushReceiver(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	bin := flintBinary(t)
	addr := freeAddr(t)
	recvAddr := freeAddr(t)
	_, recvPort, err := net.SplitHostPort(recvAddr)
	require.NoError(t, err)
	startBinary(t, bin, "serve", dbtest.NewDatabase(t), "FLINT_ADDR="+addr,
		"FLINT_HTTP_ALLOW=127.0.0.1:"+recvPort)
	base := "http://" + addr
	api := newAPIClient(base)
	api.waitReady(t, 60*time.Second)

	// The commands as written, on this test's addresses and ports.
	out := runReadmeScript(t, base, map[string]string{"receiver.py": "receiver.py"}, "push.sh",
		strings.NewReplacer("127.0.0.1:9000", recvAddr, "python3 receiver.py", "PORT="+recvPort+" python3 receiver.py"))

	// The last command enqueued the job; its answer is the job.
	var enqueued struct {
		ID    string `json:"id"`
		Queue string `json:"queue"`
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &enqueued), "output:\n%s", out)
	require.Equal(t, "hooks", enqueued.Queue)
	done := waitCompleted(t, api, enqueued.ID)
	require.Equal(t, map[string]any{"greeting": "hello, Ada"}, done["result"])

	// The receiver refuses what Flint did not sign.
	req, err := http.NewRequest(http.MethodPost, "http://"+recvAddr+"/", strings.NewReader(`{"payload": {}}`))
	require.NoError(t, err)
	req.Header.Set("webhook-id", enqueued.ID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(time.Now().Unix(), 10))
	req.Header.Set("webhook-signature", "v1,bm90IGEgc2lnbmF0dXJl")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	// The queue's recent deliveries list the one that completed the job.
	var queue struct {
		RecentDeliveries []struct {
			JobID   string `json:"job_id"`
			Outcome string `json:"outcome"`
		} `json:"recent_deliveries"`
	}
	require.Equal(t, http.StatusOK, api.do(t, http.MethodGet, "/api/v1/queues/hooks", nil, &queue))
	require.NotEmpty(t, queue.RecentDeliveries)
	require.Equal(t, enqueued.ID, queue.RecentDeliveries[0].JobID)
}

// runReadmeScript writes the README's blocks named in files (block name →
// file name) to a scratch directory and runs the block script there as
// written, on base for Flint's address and with repl's changes, and
// returns what it printed. Processes it starts in the background are
// killed when the test ends.
func runReadmeScript(t *testing.T, base string, files map[string]string, script string, repl *strings.Replacer) []byte {
	t.Helper()
	dir := t.TempDir()
	for block, name := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(guideBlock(t, block)), 0o600))
	}
	text := repl.Replace(strings.ReplaceAll(guideBlock(t, script), "http://localhost:8080", base))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", text)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "FLINT_API_KEY="+testAPIKey)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // receivers run on in the background
	// Output goes to a file: a receiver keeps a pipe open after the
	// script ends.
	outFile, err := os.Create(filepath.Join(dir, "out.txt"))
	require.NoError(t, err)
	defer outFile.Close()
	cmd.Stdout, cmd.Stderr = outFile, outFile
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	runErr := cmd.Wait()
	out, err := os.ReadFile(outFile.Name())
	require.NoError(t, err)
	require.NoError(t, runErr, "the README's %s failed:\n%s", script, out)
	return out
}

// TestReadmePushReceiverLater runs the README's receiver that answers 202
// and finishes each job later through the API, as an independent
// process, against a real flint serve: the job completes with the
// receiver's result, its progress and log line were written with the
// lease token, and the delivery is recorded as accepted.
func TestReadmePushReceiverLater(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	bin := flintBinary(t)
	addr, recvAddr := freeAddr(t), freeAddr(t)
	_, recvPort, err := net.SplitHostPort(recvAddr)
	require.NoError(t, err)
	startBinary(t, bin, "serve", dbtest.NewDatabase(t), "FLINT_ADDR="+addr, "FLINT_HTTP_ALLOW=127.0.0.1:"+recvPort)
	base := "http://" + addr
	api := newAPIClient(base)
	api.waitReady(t, 60*time.Second)

	out := runReadmeScript(t, base, map[string]string{"receiver.py": "receiver.py", "receiver_later.py": "receiver_later.py"}, "push_later.sh",
		strings.NewReplacer("127.0.0.1:9001", recvAddr, "python3 receiver_later.py", "PORT="+recvPort+" python3 receiver_later.py"))
	var enqueued struct {
		ID    string `json:"id"`
		Queue string `json:"queue"`
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &enqueued), "output:\n%s", out)
	require.Equal(t, "later", enqueued.Queue)
	done := waitCompleted(t, api, enqueued.ID)
	require.Equal(t, map[string]any{"greeting": "hello later, Ada"}, done["result"])
	// The receiver may have started after the first push (a refused
	// connection, retried); the delivery it took was finished once, by
	// the receiver, and never handed back or pushed again.
	succeeded := 0
	for _, e := range done["executions"].([]any) {
		outcome := e.(map[string]any)["outcome"]
		require.NotEqual(t, "interrupted", outcome)
		if outcome == "succeeded" {
			succeeded++
		}
	}
	require.Equal(t, 1, succeeded)

	var log struct {
		Entries []struct {
			Message string `json:"message"`
		} `json:"entries"`
	}
	require.Equal(t, http.StatusOK, api.do(t, http.MethodGet, "/api/v1/jobs/"+enqueued.ID+"/logs", nil, &log))
	var messages []string
	for _, l := range log.Entries {
		messages = append(messages, l.Message)
	}
	require.Contains(t, messages, "greeted Ada")
	var queue struct {
		RecentDeliveries []struct {
			JobID   string `json:"job_id"`
			Outcome string `json:"outcome"`
		} `json:"recent_deliveries"`
	}
	require.Equal(t, http.StatusOK, api.do(t, http.MethodGet, "/api/v1/queues/later", nil, &queue))
	require.NotEmpty(t, queue.RecentDeliveries)
	require.Equal(t, enqueued.ID, queue.RecentDeliveries[0].JobID)
	require.Equal(t, "accepted", queue.RecentDeliveries[0].Outcome)
}
