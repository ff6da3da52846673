package dbtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// SmallDisk is a small filesystem (a size-limited tmpfs) holding a test
// database's files through a tablespace, so that a test can fill the
// database's disk (Fill) and free it again (Free) without touching the
// server's own data directory. WAL stays in the data directory: what
// fails is what a full data disk fails, extending tables and indexes.
type SmallDisk struct {
	dir    string
	filler string
}

// NewDatabaseOnSmallDisk is NewDatabase with the database moved to a
// tablespace on a tmpfs of sizeMB megabytes (the migrated schema takes
// about 10). It needs root (to mount) and a server on this machine that
// can reach the mount; the test is skipped otherwise.
func NewDatabaseOnSmallDisk(t testing.TB, sizeMB int) (string, *SmallDisk) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small filesystem needs root")
	}
	u := NewDatabase(t)
	admin := AdminURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("small disk: %v", err)
	}
	defer conn.Close(context.Background())
	var dataDir string
	if err := conn.QueryRow(ctx, `SELECT current_setting('data_directory')`).Scan(&dataDir); err != nil {
		t.Fatalf("small disk: %v", err)
	}
	st, err := os.Stat(dataDir)
	if err != nil {
		t.Skipf("the server's data directory is not on this machine: %v", err)
	}
	owner := st.Sys().(*syscall.Stat_t)
	dir, err := os.MkdirTemp("", "flint-small-disk-")
	if err != nil {
		t.Fatalf("small disk: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm,mode=0755", sizeMB), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	ts := filepath.Join(dir, "pg")
	if err := os.Mkdir(ts, 0o700); err != nil {
		t.Fatalf("small disk: %v", err)
	}
	if err := os.Chown(ts, int(owner.Uid), int(owner.Gid)); err != nil {
		t.Fatalf("small disk: %v", err)
	}
	name := "flint_ts_" + randomHex(8)
	dbName := strings.TrimPrefix(mustParse(t, u).Path, "/")
	if _, err := conn.Exec(ctx, fmt.Sprintf(`CREATE TABLESPACE %s LOCATION '%s'`, name, ts)); err != nil {
		t.Fatalf("small disk: create tablespace: %v", err)
	}
	// Runs before NewDatabase's own cleanup drops the database: the
	// tablespace goes after it.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(ctx, fmt.Sprintf(`DROP DATABASE IF EXISTS %s WITH (FORCE)`, dbName))
		_, _ = c.Exec(ctx, `DROP TABLESPACE IF EXISTS `+name)
	})
	if _, err := conn.Exec(ctx, fmt.Sprintf(`ALTER DATABASE %s SET TABLESPACE %s`, dbName, name)); err != nil {
		t.Fatalf("small disk: move the database: %v", err)
	}
	return u, &SmallDisk{dir: dir, filler: filepath.Join(dir, "filler")}
}

func mustParse(t testing.TB, u string) *url.URL {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatalf("small disk: %v", err)
	}
	return p
}

// Fill takes every free byte of the disk, so that the server's next write
// that needs a new block fails with "No space left on device" (SQLSTATE
// 53100).
func (d *SmallDisk) Fill() error {
	f, err := os.OpenFile(d.filler, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	block := make([]byte, 64<<10)
	for {
		if _, err := f.Write(block); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return nil
			}
			return err
		}
	}
}

// Free gives the space Fill took back.
func (d *SmallDisk) Free() error {
	err := os.Remove(d.filler)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
