package jobs

import (
	"io"
	"net/http"
	"sync/atomic"
)

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// countingReader yields max bytes of 'a' and counts what was read.
type countingReader struct{ n, max int64 }

func (r *countingReader) Read(p []byte) (int, error) {
	if r.n >= r.max {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), r.max-r.n)]
	for i := range p {
		p[i] = 'a'
	}
	r.n += int64(len(p))
	return len(p), nil
}
