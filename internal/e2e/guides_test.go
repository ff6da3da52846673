package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db/dbtest"
)

// docRunBlocks returns the blocks of a page (relative to the module's
// root) marked "<!-- doc-run -->", in the page's order.
func docRunBlocks(t *testing.T, page string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", page))
	require.NoError(t, err)
	var out []string
	for rest := string(raw); ; {
		body, tail, found := markedBlock(t, page, rest, "<!-- doc-run -->\n")
		if !found {
			return out
		}
		out = append(out, body)
		rest = tail
	}
}

// curlFailing makes every curl of a script fail on an HTTP error status,
// so that a request the text says works cannot quietly get a 4xx.
const curlFailing = `curl() { command curl --fail-with-body --show-error "$@"; echo; }
`

// TestGuidesRunAsWritten runs, for README.md and each page under docs/,
// the page's blocks marked <!-- doc-run --> in order, as one bash script
// (errexit, pipefail, every curl failing on a 4xx or 5xx), against a
// fresh flint serve on this test's address with its API key. Where the
// text says what the commands lead to, the test checks it: the README's
// tour ends with its jobs where the tour says they go.
func TestGuidesRunAsWritten(t *testing.T) {
	t.Parallel()
	pages, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	require.NoError(t, err)
	names := []string{"README.md"}
	for _, p := range pages {
		names = append(names, filepath.Join("docs", filepath.Base(p)))
	}
	ran := 0
	for _, page := range names {
		blocks := docRunBlocks(t, page)
		if len(blocks) == 0 {
			continue
		}
		ran += len(blocks)
		t.Run(page, func(t *testing.T) {
			t.Parallel()
			u := dbtest.NewDatabase(t)
			addr := freeAddr(t)
			startFlint(t, "serve", u, "FLINT_ADDR="+addr)
			base := "http://" + addr
			newAPIClient(base).waitReady(t, 60*time.Second)
			script := curlFailing + strings.ReplaceAll(strings.Join(blocks, "\n"), "http://localhost:8080", base)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
			cmd.Dir = t.TempDir()
			cmd.Env = append(os.Environ(), "FLINT_API_KEY="+testAPIKey)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s's doc-run blocks failed:\n%s", page, out)
			if page == "README.md" {
				checkTourOutcome(t, u)
			}
		})
	}
	require.NotZero(t, ran, "no page has a doc-run block; has the mark changed?")
}

// checkTourOutcome waits for the README tour's jobs to end where the tour
// says: the noop, the job that fails once, the email and the workflow's
// four jobs completed (the recurring series' first run may add one), the
// job that always fails in the dead-letter queue after one attempt, the
// delayed job cancelled.
func checkTourOutcome(t *testing.T, dbURL string) {
	t.Helper()
	s := openStore(t, dbURL)
	waitUntil(t, 60*time.Second, func() (bool, string) {
		var completed, dead, cancelled, other int
		err := s.Pool().QueryRow(context.Background(), `
			SELECT count(*) FILTER (WHERE status = 'completed'),
			       count(*) FILTER (WHERE status = 'dead_letter' AND attempt = 1),
			       count(*) FILTER (WHERE status = 'cancelled'),
			       count(*) FILTER (WHERE status NOT IN ('completed', 'dead_letter', 'cancelled', 'scheduled'))
			FROM jobs`).Scan(&completed, &dead, &cancelled, &other)
		require.NoError(t, err)
		state := fmt.Sprintf("completed %d, dead after one attempt %d, cancelled %d, not yet ended %d", completed, dead, cancelled, other)
		return completed >= 7 && dead == 1 && cancelled == 1 && other == 0, "the tour's jobs to end where it says: " + state
	})
}
