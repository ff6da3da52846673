package domain

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHTTPRequestResponseCap(t *testing.T) {
	t.Parallel()
	const size = 5 << 20
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		chunk := []byte(strings.Repeat("abcdefgh", 4096))
		for written := 0; written < size; written += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})

	for _, limit := range []int64{0, 64 << 10} {
		t.Run(strconv.FormatInt(limit, 10), func(t *testing.T) {
			t.Parallel()
			h := newTestHTTPHandler(t, HTTPConfig{Allow: []string{"127.0.0.1/32"}, MaxResponseBytes: limit})
			// Count what the handler pulls from the response body.
			var pulled atomic.Int64
			h.client.Transport = roundTripperFunc(func(req *http.Request) (*http.Response, error) {
				resp, err := h.transport.RoundTrip(req)
				if err == nil {
					resp.Body = &countingBody{ReadCloser: resp.Body, n: &pulled}
				}
				return resp, err
			})
			res, err := runHTTPJob(t, h, map[string]any{"url": srv.URL})
			require.NoError(t, err)
			r := res.(httpRequestResult)
			want := limit
			if want == 0 {
				want = 1 << 20
			}
			require.Equal(t, want, r.BytesRead)
			require.LessOrEqual(t, pulled.Load(), want+1, "the body read must stop at the cap")
			require.True(t, r.Truncated)
			require.True(t, r.LimitReached)
			require.Len(t, r.Body, httpSnippetLen)
			require.True(t, strings.HasPrefix(r.Body, "abcdefgh"))
		})
	}
}

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

func TestReadCapped(t *testing.T) {
	t.Parallel()
	head, n, limited, err := readCapped(strings.NewReader("hello"), 10, 3)
	require.NoError(t, err)
	require.Equal(t, "hel", string(head))
	require.Equal(t, int64(5), n)
	require.False(t, limited)

	head, n, limited, err = readCapped(strings.NewReader("0123456789"), 10, 512)
	require.NoError(t, err)
	require.Equal(t, "0123456789", string(head))
	require.Equal(t, int64(10), n)
	require.False(t, limited, "a body of exactly the cap is whole")

	// A long body: reading must stop just past the cap.
	src := &countingReader{max: 1 << 20}
	head, n, limited, err = readCapped(src, 1000, 4)
	require.NoError(t, err)
	require.Equal(t, "aaaa", string(head))
	require.Equal(t, int64(1000), n)
	require.True(t, limited)
	require.LessOrEqual(t, src.n, int64(1001))
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

func TestUTF8Prefix(t *testing.T) {
	t.Parallel()
	require.Equal(t, "héllo", utf8Prefix([]byte("héllo")))
	require.Equal(t, "h", utf8Prefix([]byte("hé")[:2]), "a rune cut at the end is dropped")
	require.Equal(t, "a\uFFFDb", utf8Prefix([]byte{'a', 0xff, 'b'}))
	require.Equal(t, "", utf8Prefix(nil))
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	h := newTestHTTPHandler(t, HTTPConfig{})
	_, err := runHTTPJob(t, h, map[string]any{"url": "http://127.0.0.1/x?token=abc#frag"})
	require.Error(t, err)
	require.Contains(t, err.Error(), "GET http://127.0.0.1/x?… refused")
	require.NotContains(t, err.Error(), "abc")
	require.NotContains(t, err.Error(), "frag")
	require.False(t, errors.Is(err, context.Canceled))
}
