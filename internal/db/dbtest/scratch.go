package dbtest

import (
	"os"
	"os/user"
	"strconv"
	"testing"
)

// scratch is a directory of server files for a test (a Pair's or a
// Patroni cluster's), owned by the user the servers run as: as root,
// PostgreSQL refuses to run, so the files go to the postgres user.
type scratch struct {
	t     testing.TB
	base  string
	owner *user.User // nil: the current user
}

// newScratch makes the directory (named from prefix), removed by
// cleanup when the test ends; who names the servers in the message when
// running as root without a postgres user.
func newScratch(t testing.TB, prefix, who string, cleanup func()) scratch {
	t.Helper()
	s := scratch{t: t}
	if os.Getuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root, %s need the postgres user to run as: %v", who, err)
		}
		s.owner = u
	}
	base, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	s.base = base
	t.Cleanup(cleanup)
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	s.chown(base)
	return s
}

func (s scratch) writeFile(path, text string) {
	s.t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		s.t.Fatal(err)
	}
	s.chown(path)
}

func (s scratch) chown(path string) {
	if s.owner == nil {
		return
	}
	uid, _ := strconv.Atoi(s.owner.Uid)
	gid, _ := strconv.Atoi(s.owner.Gid)
	if err := os.Chown(path, uid, gid); err != nil {
		s.t.Fatal(err)
	}
}
