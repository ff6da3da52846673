package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMakeRelease cuts a release in a clone of the repository with make
// release, as a maintainer would: the changelog's Unreleased section
// becomes the version's, the commit is tagged with it, the binary built
// with the release flags reports it and matches SHA256SUMS; a dirty tree,
// a tag that exists, a version below the last and a malformed one are
// refused with a message and change nothing.
func TestMakeRelease(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("clones the repository and builds a release")
	}
	dir := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
		return strings.TrimSpace(string(out))
	}
	out, err := exec.Command("git", "clone", "-q", repoRoot(), dir).CombinedOutput()
	require.NoError(t, err, "%s", out)
	git("checkout", "-q", "-B", "main")
	git("config", "user.email", "maintainers@example.org")
	git("config", "user.name", "Flint maintainers")
	// Something to release, whatever the repository's changelog holds now.
	log, err := os.ReadFile(filepath.Join(dir, "CHANGELOG.md"))
	require.NoError(t, err)
	log = []byte(strings.Replace(string(log), "## Unreleased\n", "## Unreleased\n\n- A change to release.\n", 1))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "CHANGELOG.md"), log, 0o644))
	git("commit", "-q", "-am", "A change to release")

	release := func(version string) (string, error) {
		cmd := exec.Command("make", "--no-print-directory", "release", "VERSION="+version)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "RELEASE_PLATFORMS=linux/amd64", "RELEASE_IMAGE=0")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	head := git("rev-parse", "HEAD")
	for version, why := range map[string]string{"1.0": "must look like v1.2.3", "v1.02.0": "must look like v1.2.3"} {
		out, err := release(version)
		require.Error(t, err, version)
		require.Contains(t, out, why)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "stray.txt"), []byte("x"), 0o644))
	out2, err := release("v999.0.0")
	require.Error(t, err)
	require.Contains(t, out2, "the tree has changes")
	require.NoError(t, os.Remove(filepath.Join(dir, "stray.txt")))
	require.Equal(t, head, git("rev-parse", "HEAD"), "a refused release commits nothing")

	out2, err = release("v999.0.0")
	require.NoError(t, err, "%s", out2)
	require.Equal(t, git("rev-parse", "HEAD"), git("rev-list", "-n1", "v999.0.0"), "the release commit is tagged")
	require.Contains(t, git("tag", "-n20", "v999.0.0"), "A change to release.", "the tag carries the notes")
	log, err = os.ReadFile(filepath.Join(dir, "CHANGELOG.md"))
	require.NoError(t, err)
	today := time.Now().UTC().Format("2006-01-02")
	require.Contains(t, string(log), "## Unreleased\n\n## v999.0.0 ("+today+")\n\n- A change to release.\n")

	bin := filepath.Join(dir, "dist", "flint-v999.0.0-linux-amd64")
	ver, err := exec.Command(bin, "version").CombinedOutput()
	require.NoError(t, err, "%s", ver)
	require.Equal(t, "flint v999.0.0\n", string(ver))
	data, err := os.ReadFile(bin)
	require.NoError(t, err)
	sum := sha256.Sum256(data)
	sums, err := os.ReadFile(filepath.Join(dir, "dist", "SHA256SUMS"))
	require.NoError(t, err)
	require.Equal(t, hex.EncodeToString(sum[:])+"  flint-v999.0.0-linux-amd64\n", string(sums))

	out2, err = release("v999.0.0")
	require.Error(t, err)
	require.Contains(t, out2, "tag v999.0.0 exists already")
	out2, err = release("v998.0.0")
	require.Error(t, err)
	require.Contains(t, out2, "is not above the last release")
	out2, err = release("v999.0.1")
	require.Error(t, err)
	require.Contains(t, out2, `"## Unreleased" section of CHANGELOG.md is empty`)
}
