package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db/dbtest"
)

// releaseTestVersion is the version the tests' release binary reports.
const releaseTestVersion = "v0.0.0-test"

// releaseFlags reads the release build's settings from the Makefile, the
// one place they are written (RELEASE_ENV, RELEASE_FLAGS, RELEASE_LDFLAGS).
func releaseFlags() (env, flags []string, ldflags string, err error) {
	mk, err := os.ReadFile(filepath.Join(repoRoot(), "Makefile"))
	if err != nil {
		return nil, nil, "", err
	}
	get := func(name string) (string, error) {
		m := regexp.MustCompile(`(?m)^` + name + ` := (.*)$`).FindSubmatch(mk)
		if m == nil {
			return "", fmt.Errorf("the Makefile sets no %s", name)
		}
		return strings.TrimSpace(string(m[1])), nil
	}
	var e, f string
	if e, err = get("RELEASE_ENV"); err != nil {
		return
	}
	if f, err = get("RELEASE_FLAGS"); err != nil {
		return
	}
	if ldflags, err = get("RELEASE_LDFLAGS"); err != nil {
		return
	}
	return strings.Fields(e), strings.Fields(f), ldflags, nil
}

// releaseBuild is the command that builds flint at out as make release
// does, reporting releaseTestVersion.
func releaseBuild(out string) (*exec.Cmd, error) {
	env, flags, ldflags, err := releaseFlags()
	if err != nil {
		return nil, err
	}
	args := append([]string{"build"}, flags...)
	args = append(args, "-ldflags", ldflags+" -X main.version="+releaseTestVersion, "-o", out, "github.com/flinthq/flint")
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), env...)
	return cmd, nil
}

// repoRoot is the repository's top directory (the tests run in
// internal/e2e).
func repoRoot() string {
	return filepath.Join("..", "..")
}

// TestReleaseFlagsAreTheDockerfiles: the image is built with the same
// flags as make release and the tests' release binary.
func TestReleaseFlagsAreTheDockerfiles(t *testing.T) {
	t.Parallel()
	env, flags, ldflags, err := releaseFlags()
	require.NoError(t, err)
	docker, err := os.ReadFile(filepath.Join(repoRoot(), "Dockerfile"))
	require.NoError(t, err)
	build := strings.Join(env, " ") + " go build " + strings.Join(flags, " ")
	require.Contains(t, string(docker), build, "the Dockerfile's go build differs from the Makefile's RELEASE_ENV/RELEASE_FLAGS")
	require.Contains(t, string(docker), `-ldflags "`+ldflags+` -X main.version=${VERSION}"`)
}

// TestReleaseBinary runs the binary built with the release flags (static,
// time zone database embedded, stripped) as a user would: it reports its
// version, serves the API and the dashboard, runs a job enqueued over
// HTTP and a cron series in a time zone, shows its version in the
// worker registry, and drains on SIGTERM.
func TestReleaseBinary(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the release binary")
	}
	bin := buildFlint(t, false)
	out, err := exec.Command(bin, "version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "flint "+releaseTestVersion+"\n", string(out))
	if file, err := exec.LookPath("file"); err == nil {
		kind, err := exec.Command(file, bin).CombinedOutput()
		require.NoError(t, err)
		require.Contains(t, string(kind), "statically linked", "cgo is off in the release build")
	}

	addr := freeAddr(t)
	srv := startBinary(t, bin, "serve", dbtest.NewDatabase(t), "FLINT_ADDR="+addr)
	srv.ready(t, 60*time.Second)
	api := newAPIClient("http://" + addr)
	api.waitReady(t, 60*time.Second)
	var job map[string]any
	require.Equal(t, http.StatusCreated, api.do(t, http.MethodPost, "/api/v1/jobs", `{"type":"noop","payload":{"n":1}}`, &job))
	done := waitCompleted(t, api, job["id"].(string))
	require.Equal(t, "completed", done["status"])

	var series map[string]any
	require.Equal(t, http.StatusCreated, api.do(t, http.MethodPost, "/api/v1/jobs",
		`{"type":"noop","cron":"0 9 * * *","timezone":"Pacific/Chatham"}`, &series), "%v", series)

	var workers struct {
		Workers []struct {
			Version string `json:"version"`
		} `json:"workers"`
	}
	// The pool registers itself beside its first claims: on a busy machine
	// the job above may finish before the registry row is written.
	waitFor(t, 60*time.Second, "the worker in the registry", func() bool {
		require.Equal(t, http.StatusOK, api.do(t, http.MethodGet, "/api/v1/workers", nil, &workers))
		return len(workers.Workers) > 0
	})
	require.NotEmpty(t, workers.Workers)
	require.Equal(t, releaseTestVersion, workers.Workers[0].Version)

	require.NoError(t, srv.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, srv.wait(t, 60*time.Second), "drains and exits cleanly")
}
