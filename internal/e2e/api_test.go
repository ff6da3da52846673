package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testAPIKey is the FLINT_API_KEY startFlint gives every process.
const testAPIKey = "test-key-0123456789abcdef"

// apiClient calls a Flint process's JSON API with a key.
type apiClient struct {
	base string
	key  string
	http *http.Client
}

func newAPIClient(base string) *apiClient {
	return &apiClient{base: base, key: testAPIKey, http: &http.Client{Timeout: 60 * time.Second}}
}

// waitReady waits until /readyz answers 200.
func (c *apiClient) waitReady(t *testing.T, timeout time.Duration) {
	t.Helper()
	c.waitServing(t, nil, timeout)
}

// waitServing is waitReady for a server the test started as process p
// (nil: one it did not): if p exits first, the test fails at once with
// why, rather than waiting out the timeout for a server that is gone.
func (c *apiClient) waitServing(t *testing.T, p *proc, timeout time.Duration) {
	t.Helper()
	var exited <-chan struct{} // without a process, nil: never ready to receive
	if p != nil {
		exited = p.done
	}
	require.Eventually(t, func() bool {
		select {
		case <-exited:
			return true
		default:
		}
		resp, err := c.http.Get(c.base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, timeout, 50*time.Millisecond, "%s never became ready", c.base)
	select {
	case <-exited:
		t.Fatalf("the server at %s exited before it was ready: %v", c.base, p.err)
	default:
	}
}

// do sends body (nil for none) as JSON and decodes the JSON answer into
// out (nil: discarded); it returns the status code.
func (c *apiClient) do(t *testing.T, method, path string, body, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, ok := body.([]byte)
		if s, isStr := body.(string); isStr {
			b, ok = []byte(s), true
		}
		if !ok {
			var err error
			b, err = json.Marshal(body)
			require.NoError(t, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", c.key)
	resp, err := c.http.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if out != nil && len(raw) > 0 {
		require.NoError(t, json.Unmarshal(raw, out), "%s %s answered %d: %s", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode
}

// apiError is the API's error body.
type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Field   string `json:"field"`
	} `json:"error"`
}
