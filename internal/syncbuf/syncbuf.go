// Package syncbuf is a bytes.Buffer that goroutines may share: tests hand
// it to a logger, a stream or a child process's output and read it while
// they write.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is an io.Writer whose contents can be read while others write.
// The zero value is ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
