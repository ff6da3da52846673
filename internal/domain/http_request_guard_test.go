package domain

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flinthq/flint/jobs"
	"github.com/stretchr/testify/require"
)

// publicAddrs are addresses an http_request job may reach: public ones,
// including those just outside the ranges that are blocked.
var publicAddrs = []string{
	"8.8.8.8", "1.1.1.1", "93.184.216.34", "9.9.9.9", "100.63.255.255", "100.128.0.0",
	"172.15.255.255", "172.32.0.0", "192.167.255.255", "198.17.255.255", "223.255.255.254",
	"2606:4700::1111", "2001:4860:4860::8888", "2a00:1450:4001:82a::200e",
	"::ffff:8.8.8.8",          // IPv4-mapped public address
	"64:ff9b::808:808",        // NAT64 of 8.8.8.8
	"2002:808:808::1",         // 6to4 of 8.8.8.8
	"2001:200::1",             // just past the IETF protocol assignments
	"3000::1", "3ffe:ffff::1", // the end of 2000::/3 outside 3fff::/20
}

// blockedAddrs are addresses it may not reach, each with a word of the
// reason it gives.
var blockedAddrs = map[string]string{
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

func TestBlockedReason(t *testing.T) {
	t.Parallel()
	for _, s := range publicAddrs {
		t.Run("public "+s, func(t *testing.T) {
			t.Parallel()
			require.Empty(t, blockedReason(netip.MustParseAddr(s)))
		})
	}

	for s, want := range blockedAddrs {
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
			require.True(t, jobs.IsPermanent(err), "a refusal must fail the job for good, not retry it: %v", err)
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
	require.True(t, jobs.IsPermanent(err), "%v", err)
	require.Contains(t, err.Error(), "port "+port+" on 127.0.0.1 is blocked")
	_, err = runHTTPJob(t, h, map[string]any{"url": "http://127.0.0.1/"})
	require.True(t, jobs.IsPermanent(err), "%v", err)
	require.Contains(t, err.Error(), "address 127.0.0.1 is blocked")

	// A host-name entry with a port opens only that port.
	h = newTestHTTPHandler(t, HTTPConfig{Allow: []string{"localhost:1"}})
	_, err = runHTTPJob(t, h, map[string]any{"url": "http://localhost:" + port + "/"})
	require.True(t, jobs.IsPermanent(err), "%v", err)
	require.Equal(t, int64(3), srv.hits.Load())
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
		require.True(t, jobs.IsPermanent(err), "%v", err)
		require.Contains(t, err.Error(), "is blocked")
	}
	require.Zero(t, proxied.Load(), "the proxy from the environment was used")
}
