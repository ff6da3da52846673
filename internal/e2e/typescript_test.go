package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTypeScriptClient runs the TypeScript client's own tests (node
// --test, clients/typescript/test) against a real flint serve: enqueue
// one, a batch, a workflow, idempotency keys, typed refusals naming the
// field, and a worker in the test process. The worker's crash and signal
// behaviour is held to the wire contract by TestWorkerConformance.
func TestTypeScriptClient(t *testing.T) {
	t.Parallel()
	if why := nodeMissing(); why != "" {
		t.Skip(why + ": the TypeScript client is not tested")
	}
	r := newWorkRig(t, "FLINT_JOB_TYPES=ts.echo,ts.flaky,ts.broken,ts.refuse,ts.split,ts.slow")
	cmd := exec.Command("node", "--test", "--test-reporter=spec", "test/")
	cmd.Dir = filepath.Join("..", "..", "clients", "typescript")
	cmd.Env = append(os.Environ(), "FLINT_URL="+r.url, "FLINT_API_KEY="+testAPIKey, "FLINT_WORK_KEY="+r.key)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "skipped 0", "the tests against Flint ran")
}

// nodeMissing says why the TypeScript client cannot run here (no node, or
// one older than 20), or "" when it can.
func nodeMissing() string {
	out, err := exec.Command("node", "-p", "process.versions.node").Output()
	if err != nil {
		return "node is not installed"
	}
	v := strings.TrimSpace(string(out))
	if major, _ := strconv.Atoi(strings.Split(v, ".")[0]); major < 20 {
		return "node " + v + " is older than 20"
	}
	return ""
}

// docBlock returns the code block of the doc marked with a
// "<!-- doc-test: NAME -->" line just before its fence.
func docBlock(t *testing.T, doc, name string) string {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("..", "..", doc))
	require.NoError(t, err)
	body, _, found := markedBlock(t, doc, string(text), "<!-- doc-test: "+name+" -->\n")
	require.True(t, found, "%s has no block marked %q", doc, name)
	return body
}

// markedBlock returns the body of the first fenced block after mark in
// text, and the text after the block; found is false when no mark is left.
func markedBlock(t *testing.T, doc, text, mark string) (body, rest string, found bool) {
	t.Helper()
	_, after, found := strings.Cut(text, mark)
	if !found {
		return "", "", false
	}
	_, after, ok := strings.Cut(after, "\n") // the opening fence
	require.True(t, ok, "%s: a mark %q with no block after it", doc, strings.TrimSpace(mark))
	body, rest, ok = strings.Cut(after, "```\n")
	require.True(t, ok, "%s: the block after %q is not closed", doc, strings.TrimSpace(mark))
	return body, rest, true
}

// TestTypeScriptGuide runs the example of docs/typescript.md as written
// against a real flint serve: the package installed from this checkout,
// the worker started with a work key, the service side run twice (the
// second run finds the job of its idempotency key), the worker stopped
// with SIGTERM.
func TestTypeScriptGuide(t *testing.T) {
	t.Parallel()
	if why := nodeMissing(); why != "" {
		t.Skip(why + ": the TypeScript guide is not tested")
	}
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm is not installed: the TypeScript guide is not tested")
	}
	r := newWorkRig(t)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	dir := t.TempDir()
	demo := filepath.Join(dir, "flint-demo")
	require.NoError(t, os.Mkdir(demo, 0o755))
	for _, f := range []string{"worker.mjs", "enqueue.mjs"} {
		require.NoError(t, os.WriteFile(filepath.Join(demo, f), []byte(docBlock(t, "docs/typescript.md", f)), 0o644))
	}
	script := strings.NewReplacer("/path/to/flint", root, "http://localhost:8080", r.url).
		Replace("set -e\n" + docBlock(t, "docs/typescript.md", "setup") + docBlock(t, "docs/typescript.md", "run"))
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "FLINT_API_KEY="+testAPIKey, "npm_config_offline=true", "npm_config_update_notifier=false")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Logf("%s", out)
	for _, want := range []string{
		"\nenqueued ", "refused: priority: ", `thumbnail completed {"thumbnail":"thumb-128-cat.png"}`,
		`publish completed {"published":"thumb-64-dog.png"}`, "\nalready enqueued ", "INFO flint_worker: deregistered ",
	} {
		require.Contains(t, "\n"+string(out), want)
	}
}
