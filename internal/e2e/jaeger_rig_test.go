package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Jaeger v1.75.0 (pinned in tools/jaeger/go.mod), run with in-memory
// storage, is the trace store the tracing tests export to over OTLP/HTTP
// and read back from through its HTTP query API.

// jaegerConfig receives OTLP over HTTP only and keeps traces in memory;
// every port is the test's (nothing listens on Jaeger's defaults, which
// other programs on the machine may hold).
const jaegerConfig = `
service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 100000
  jaeger_query:
    storage:
      traces: mem
    http:
      endpoint: %s
    grpc:
      endpoint: %s
receivers:
  otlp:
    protocols:
      http:
        endpoint: %s
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
`

var jaegerBuild struct {
	once sync.Once
	path string
	err  error
}

// jaegerBinary is .flint/tools/jaeger when make test-services built it,
// or a build of the pinned version made once per test run (the first
// build compiles Jaeger's dependencies, which takes minutes).
func jaegerBinary(tb testing.TB) string {
	tb.Helper()
	if testing.Short() {
		tb.Skip("builds and runs Jaeger")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(tb, err)
	if p := filepath.Join(root, ".flint", "tools", "jaeger"); fileExists(p) {
		return p
	}
	jaegerBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "flint-jaeger-")
		if err != nil {
			jaegerBuild.err = err
			return
		}
		jaegerBuild.path = filepath.Join(dir, "jaeger")
		cmd := exec.Command("go", "build", "-modfile=tools/jaeger/go.mod", "-o", jaegerBuild.path, "github.com/jaegertracing/jaeger/cmd/jaeger")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			jaegerBuild.err = fmt.Errorf("go build jaeger: %v\n%s", err, out)
		}
	})
	require.NoError(tb, jaegerBuild.err)
	return jaegerBuild.path
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// startJaeger runs Jaeger for the test and returns its OTLP/HTTP endpoint
// (for OTEL_EXPORTER_OTLP_ENDPOINT) and its query API's base URL.
func startJaeger(tb testing.TB) (otlp, query string) {
	tb.Helper()
	bin := jaegerBinary(tb)
	ports := make([]string, 3)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(tb, err)
		ports[i] = ln.Addr().String()
		require.NoError(tb, ln.Close())
	}
	cfg := filepath.Join(tb.TempDir(), "jaeger.yaml")
	require.NoError(tb, os.WriteFile(cfg, fmt.Appendf(nil, jaegerConfig, ports[0], ports[1], ports[2]), 0o644))
	runProc(tb, exec.Command(bin, "--config", cfg), "jaeger")
	query = "http://" + ports[0]
	require.True(tb, pollUntil(60*time.Second, 50*time.Millisecond, func() bool {
		resp, err := http.Get(query + "/api/services")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}), "jaeger's query API never answered")
	return "http://" + ports[2], query
}

// jaegerSpan is a span as Jaeger's query API returns it.
type jaegerSpan struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags []struct {
		Key   string `json:"key"`
		Type  string `json:"type"`
		Value any    `json:"value"`
	} `json:"tags"`
	// Logs are the span's events, each with its name under the key
	// "event" among its fields.
	Logs []struct {
		Fields []struct {
			Key   string `json:"key"`
			Value any    `json:"value"`
		} `json:"fields"`
	} `json:"logs"`
	ProcessID string `json:"processID"`
}

// events lists the span's events as name → the value of their field key
// (name → "" when key is "").
func (s jaegerSpan) events(key string) map[string][]string {
	out := map[string][]string{}
	for _, l := range s.Logs {
		name, value := "", ""
		for _, f := range l.Fields {
			switch f.Key {
			case "event":
				name = fmt.Sprint(f.Value)
			case key:
				value = fmt.Sprint(f.Value)
			}
		}
		out[name] = append(out[name], value)
	}
	return out
}

// parent is the span's CHILD_OF parent, or "".
func (s jaegerSpan) parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// tag is the value of the span's tag key as text ("" when absent).
func (s jaegerSpan) tag(key string) string {
	for _, t := range s.Tags {
		if t.Key == key {
			switch v := t.Value.(type) {
			case string:
				return v
			case float64:
				return strconv.FormatFloat(v, 'f', -1, 64)
			default:
				return fmt.Sprint(v)
			}
		}
	}
	return ""
}

// jaegerTrace reads the spans of trace id (32 hex digits) from Jaeger;
// none while it has not stored the trace.
func jaegerTrace(tb testing.TB, query, id string) []jaegerSpan {
	tb.Helper()
	resp, err := http.Get(query + "/api/traces/" + id)
	require.NoError(tb, err)
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil
	}
	var body struct {
		Data []struct {
			Spans []jaegerSpan `json:"spans"`
		} `json:"data"`
	}
	require.NoError(tb, json.NewDecoder(resp.Body).Decode(&body))
	var out []jaegerSpan
	for _, d := range body.Data {
		out = append(out, d.Spans...)
	}
	return out
}

// spanNamed is the span of spans named name, failing when there is not
// exactly one.
func spanNamed(t *testing.T, spans []jaegerSpan, name string) jaegerSpan {
	t.Helper()
	var found []jaegerSpan
	for _, s := range spans {
		if s.OperationName == name {
			found = append(found, s)
		}
	}
	require.Len(t, found, 1, "spans named %q among %v", name, spans)
	return found[0]
}
