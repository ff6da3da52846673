package logs

import (
	"bytes"
	"errors"
	"strings"
	"syscall"
	"testing"
)

// fullDisk is a log file whose disk is full until freed.
type fullDisk struct {
	full  bool
	wrote bytes.Buffer
}

func (d *fullDisk) Write(p []byte) (int, error) {
	if d.full {
		return 0, syscall.ENOSPC
	}
	return d.wrote.Write(p)
}

func (d *fullDisk) Close() error { return nil }

// TestLogFileFull: while the log file's disk is full, each failing write
// returns its error (the other destinations carry on), stderr says so
// once, and says so again once when the file is written again.
func TestLogFileFull(t *testing.T) {
	disk := &fullDisk{full: true}
	var stderr bytes.Buffer
	f := &fileWriter{w: disk, name: "flint.log", stderr: &stderr}
	for range 3 {
		if _, err := f.Write([]byte("line\n")); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("write to a full disk: %v", err)
		}
	}
	if got := strings.Count(stderr.String(), "cannot write the log file flint.log"); got != 1 {
		t.Fatalf("said %d times on stderr:\n%s", got, stderr.String())
	}
	disk.full = false
	for range 2 {
		if _, err := f.Write([]byte("line\n")); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Count(stderr.String(), "is written again"); got != 1 {
		t.Fatalf("recovery said %d times:\n%s", got, stderr.String())
	}
	if disk.wrote.String() != "line\nline\n" {
		t.Fatalf("file holds %q", disk.wrote.String())
	}
}
