package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
	return h.Work(t.Context(), &Job{Type: TypeHTTPRequest, Payload: raw, Attempt: 1})
}

func TestBlockedReason(t *testing.T) {
	t.Parallel()
	public := []string{
		"8.8.8.8", "1.1.1.1", "93.184.216.34", "9.9.9.9", "100.63.255.255", "100.128.0.0",
		"172.15.255.255", "172.32.0.0", "192.167.255.255", "198.17.255.255", "223.255.255.254",
		"2606:4700::1111", "2001:4860:4860::8888", "2a00:1450:4001:82a::200e",
		"::ffff:8.8.8.8",          // IPv4-mapped public address
		"64:ff9b::808:808",        // NAT64 of 8.8.8.8
		"2002:808:808::1",         // 6to4 of 8.8.8.8
		"2001:200::1",             // just past the IETF protocol assignments
		"3000::1", "3ffe:ffff::1", // the end of 2000::/3 outside 3fff::/20
	}
	for _, s := range public {
		t.Run("public "+s, func(t *testing.T) {
			t.Parallel()
			require.Empty(t, blockedReason(netip.MustParseAddr(s)))
		})
	}

	blocked := map[string]string{
		"127.0.0.1":                "loopback",
		"127.255.255.254":          "loopback",
		"10.0.0.1":                 "private",
		"10.255.255.255":           "private",
		"172.16.0.1":               "private",
		"172.31.255.255":           "private",
		"192.168.1.1":              "private",
		"169.254.169.254":          "metadata",
		"169.254.0.1":              "link-local",
		"0.0.0.0":                  "unspecified",
		"0.1.2.3":                  "this network",
		"100.64.0.1":               "carrier-grade NAT",
		"100.127.255.255":          "carrier-grade NAT",
		"192.0.0.8":                "IETF protocol",
		"192.0.2.10":               "documentation",
		"198.51.100.7":             "documentation",
		"203.0.113.200":            "documentation",
		"198.18.0.1":               "benchmarking",
		"198.19.255.255":           "benchmarking",
		"192.88.99.1":              "6to4 relay",
		"224.0.0.1":                "multicast",
		"239.255.255.250":          "multicast",
		"240.0.0.1":                "reserved",
		"255.255.255.255":          "broadcast",
		"::":                       "unspecified",
		"::1":                      "loopback",
		"::127.0.0.1":              "IPv4-compatible",
		"::ffff:127.0.0.1":         "IPv4-mapped 127.0.0.1: loopback",
		"::ffff:7f00:1":            "IPv4-mapped 127.0.0.1: loopback",
		"::ffff:169.254.169.254":   "metadata",
		"::ffff:10.0.0.1":          "private",
		"64:ff9b::7f00:1":          "NAT64 of 127.0.0.1: loopback",
		"64:ff9b::a9fe:a9fe":       "NAT64 of 169.254.169.254",
		"64:ff9b::c0a8:101":        "NAT64 of 192.168.1.1",
		"64:ff9b:1::8.8.8.8":       "local-use NAT64",
		"2002:7f00:1::":            "6to4 of 127.0.0.1: loopback",
		"2002:a00:1::1":            "6to4 of 10.0.0.1: private",
		"2002:a9fe:a9fe::":         "6to4 of 169.254.169.254",
		"2001::1":                  "Teredo",
		"2001:0:4136:e378::1":      "Teredo",
		"2001:2::1":                "IETF protocol",
		"2001:db8::1":              "documentation",
		"3fff::1":                  "documentation",
		"100::1":                   "discard",
		"fc00::1":                  "unique local",
		"fd12:3456::1":             "unique local",
		"fe80::1":                  "link-local",
		"fe80::1%eth0":             "link-local",
		"fec0::1":                  "site-local",
		"ff02::1":                  "multicast",
		"5f00::1":                  "segment routing",
		"1000::1":                  "not a global unicast",
		"4000::1":                  "not a global unicast",
		"::ffff:0:7f00:1":          "not a global unicast", // IPv4-translated, RFC 2765
		"::ffff:255.255.255.255":   "broadcast",
		"64:ff9b::ffff:ffff":       "broadcast",
		"2002:c000:0201::":         "documentation",
		"::ffff:100.64.0.1":        "carrier-grade NAT",
		"::ffff:0.0.0.0":           "unspecified",
		"64:ff9b::0:0":             "unspecified",
		"2002::":                   "6to4 of 0.0.0.0",
		"64:ff9b::e000:1":          "multicast",
		"::ffff:198.18.0.1":        "benchmarking",
		"::ffff:240.0.0.1":         "reserved",
		"2002:6440:1::":            "carrier-grade NAT",
		"64:ff9b::6440:1":          "carrier-grade NAT",
		"2001:db8:ffff:ffff::":     "documentation",
		"fe80::ffff:7f00:1":        "link-local",
		"ff00::":                   "multicast",
		"febf:ffff::1":             "link-local",
		"fdff:ffff:ffff:ffff::1":   "unique local",
		"fc00::ffff:808:808":       "unique local",
		"::ffff:192.0.0.170":       "IETF protocol",
		"::ffff:192.168.255.255":   "private",
		"::ffff:172.16.0.0":        "private",
		"::ffff:127.1.2.3":         "loopback",
		"64:ff9b::a00:1":           "private",
		"2002:ac10:1::":            "private",
		"2002:c0a8:101::":          "private",
		"2002:e000:1::":            "multicast",
		"2002:f000:1::":            "reserved",
		"2002:ffff:ffff::":         "broadcast",
		"2001:0:ffff:ffff::":       "Teredo",
		"2001:1ff:ffff::1":         "IETF protocol",
		"100::ffff:ffff:ffff:ffff": "discard",
	}
	for s, want := range blocked {
		t.Run("blocked "+s, func(t *testing.T) {
			t.Parallel()
			why := blockedReason(netip.MustParseAddr(s))
			require.NotEmpty(t, why, "%s must be blocked", s)
			require.Contains(t, why, want)
		})
	}
	require.NotEmpty(t, blockedReason(netip.Addr{}), "the zero Addr must be blocked")
}

func TestGuardCheckConn(t *testing.T) {
	t.Parallel()
	strict, err := newSSRFGuard(nil)
	require.NoError(t, err)
	open, err := newSSRFGuard([]string{"10.1.0.0/16", "192.168.5.5:8080", "fd00::/8", "api.internal"})
	require.NoError(t, err)

	tests := []struct {
		name    string
		g       *ssrfGuard
		network string
		addr    string
		hostOK  bool
		want    string // "" means allowed
	}{
		{"public 443", strict, "tcp4", "8.8.8.8:443", false, ""},
		{"public 80", strict, "tcp4", "8.8.8.8:80", false, ""},
		{"public v6", strict, "tcp6", "[2606:4700::1111]:443", false, ""},
		{"public odd port", strict, "tcp4", "8.8.8.8:8080", false, "port 8080 on 8.8.8.8 is blocked"},
		{"public ssh", strict, "tcp4", "8.8.8.8:22", false, "port 22"},
		{"udp", strict, "udp4", "8.8.8.8:443", false, `network "udp4"`},
		{"unix", strict, "unix", "8.8.8.8:443", false, `network "unix"`},
		{"loopback", strict, "tcp4", "127.0.0.1:80", false, "address 127.0.0.1 is blocked (loopback)"},
		{"metadata", strict, "tcp4", "169.254.169.254:80", false, "cloud metadata"},
		{"mapped loopback", strict, "tcp6", "[::ffff:127.0.0.1]:443", false, "address 127.0.0.1 is blocked"},
		{"nat64 loopback", strict, "tcp6", "[64:ff9b::7f00:1]:443", false, "NAT64 of 127.0.0.1"},
		{"zoned link-local", strict, "tcp6", "[fe80::1%eth0]:80", false, "link-local"},
		{"hint", strict, "tcp4", "10.0.0.1:443", false, "FLINT_HTTP_ALLOW"},
		{"cidr any port", open, "tcp4", "10.1.2.3:5432", false, ""},
		{"cidr mapped", open, "tcp6", "[::ffff:10.1.2.3]:5432", false, ""},
		{"outside cidr", open, "tcp4", "10.2.0.1:443", false, "private"},
		{"ip:port entry", open, "tcp4", "192.168.5.5:8080", false, ""},
		{"ip:port entry other port", open, "tcp4", "192.168.5.5:8081", false, "port 8081"},
		{"ip:port entry port 80", open, "tcp4", "192.168.5.5:80", false, "private"},
		{"v6 cidr", open, "tcp6", "[fd00::5]:9000", false, ""},
		{"host entry opens anything", open, "tcp4", "127.0.0.1:9999", true, ""},
		{"host entry still tcp only", open, "udp4", "127.0.0.1:9999", true, `network "udp4"`},
		{"public still fine with allow list", open, "tcp4", "1.1.1.1:443", false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.g.checkConn(tc.network, netip.MustParseAddrPort(tc.addr), tc.hostOK)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
			var be *blockedError
			require.ErrorAs(t, err, &be)
		})
	}
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

func TestNewHTTPRequestHandler(t *testing.T) {
	t.Parallel()
	h := NewHTTPRequestHandler(HTTPConfig{})
	_, ok := h.(PayloadValidator)
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
	h := NewHTTPRequestHandler(HTTPConfig{}).(PayloadValidator)
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
	reg := NewRegistry()
	RegisterBuiltins(reg, BuiltinDeps{})
	p := EnqueueParams{Type: TypeHTTPRequest, Payload: json.RawMessage(`{"url": "ftp://example.com/"}`)}
	err := p.Validate(reg, time.Now())
	var ve *ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "payload", ve.Field)
	require.Contains(t, ve.Message, `"url"`)

	p = EnqueueParams{Type: TypeHTTPRequest, Payload: json.RawMessage(`{"url": "https://example.com/"}`)}
	require.NoError(t, p.Validate(reg, time.Now()))
}

// TestHTTPRequestBlockedDestinations runs the handler, with no allow list,
// against destinations the guard must refuse. None of them may be
// connected to, and each refusal must be permanent.
func TestHTTPRequestBlockedDestinations(t *testing.T) {
	t.Parallel()
	h := newTestHTTPHandler(t, HTTPConfig{})
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "reached") })

	tests := []struct {
		url  string
		want string
	}{
		{"http://127.0.0.1/", "address 127.0.0.1 is blocked (loopback)"},
		{"https://127.0.0.1/", "address 127.0.0.1 is blocked (loopback)"},
		{"http://127.0.0.2/", "address 127.0.0.2 is blocked (loopback)"},
		{"http://localhost/", "address 127.0.0.1 is blocked (loopback)"},
		{"http://[::1]/", "address ::1 is blocked (loopback)"},
		{"http://[::]/", "address :: is blocked (unspecified"},
		{"http://10.0.0.1/", "address 10.0.0.1 is blocked (private"},
		{"http://10.255.255.254/", "address 10.255.255.254 is blocked (private"},
		{"http://172.16.0.1/", "address 172.16.0.1 is blocked (private"},
		{"http://172.31.1.1/", "address 172.31.1.1 is blocked (private"},
		{"http://192.168.1.1/", "address 192.168.1.1 is blocked (private"},
		{"http://169.254.169.254/latest/meta-data/", "address 169.254.169.254 is blocked (link-local: the cloud metadata service"},
		{"http://[::ffff:127.0.0.1]/", "address 127.0.0.1 is blocked (loopback)"},
		{"http://[::ffff:7f00:1]/", "address 127.0.0.1 is blocked (loopback)"},
		{"http://[::ffff:169.254.169.254]/", "cloud metadata"},
		{"http://[64:ff9b::7f00:1]/", "address 64:ff9b::7f00:1 is blocked (NAT64 of 127.0.0.1: loopback)"},
		{"http://[64:ff9b::a9fe:a9fe]/", "NAT64 of 169.254.169.254"},
		{"http://[2002:7f00:1::]/", "address 2002:7f00:1:: is blocked (6to4 of 127.0.0.1: loopback)"},
		{"http://0.0.0.0/", "address 0.0.0.0 is blocked (unspecified"},
		{"http://100.64.0.1/", "address 100.64.0.1 is blocked (carrier-grade NAT"},
		{"http://[fe80::1]/", "address fe80::1 is blocked (link-local)"},
		{"http://[fe80::1%25lo]/", "address fe80::1 is blocked (link-local)"},
		{"http://[fc00::1]/", "address fc00::1 is blocked (unique local"},
		{"http://[2001::1]/", "Teredo"},
		{"http://192.0.2.1/", "documentation"},
		{"http://198.18.0.1/", "benchmarking"},
		{"http://224.0.0.1/", "multicast"},
		{"http://255.255.255.255/", "broadcast"},
		{"http://240.0.0.1/", "reserved"},
		// Numeric forms that inet_aton would read as 127.0.0.1.
		{"http://0177.0.0.1/", `host "0177.0.0.1" is not allowed (a numeric address in a non-standard form`},
		{"http://0177.0.0.01/", "non-standard form"},
		{"http://2130706433/", `host "2130706433" is not allowed`},
		{"http://017700000001/", "non-standard form"},
		{"http://0x7f000001/", "non-standard form"},
		{"http://0x7f.0.0.1/", "non-standard form"},
		{"http://127.1/", "non-standard form"},
		{"http://127.0.1/", "non-standard form"},
		{"http://0/", "non-standard form"},
		// The port is checked too: the counting server is on 127.0.0.1.
		{srv.URL + "/", fmt.Sprintf("port %d on 127.0.0.1 is blocked (only ports 80 and 443 are open)", srv.port())},
		{fmt.Sprintf("http://localhost:%d/", srv.port()), fmt.Sprintf("port %d", srv.port())},
		{fmt.Sprintf("http://8.8.8.8:%d/", srv.port()), fmt.Sprintf("port %d on 8.8.8.8 is blocked", srv.port())},
	}
	for _, tc := range tests {
		t.Run(tc.url, func(t *testing.T) {
			t.Parallel()
			res, err := runHTTPJob(t, h, map[string]any{"url": tc.url, "timeout_seconds": 3})
			require.Nil(t, res)
			require.Error(t, err)
			require.True(t, IsPermanent(err), "a refusal must fail the job for good, not retry it: %v", err)
			require.Contains(t, err.Error(), tc.want)
			if strings.Contains(err.Error(), "is blocked (") && !strings.Contains(err.Error(), "port") {
				require.Contains(t, err.Error(), "FLINT_HTTP_ALLOW", "the message must say how to open the address")
			}
		})
	}
	t.Cleanup(func() { require.Zero(t, srv.hits.Load(), "a blocked request reached the server") })
}

func TestHTTPRequestAllowedCIDR(t *testing.T) {
	t.Parallel()
	type seen struct {
		method, path, ua, custom, body string
	}
	got := make(chan seen, 1)
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.URL.RequestURI(), r.UserAgent(), r.Header.Get("X-Flint-Test"), string(b)}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("X-Secret", "not copied")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"ok":true}`)
	})
	h := newTestHTTPHandler(t, HTTPConfig{Allow: []string{"127.0.0.1/32"}})

	res, err := runHTTPJob(t, h, map[string]any{
		"method":  "post",
		"url":     srv.URL + "/hook?token=s3cret",
		"headers": map[string]string{"X-Flint-Test": "yes"},
		"body":    `{"hello":"world"}`,
	})
	require.NoError(t, err)
	r, ok := res.(httpRequestResult)
	require.True(t, ok, "result is %T", res)
	require.Equal(t, http.StatusCreated, r.Status)
	require.Equal(t, `{"ok":true}`, r.Body)
	require.False(t, r.Truncated)
	require.False(t, r.LimitReached)
	require.Equal(t, int64(len(`{"ok":true}`)), r.BytesRead)
	require.Equal(t, "application/json", r.Headers["Content-Type"])
	require.Equal(t, `"v1"`, r.Headers["ETag"])
	require.NotContains(t, r.Headers, "X-Secret")
	require.GreaterOrEqual(t, r.DurationMS, int64(0))

	s := <-got
	require.Equal(t, seen{"POST", "/hook?token=s3cret", "Flint/1", "yes", `{"hello":"world"}`}, s)

	// The result serialises with the documented keys.
	raw, err := json.Marshal(res)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	for _, k := range []string{"status", "headers", "body", "truncated", "duration_ms"} {
		require.Contains(t, m, k)
	}

	// A custom User-Agent replaces the default one.
	uaSeen := make(chan string, 1)
	srv2 := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) { uaSeen <- r.UserAgent() })
	_, err = runHTTPJob(t, h, map[string]any{"url": srv2.URL, "headers": map[string]string{"user-agent": "custom/2"}})
	require.NoError(t, err)
	require.Equal(t, "custom/2", <-uaSeen)
}

func TestHTTPRequestHostNameAllow(t *testing.T) {
	t.Parallel()
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "hi") })
	port := strconv.Itoa(srv.port())

	// A host-name entry opens that name, whatever it resolves to...
	for _, allow := range []string{"localhost", "LocalHost.", "localhost:" + port} {
		h := newTestHTTPHandler(t, HTTPConfig{Allow: []string{allow}})
		res, err := runHTTPJob(t, h, map[string]any{"url": "http://localhost:" + port + "/"})
		require.NoError(t, err, "allow %q", allow)
		require.Equal(t, "hi", res.(httpRequestResult).Body)
	}
	// ...but not the address it resolves to under another name.
	h := newTestHTTPHandler(t, HTTPConfig{Allow: []string{"localhost"}})
	_, err := runHTTPJob(t, h, map[string]any{"url": srv.URL})
	require.True(t, IsPermanent(err), "%v", err)
	require.Contains(t, err.Error(), "port "+port+" on 127.0.0.1 is blocked")
	_, err = runHTTPJob(t, h, map[string]any{"url": "http://127.0.0.1/"})
	require.True(t, IsPermanent(err), "%v", err)
	require.Contains(t, err.Error(), "address 127.0.0.1 is blocked")

	// A host-name entry with a port opens only that port.
	h = newTestHTTPHandler(t, HTTPConfig{Allow: []string{"localhost:1"}})
	_, err = runHTTPJob(t, h, map[string]any{"url": "http://localhost:" + port + "/"})
	require.True(t, IsPermanent(err), "%v", err)
	require.Equal(t, int64(3), srv.hits.Load())
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
			require.True(t, IsPermanent(err), "a refused redirect must fail the job for good: %v", err)
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
	require.False(t, IsPermanent(err))
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
	require.False(t, IsPermanent(err), "a non-2xx status is retried")
	require.Contains(t, err.Error(), "http_request: POST "+srv.URL+"/x?… returned 503")
	require.Contains(t, err.Error(), "overloaded")
	require.NotContains(t, err.Error(), "s3cret", "query strings stay out of errors")

	_, err = runHTTPJob(t, h, map[string]any{"url": srv.URL + "/big"})
	require.Error(t, err)
	require.False(t, IsPermanent(err))
	require.Contains(t, err.Error(), "returned 500")
	require.Less(t, len(err.Error()), 1024, "the body must not be echoed whole")
}

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
	require.False(t, IsPermanent(err), "a timeout is retried")
	require.Contains(t, err.Error(), "timed out after 1s")
	require.Less(t, time.Since(start), 5*time.Second)

	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(100*time.Millisecond, cancel)
	start = time.Now()
	_, err = h.Work(ctx, &Job{Type: TypeHTTPRequest, Payload: json.RawMessage(`{"url": "` + srv.URL + `"}`)})
	require.ErrorIs(t, err, context.Canceled)
	require.Less(t, time.Since(start), 5*time.Second)
}

func TestHTTPRequestBadPayloadCancels(t *testing.T) {
	t.Parallel()
	h := newTestHTTPHandler(t, HTTPConfig{})
	_, err := h.Work(t.Context(), &Job{Payload: json.RawMessage(`{"url": "ftp://example.com/"}`)})
	require.True(t, IsPermanent(err))
	require.Contains(t, err.Error(), "bad payload")
}

// TestHTTPRequestIgnoresProxyEnv sets HTTP_PROXY to a server that would
// answer every request. Were the transport to take its proxy from the
// environment, the job would reach the blocked destination through it (the
// proxy itself is on an allowed address) and succeed.
func TestHTTPRequestIgnoresProxyEnv(t *testing.T) {
	var proxied atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Add(1)
		_, _ = io.WriteString(w, "via proxy")
	}))
	t.Cleanup(proxy.Close)
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"} {
		t.Setenv(k, proxy.URL)
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")

	h := newTestHTTPHandler(t, HTTPConfig{Allow: []string{"127.0.0.1/32"}})
	for _, u := range []string{"http://192.0.2.1/", "http://10.0.0.1/", "http://169.254.169.254/"} {
		res, err := runHTTPJob(t, h, map[string]any{"url": u, "timeout_seconds": 3})
		require.Nil(t, res)
		require.Error(t, err)
		require.True(t, IsPermanent(err), "%v", err)
		require.Contains(t, err.Error(), "is blocked")
	}
	require.Zero(t, proxied.Load(), "the proxy from the environment was used")
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
