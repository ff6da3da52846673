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
