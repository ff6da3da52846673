package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/syncbuf"
)

// TestHTTPSProxy puts Caddy, run from the repository's Caddyfile (the one
// compose.yaml mounts), in front of a real `flint serve`: plain HTTP is
// redirected to HTTPS; the dashboard, the API and a live event stream work
// through it, over HTTP/2, with the stream's events arriving as they
// happen rather than when a buffer fills.
func TestHTTPSProxy(t *testing.T) {
	t.Parallel()
	flintAddr := freeAddr(t)
	startFlint(t, "serve", dbtest.NewDatabase(t), "FLINT_ADDR="+flintAddr)
	client, base, httpPort, resp := startCaddy(t, flintAddr)
	require.Equal(t, "HTTP/2.0", resp.Proto, "browsers get HTTP/2")

	// Plain HTTP is sent to HTTPS.
	r, err := client.Get("http://localhost:" + httpPort + "/jobs?status=queued")
	require.NoError(t, err)
	r.Body.Close()
	require.Equal(t, http.StatusPermanentRedirect, r.StatusCode)
	loc, err := url.Parse(r.Header.Get("Location"))
	require.NoError(t, err)
	// To the same page over HTTPS (on port 443: this test's ports are not
	// the standard ones, Caddy's redirect assumes they are).
	require.Equal(t, "https", loc.Scheme)
	require.Equal(t, "localhost", loc.Hostname())
	require.Equal(t, "/jobs?status=queued", loc.RequestURI())

	// A dashboard page.
	r, err = client.Get(base + "/login")
	require.NoError(t, err)
	body, _ := io.ReadAll(r.Body)
	r.Body.Close()
	require.Equal(t, http.StatusOK, r.StatusCode)
	require.Contains(t, string(body), `data-testid="login-form"`)

	// The live event stream, opened before the job exists: its events come
	// through as they happen.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/sse/events?type=noop", nil)
	req.Header.Set("X-API-Key", "test-key-0123456789abcdef")
	stream, err := client.Do(req)
	require.NoError(t, err)
	defer stream.Body.Close()
	require.Equal(t, http.StatusOK, stream.StatusCode)
	require.Equal(t, "text/event-stream", stream.Header.Get("Content-Type"))
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stream.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()

	// The API.
	req, _ = http.NewRequest(http.MethodPost, base+"/api/v1/jobs", bytes.NewBufferString(`{"type":"noop"}`))
	req.Header.Set("X-API-Key", "test-key-0123456789abcdef")
	req.Header.Set("Content-Type", "application/json")
	sent := time.Now()
	r, err = client.Do(req)
	require.NoError(t, err)
	body, _ = io.ReadAll(r.Body)
	r.Body.Close()
	require.Equal(t, http.StatusCreated, r.StatusCode, string(body))

	for seen := map[string]bool{}; !seen["completed"]; {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "the stream ended")
			for _, st := range []string{"queued", "running", "completed"} {
				if strings.HasPrefix(l, "data: ") && strings.Contains(l, `"status":"`+st+`"`) {
					seen[st] = true
				}
			}
		case <-ctx.Done():
			t.Fatal("the job's events did not come through the proxy")
		}
	}
	require.Less(t, time.Since(sent), 10*time.Second)
}

// startCaddy runs Caddy with the project's Caddyfile in front of the Flint
// server at flintAddr, and waits until Flint answers ready through it. It
// returns a client that trusts Caddy's local CA and does not follow
// redirects, the HTTPS base URL, the plain HTTP port, and the ready answer.
func startCaddy(t *testing.T, flintAddr string) (client *http.Client, base, httpPort string, ready *http.Response) {
	t.Helper()
	caddy, err := exec.LookPath("caddy")
	if err != nil {
		t.Fatal("caddy is not installed (scripts/services.sh ensure caddy installs it)")
	}
	_, httpPort, _ = net.SplitHostPort(freeAddr(t))
	_, httpsPort, _ := net.SplitHostPort(freeAddr(t))

	home := t.TempDir()
	cmd := exec.Command(caddy, "run", "--config", "../../Caddyfile", "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "FLINT_DOMAIN=localhost", "FLINT_UPSTREAM="+flintAddr,
		"CADDY_HTTP_PORT="+httpPort, "CADDY_HTTPS_PORT="+httpsPort, "CADDY_ADMIN=off",
		"XDG_DATA_HOME="+filepath.Join(home, "data"), "XDG_CONFIG_HOME="+filepath.Join(home, "config"), "HOME="+home)
	var out syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("caddy output:\n%s", out.String())
		}
	})

	// Trust Caddy's local CA, as a browser would once told to.
	rootPath := filepath.Join(home, "data", "caddy", "pki", "authorities", "local", "root.crt")
	var pool *x509.CertPool
	require.Eventually(t, func() bool {
		pem, err := os.ReadFile(rootPath)
		if err != nil {
			return false
		}
		pool = x509.NewCertPool()
		return pool.AppendCertsFromPEM(pem)
	}, 30*time.Second, 100*time.Millisecond, "Caddy made its local CA")
	client = &http.Client{
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true},
		// Redirects are looked at, not followed.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	base = "https://localhost:" + httpsPort
	var resp *http.Response
	require.Eventually(t, func() bool {
		r, err := client.Get(base + "/readyz")
		if err != nil {
			return false
		}
		r.Body.Close()
		resp = r
		return r.StatusCode == http.StatusOK
	}, 60*time.Second, 200*time.Millisecond, "Flint is ready behind the proxy")
	return client, base, httpPort, resp
}
