package domain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"unicode/utf8"
)

// httpResultHeaders are the response headers copied into the result.
var httpResultHeaders = []string{"Content-Type", "Content-Length", "Content-Encoding", "ETag", "Last-Modified", "Location", "Retry-After"}

// httpRequestResult is the result of a successful http_request job.
type httpRequestResult struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	// Body is the first 512 bytes of the response body.
	Body string `json:"body"`
	// Truncated is true when Body is not the whole response body.
	Truncated bool `json:"truncated"`
	// BytesRead is how much of the body was read, at most the cap.
	BytesRead int64 `json:"bytes_read"`
	// LimitReached is true when the body was longer than the cap and the
	// rest was left unread.
	LimitReached bool  `json:"limit_reached,omitempty"`
	DurationMS   int64 `json:"duration_ms"`
}

// readCapped reads r to its end or to limit bytes, whichever comes first,
// and keeps only the first keep bytes. It returns those, the number of bytes
// read (at most limit), and whether the body went on past limit.
func readCapped(r io.Reader, limit int64, keep int) (head []byte, n int64, limited bool, err error) {
	w := &headWriter{keep: keep}
	n, err = io.Copy(w, io.LimitReader(r, min(limit, math.MaxInt64-1)+1))
	if n > limit {
		return w.buf, limit, true, nil
	}
	return w.buf, n, false, err
}

// headWriter keeps the first keep bytes written to it and discards the rest.
type headWriter struct {
	buf  []byte
	keep int
}

func (w *headWriter) Write(p []byte) (int, error) {
	if room := w.keep - len(w.buf); room > 0 {
		w.buf = append(w.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// utf8Prefix returns b as valid UTF-8 text: a rune cut at the end is
// dropped and invalid bytes become U+FFFD.
func utf8Prefix(b []byte) string {
	for i := 1; i <= utf8.UTFMax && i <= len(b); i++ {
		c := b[len(b)-i]
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-i:]) {
				b = b[:len(b)-i]
			}
			break
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// readError is the error of a 2xx response whose body could not be read to
// the end: the job's context ended (jobCtx), the payload's timeout ran out
// (reqCtx), or the connection failed.
func readError(jobCtx, reqCtx context.Context, r *httpRequest, shown string, err error) error {
	if jobCtx.Err() != nil {
		return fmt.Errorf("http_request: %s: %w", shown, context.Cause(jobCtx))
	}
	if reqCtx.Err() != nil {
		return fmt.Errorf("http_request: %s: timed out after %s reading the response (timeout_seconds)", shown, r.timeout)
	}
	return fmt.Errorf("http_request: %s: reading the response: %v", shown, err)
}

// statusError is the error of a response that is not 2xx, quoting the
// start of its body (snippet, marked when truncated).
func statusError(shown string, status int, snippet string, truncated bool) error {
	msg := fmt.Sprintf("http_request: %s returned %d", shown, status)
	if snippet != "" {
		msg += fmt.Sprintf(" (body: %q", snippet)
		if truncated {
			msg += " …"
		}
		msg += ")"
	}
	return errors.New(msg)
}

// resultHeaders copies the httpResultHeaders h has into a result, each
// value cut to 256 bytes.
func resultHeaders(h http.Header) map[string]string {
	out := map[string]string{}
	for _, name := range httpResultHeaders {
		if v := h.Get(name); v != "" {
			if len(v) > 256 {
				v = utf8Prefix([]byte(v[:256]))
			}
			out[name] = v
		}
	}
	return out
}
