package domain

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flinthq/flint/jobs"
	"github.com/stretchr/testify/require"
)

// newTestHTTPHandler builds the handler with cfg and drops its idle
// connections when the test ends.
func newTestHTTPHandler(t *testing.T, cfg HTTPConfig) *httpRequestHandler {
	t.Helper()
	h, err := newHTTPRequestHandler(cfg)
	require.NoError(t, err)
	t.Cleanup(h.transport.CloseIdleConnections)
	return h
}

// countingServer is an httptest server that counts the requests it gets.
type countingServer struct {
	*httptest.Server
	hits atomic.Int64
}

func newCountingServer(t *testing.T, h http.HandlerFunc) *countingServer {
	t.Helper()
	s := &countingServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *countingServer) port() int { return s.Listener.Addr().(*net.TCPAddr).Port }

// hostPort is the server's "127.0.0.1:port", usable as an allow entry.
func (s *countingServer) hostPort() string { return s.Listener.Addr().String() }

func runHTTPJob(t *testing.T, h *httpRequestHandler, payload map[string]any) (any, error) {
	t.Helper()
	raw, err := json.Marshal(payload)
	require.NoError(t, err)
	return h.Work(t.Context(), &jobs.Job{Type: jobs.TypeHTTPRequest, Payload: raw, Attempt: 1})
}

func TestNewHTTPRequestHandler(t *testing.T) {
	t.Parallel()
	h := NewHTTPRequestHandler(HTTPConfig{})
	_, ok := h.(jobs.PayloadValidator)
	require.True(t, ok, "the handler must validate payloads at enqueue time")
	hh := h.(*httpRequestHandler)
	require.Nil(t, hh.transport.Proxy, "the transport must never use a proxy")
	require.Equal(t, int64(1<<20), hh.maxBody)
	require.Equal(t, "Flint/1", hh.userAgent)
	require.PanicsWithValue(t, `jobs: FLINT_HTTP_ALLOW entry "not a host!": not a CIDR, an IP address or a host name (optionally with :port)`, func() {
		NewHTTPRequestHandler(HTTPConfig{Allow: []string{"not a host!"}})
	})
}

func TestHTTPRequestPayloadValidation(t *testing.T) {
	t.Parallel()
	h := NewHTTPRequestHandler(HTTPConfig{}).(jobs.PayloadValidator)
	tests := []struct {
		name    string
		payload string
		want    string // "" means valid
	}{
		{"minimal", `{"url": "https://example.com/"}`, ""},
		{"full", `{"method": "POST", "url": "http://example.com:8080/x?y=1", "headers": {"Content-Type": "application/json", "X-Trace": "a\tb"}, "body": "{}", "timeout_seconds": 300}`, ""},
		{"lower-case method", `{"method": "delete", "url": "https://example.com/"}`, ""},
		{"ipv6 literal", `{"url": "https://[2606:4700::1111]/"}`, ""},
		{"timeout 1", `{"url": "https://example.com/", "timeout_seconds": 1}`, ""},
		{"missing url", `{"method": "GET"}`, `needs "url"`},
		{"empty payload", `{}`, `needs "url"`},
		{"ftp", `{"url": "ftp://example.com/file"}`, `scheme "ftp" is not allowed`},
		{"file", `{"url": "file:///etc/passwd"}`, `scheme "file"`},
		{"gopher", `{"url": "gopher://127.0.0.1:6379/_INFO"}`, `scheme "gopher"`},
		{"no scheme", `{"url": "example.com/path"}`, "without a scheme"},
		{"opaque", `{"url": "http:example.com"}`, "without a host"},
		{"no host", `{"url": "http:///path"}`, "without a host"},
		{"userinfo", `{"url": "https://user:pass@example.com/"}`, "user info"},
		{"user only", `{"url": "https://user@example.com/"}`, "user info"},
		{"empty userinfo", `{"url": "https://@example.com/"}`, "user info"},
		{"port 0", `{"url": "https://example.com:0/"}`, "between 1 and 65535"},
		{"port too big", `{"url": "https://example.com:70000/"}`, "between 1 and 65535"},
		{"octal host", `{"url": "http://0177.0.0.1/"}`, "non-standard form"},
		{"decimal host", `{"url": "http://2130706433/"}`, "non-standard form"},
		{"hex host", `{"url": "http://0x7f000001/"}`, "non-standard form"},
		{"short host", `{"url": "http://127.1/"}`, "non-standard form"},
		{"trailing dot quad", `{"url": "http://127.0.0.1./"}`, "non-standard form"},
		{"bad url", `{"url": "http://exa mple.com/"}`, `"url" is not a valid URL`},
		{"bad method", `{"method": "TRACE", "url": "https://example.com/"}`, `"method" must be one of`},
		{"connect", `{"method": "CONNECT", "url": "https://example.com/"}`, `"method"`},
		{"method not string", `{"method": 1, "url": "https://example.com/"}`, `"method" must be a string`},
		{"CRLF in value", `{"url": "https://example.com/", "headers": {"X-A": "a\r\nX-Injected: 1"}}`, "CR, LF, NUL"},
		{"LF in value", `{"url": "https://example.com/", "headers": {"X-A": "a\nb"}}`, "CR, LF, NUL"},
		{"NUL in value", `{"url": "https://example.com/", "headers": {"X-A": "a\u0000b"}}`, "CR, LF, NUL"},
		{"CRLF in name", `{"url": "https://example.com/", "headers": {"X-A\r\nX-B": "a"}}`, `"headers": name`},
		{"colon in name", `{"url": "https://example.com/", "headers": {"X-A: b": "a"}}`, `"headers": name`},
		{"empty name", `{"url": "https://example.com/", "headers": {"": "a"}}`, "empty header name"},
		{"host override", `{"url": "https://example.com/", "headers": {"host": "169.254.169.254"}}`, "may not set Host"},
		{"hop-by-hop", `{"url": "https://example.com/", "headers": {"Connection": "close"}}`, "hop-by-hop"},
		{"transfer-encoding", `{"url": "https://example.com/", "headers": {"Transfer-Encoding": "chunked"}}`, "hop-by-hop"},
		{"proxy-authorization", `{"url": "https://example.com/", "headers": {"Proxy-Authorization": "x"}}`, "hop-by-hop"},
		{"upgrade", `{"url": "https://example.com/", "headers": {"upgrade": "websocket"}}`, "hop-by-hop"},
		{"duplicate header", `{"url": "https://example.com/", "headers": {"X-A": "1", "x-a": "2"}}`, "sets X-A twice"},
		{"header value not string", `{"url": "https://example.com/", "headers": {"X-A": 1}}`, "must be a string"},
		{"timeout 0", `{"url": "https://example.com/", "timeout_seconds": 0}`, `"timeout_seconds" must be between 1 and 300`},
		{"timeout 301", `{"url": "https://example.com/", "timeout_seconds": 301}`, `"timeout_seconds" must be between 1 and 300`},
		{"timeout negative", `{"url": "https://example.com/", "timeout_seconds": -5}`, `"timeout_seconds"`},
		{"timeout fraction", `{"url": "https://example.com/", "timeout_seconds": 1.5}`, `"timeout_seconds"`},
		{"unknown field", `{"url": "https://example.com/", "proxy": "http://evil"}`, `unknown field "proxy"`},
		{"typo field", `{"url": "https://example.com/", "header": {}}`, `unknown field "header"`},
		{"not an object", `["https://example.com/"]`, "must be an object"},
		{"body too big", `{"url": "https://example.com/", "body": "` + strings.Repeat("a", 1<<20+1) + `"}`, `"body" must be at most`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := h.ValidatePayload(json.RawMessage(tc.payload))
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestHTTPRequestValidatedAtEnqueue(t *testing.T) {
	t.Parallel()
	reg := jobs.NewRegistry()
	RegisterBuiltins(reg, BuiltinDeps{})
	p := jobs.EnqueueParams{Type: jobs.TypeHTTPRequest, Payload: json.RawMessage(`{"url": "ftp://example.com/"}`)}
	err := p.Validate(reg, time.Now())
	var ve *jobs.ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "payload", ve.Field)
	require.Contains(t, ve.Message, `"url"`)

	p = jobs.EnqueueParams{Type: jobs.TypeHTTPRequest, Payload: json.RawMessage(`{"url": "https://example.com/"}`)}
	require.NoError(t, p.Validate(reg, time.Now()))
}

func TestHTTPRequestRedirects(t *testing.T) {
	t.Parallel()
	// target is a live server that only the redirects below point at. It is
	// on 127.0.0.1 like the others, but on a port the allow list does not open.
	target := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "internal secret") })

	tests := []struct {
		name     string
		location string
		want     string
	}{
		{"other port on the same IP", target.URL + "/", fmt.Sprintf("port %d on 127.0.0.1 is blocked", target.port())},
		{"metadata service", "http://169.254.169.254/latest/meta-data/", "address 169.254.169.254 is blocked (link-local: the cloud metadata service"},
		{"ipv6 loopback", fmt.Sprintf("http://[::1]:%d/", target.port()), "is blocked"},
		{"ipv6 loopback port 80", "http://[::1]/", "address ::1 is blocked (loopback)"},
		{"localhost by name", "http://localhost/", "address 127.0.0.1 is blocked (loopback)"},
		{"mapped loopback", "http://[::ffff:127.0.0.1]/", "address 127.0.0.1 is blocked (loopback)"},
		{"private", "https://10.0.0.1/", "address 10.0.0.1 is blocked (private"},
		{"octal loopback", "http://0177.0.0.1/", "non-standard form"},
		{"decimal loopback", "http://2130706433/", "non-standard form"},
		{"ftp", "ftp://example.com/", `scheme "ftp" is blocked`},
		{"file", "file:///etc/passwd", `scheme "file" is blocked`},
		{"userinfo", "http://user:pass@example.com/", "user info"},
		{"relative to other port", fmt.Sprintf("//127.0.0.1:%d/x", target.port()), "is blocked"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			entry := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Location", tc.location)
				w.WriteHeader(http.StatusFound)
			})
			// Open exactly the entry server: its IP and port.
			h := newTestHTTPHandler(t, HTTPConfig{Allow: []string{entry.hostPort()}})
			res, err := runHTTPJob(t, h, map[string]any{"url": entry.URL + "/start", "timeout_seconds": 3})
			require.Nil(t, res)
			require.Error(t, err)
			require.True(t, jobs.IsPermanent(err), "a refused redirect must fail the job for good: %v", err)
			require.Contains(t, err.Error(), tc.want)
			require.Contains(t, err.Error(), "refused: redirect to ")
			require.Equal(t, int64(1), entry.hits.Load())
		})
	}
	t.Cleanup(func() {
		require.Zero(t, target.hits.Load(), "a redirect reached a server the allow list does not open")
	})
}

func TestHTTPRequestRedirectLimit(t *testing.T) {
	t.Parallel()
	// /hop/N redirects to /hop/N-1; /hop/0 answers.
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/hop/"))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		if n == 0 {
			_, _ = io.WriteString(w, "landed")
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/hop/%d", n-1), http.StatusTemporaryRedirect)
	})
	h := newTestHTTPHandler(t, HTTPConfig{Allow: []string{"127.0.0.1/32"}})

	res, err := runHTTPJob(t, h, map[string]any{"method": "POST", "url": srv.URL + "/hop/5", "body": "kept"})
	require.NoError(t, err, "five redirects are followed")
	require.Equal(t, "landed", res.(httpRequestResult).Body)

	_, err = runHTTPJob(t, h, map[string]any{"url": srv.URL + "/hop/6"})
	require.Error(t, err)
	require.False(t, jobs.IsPermanent(err))
	require.Contains(t, err.Error(), "stopped after 5 redirects")
}

func TestHTTPRequestNon2xx(t *testing.T) {
	t.Parallel()
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, strings.Repeat("x", 64<<10))
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "overloaded")
	})
	h := newTestHTTPHandler(t, HTTPConfig{Allow: []string{"127.0.0.1/32"}})

	res, err := runHTTPJob(t, h, map[string]any{"method": "POST", "url": srv.URL + "/x?api_key=s3cret"})
	require.Nil(t, res)
	require.Error(t, err)
	require.False(t, jobs.IsPermanent(err), "a non-2xx status is retried")
	require.Contains(t, err.Error(), "http_request: POST "+srv.URL+"/x?… returned 503")
	require.Contains(t, err.Error(), "overloaded")
	require.NotContains(t, err.Error(), "s3cret", "query strings stay out of errors")

	_, err = runHTTPJob(t, h, map[string]any{"url": srv.URL + "/big"})
	require.Error(t, err)
	require.False(t, jobs.IsPermanent(err))
	require.Contains(t, err.Error(), "returned 500")
	require.Less(t, len(err.Error()), 1024, "the body must not be echoed whole")
}

func TestHTTPRequestTimeoutAndCancel(t *testing.T) {
	t.Parallel()
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	h := newTestHTTPHandler(t, HTTPConfig{Allow: []string{"127.0.0.1/32"}})

	start := time.Now()
	_, err := runHTTPJob(t, h, map[string]any{"url": srv.URL, "timeout_seconds": 1})
	require.Error(t, err)
	require.False(t, jobs.IsPermanent(err), "a timeout is retried")
	require.Contains(t, err.Error(), "timed out after 1s")
	require.Less(t, time.Since(start), 5*time.Second)

	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(100*time.Millisecond, cancel)
	start = time.Now()
	_, err = h.Work(ctx, &jobs.Job{Type: jobs.TypeHTTPRequest, Payload: json.RawMessage(`{"url": "` + srv.URL + `"}`)})
	require.ErrorIs(t, err, context.Canceled)
	require.Less(t, time.Since(start), 5*time.Second)
}

func TestHTTPRequestBadPayloadCancels(t *testing.T) {
	t.Parallel()
	h := newTestHTTPHandler(t, HTTPConfig{})
	_, err := h.Work(t.Context(), &jobs.Job{Payload: json.RawMessage(`{"url": "ftp://example.com/"}`)})
	require.True(t, jobs.IsPermanent(err))
	require.Contains(t, err.Error(), "bad payload")
}

func TestParseHTTPAllow(t *testing.T) {
	t.Parallel()
	got, err := ParseHTTPAllow(" 10.0.0.0/8, 10.1.2.3/8 ,192.168.1.20,127.0.0.1:8080, [::1]:8443, fd00::/8 , API.Internal. ,api.internal:9000,::ffff:10.0.0.0/104,,")
	require.NoError(t, err)
	require.Equal(t, []string{
		"10.0.0.0/8", "10.0.0.0/8", "192.168.1.20", "127.0.0.1:8080", "[::1]:8443", "fd00::/8",
		"api.internal", "api.internal:9000", "10.0.0.0/8",
	}, got)

	none, err := ParseHTTPAllow("  ")
	require.NoError(t, err)
	require.Empty(t, none)

	for _, bad := range []string{
		"10.0.0.0/33", "10.0.0/8", "300.1.1.1", "0177.0.0.1", "2130706433", "0x7f000001", "127.1",
		"host:0", "host:99999", "host:http", "-bad.example", "bad_.example-", "exa mple.com",
		"http://example.com", "user@example.com", "fe80::1%eth0", "1.2.3.4:0", "a..b", "*.example.com",
	} {
		t.Run(bad, func(t *testing.T) {
			t.Parallel()
			_, err := ParseHTTPAllow("10.0.0.0/8," + bad)
			require.Error(t, err)
			require.Contains(t, err.Error(), fmt.Sprintf("%q", strings.TrimSpace(bad)))
			require.Contains(t, err.Error(), "FLINT_HTTP_ALLOW")
		})
	}
}
