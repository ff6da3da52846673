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

	"github.com/flinthq/flint/db/dbtest"
)

// The README's "Your own code" examples must work as written. A code block
// the tests run is marked by a "<!-- readme-test: NAME -->" line just
// before its fence.

// readmeBlock returns the code block of the README marked with name.
func readmeBlock(t *testing.T, name string) string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	marker := "<!-- readme-test: " + name + " -->\n"
	_, rest, ok := strings.Cut(string(readme), marker)
	require.True(t, ok, "README has no block marked %q", name)
	_, rest, ok = strings.Cut(rest, "\n") // the opening fence
	require.True(t, ok)
	body, _, ok := strings.Cut(rest, "```\n")
	require.True(t, ok, "README block %q is not closed", name)
	return body
}

// TestReadmeGoProgramIsTheExample: the Go program the README shows is the
// example program the tests build and run (TestExampleProgramServes).
func TestReadmeGoProgramIsTheExample(t *testing.T) {
	t.Parallel()
	want, err := os.ReadFile(filepath.Join("..", "..", "examples", "invoices", "main.go"))
	require.NoError(t, err)
	require.Equal(t, string(want), readmeBlock(t, "examples/invoices/main.go"),
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
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "receiver.py"), []byte(readmeBlock(t, "receiver.py")), 0o600))
	script := readmeBlock(t, "push.sh")
	script = strings.ReplaceAll(script, "http://localhost:8080", base)
	script = strings.ReplaceAll(script, "127.0.0.1:9000", recvAddr)
	script = strings.ReplaceAll(script, "python3 receiver.py", "PORT="+recvPort+" python3 receiver.py")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "FLINT_API_KEY="+testAPIKey)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the receiver runs on in the background
	// Output goes to a file: the receiver keeps a pipe open after the
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
	require.NoError(t, runErr, "the README's push commands failed:\n%s", out)

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
