package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db/dbtest"
)

// Payload schemas are stored with their types in PostgreSQL, so a
// process that never saw the handler or the worker refuses a payload
// that does not fit, naming the field.

// refusedField posts body to path and returns the field of the 422.
func refusedField(t *testing.T, api *apiClient, path, body string) apiError {
	t.Helper()
	var refused apiError
	require.Equal(t, http.StatusUnprocessableEntity, api.do(t, http.MethodPost, path, body, &refused), "%s", body)
	return refused
}

// TestStockAPIRefusesWhatTheExampleTypeCannotTake: the invoices example's
// worker stores its typed handler's schema; a stock `flint api`, which has
// no such handler, refuses a payload that does not fit it (single, batch
// and workflow) with a 422 naming the field instead of a job that dies at
// run time.
func TestStockAPIRefusesWhatTheExampleTypeCannotTake(t *testing.T) {
	t.Parallel()
	bin := exampleBinary(t)
	u := dbtest.NewDatabase(t)
	addr := freeAddr(t)
	startFlint(t, "api", u, "FLINT_ADDR="+addr)
	api := newAPIClient("http://" + addr)
	api.waitReady(t, 60*time.Second)
	startBinary(t, bin, "worker", u, "FLINT_WORKER_ID=invoices-worker").ready(t, 60*time.Second)

	good := `{"type": "invoice.total", "payload": ` + invoicePayload + `}`
	var job map[string]any
	require.Eventually(t, func() bool {
		job = nil
		return api.do(t, http.MethodPost, "/api/v1/jobs", good, &job) == http.StatusCreated
	}, 15*time.Second, 100*time.Millisecond, "the API never accepted the type its worker serves: %v", job)

	r := refusedField(t, api, "/api/v1/jobs", `{"type": "invoice.total", "payload": {"currency": "EURO", "lines": [{"quantity": 1, "unit_cents": 5}]}}`)
	require.Equal(t, "payload.currency", r.Error.Field, "%+v", r)
	require.Contains(t, r.Error.Message, "maxLength")
	r = refusedField(t, api, "/api/v1/jobs", `{"type": "invoice.total", "payload": {"currency": "EUR", "lines": [{"quantity": 0, "unit_cents": 5}]}}`)
	require.Equal(t, "payload.lines[0].quantity", r.Error.Field, "%+v", r)
	r = refusedField(t, api, "/api/v1/jobs", `{"type": "invoice.total", "payload": {"currency": "EUR", "lines": [{"quantity": 1, "unit_cents": 5}], "discount": 5}}`)
	require.Equal(t, "payload.discount", r.Error.Field, "%+v", r)
	r = refusedField(t, api, "/api/v1/jobs", `{"type": "invoice.seen", "payload": {}}`)
	require.Equal(t, "payload.invoice", r.Error.Field, "%+v", r)
	r = refusedField(t, api, "/api/v1/jobs/batch", `{"jobs": [`+good+`, {"type": "invoice.total", "payload": {"currency": "EUR", "lines": []}}]}`)
	require.Equal(t, "jobs[1].payload.lines", r.Error.Field, "%+v", r)
	r = refusedField(t, api, "/api/v1/workflows", `{"jobs": [{"key": "a", "type": "invoice.seen", "payload": {"invoice": 7}}]}`)
	require.Equal(t, "jobs[0].payload.invoice", r.Error.Field, "%+v", r)

	var ti struct {
		Schema   json.RawMessage `json:"schema"`
		Versions []struct {
			Version int `json:"version"`
			By      struct {
				Source string `json:"source"`
			} `json:"by"`
		} `json:"versions"`
	}
	require.Equal(t, http.StatusOK, api.do(t, http.MethodGet, "/api/v1/types/invoice.total", nil, &ti))
	require.Contains(t, string(ti.Schema), `"currency"`)
	require.Len(t, ti.Versions, 1)
	require.Equal(t, "process", ti.Versions[0].By.Source)
	done := waitCompleted(t, api, job["id"].(string))
	require.Equal(t, 1.0, done["attempt"])
}

const reportSchemaV1 = `{"type": "object", "properties": {"account": {"type": "string", "minLength": 1},
	"months": {"type": "integer", "minimum": 1, "maximum": 24}}, "required": ["account"]}`

const reportSchemaV2 = `{"type": "object", "properties": {"account": {"type": "string", "minLength": 1},
	"months": {"type": "integer", "minimum": 1, "maximum": 12}, "format": {"enum": ["pdf", "csv"]}},
	"required": ["account", "format"]}`

// TestRemoteWorkerSchemaIsEnforcedByAnotherAPIProcess: a pull worker
// declares a schema registering at one API process; another refuses a
// payload that does not fit it; a newer worker's different schema is
// recorded as a new version and enforced there at once; a schema that is
// invalid or too large is refused at registration naming it.
func TestRemoteWorkerSchemaIsEnforcedByAnotherAPIProcess(t *testing.T) {
	t.Parallel()
	u := dbtest.NewDatabase(t)
	addrA, addrB := freeAddr(t), freeAddr(t)
	startFlint(t, "api", u, "FLINT_ADDR="+addrA)
	a, b := newAPIClient("http://"+addrA), newAPIClient("http://"+addrB)
	a.waitReady(t, 60*time.Second) // migrated
	startFlint(t, "api", u, "FLINT_ADDR="+addrB)
	b.waitReady(t, 60*time.Second)
	// B has loaded its catalog before anything registered.
	r := refusedField(t, b, "/api/v1/jobs", `{"type": "report.build", "payload": {}}`)
	require.Equal(t, "type", r.Error.Field)

	register := func(version, schema string) int {
		var out map[string]any
		return a.do(t, http.MethodPost, "/api/v1/workers", `{"name": "reports", "language": "python", "version": "`+version+
			`", "types": ["report.build"], "schemas": {"report.build": `+schema+`}}`, &out)
	}
	require.Equal(t, http.StatusCreated, register("1.0", reportSchemaV1))
	// B learns of the registration from A's notification, or, failing
	// that, from its own reload when a request names a type it does not
	// know, at most once a second (domain.Catalog): on a busy machine the
	// notification may come after the next request, so B may refuse for
	// up to that second.
	require.Eventually(t, func() bool {
		var job map[string]any
		return b.do(t, http.MethodPost, "/api/v1/jobs", `{"type": "report.build", "payload": {"account": "acme", "months": 20}}`, &job) == http.StatusCreated
	}, 10*time.Second, 50*time.Millisecond, "B never accepted the registered type")
	r = refusedField(t, b, "/api/v1/jobs", `{"type": "report.build", "payload": {"months": 3}}`)
	require.Equal(t, "payload.account", r.Error.Field, "%+v", r)
	r = refusedField(t, b, "/api/v1/jobs", `{"type": "report.build", "payload": {"account": "acme", "months": "three"}}`)
	require.Equal(t, "payload.months", r.Error.Field, "%+v", r)

	// The same schema again records nothing; a newer worker's change does.
	require.Equal(t, http.StatusCreated, register("1.0", reportSchemaV1))
	require.Equal(t, http.StatusCreated, register("2.0", reportSchemaV2))
	require.Eventually(t, func() bool {
		var refused apiError
		return b.do(t, http.MethodPost, "/api/v1/jobs", `{"type": "report.build", "payload": {"account": "acme", "months": 20, "format": "pdf"}}`,
			&refused) == http.StatusUnprocessableEntity && refused.Error.Field == "payload.months"
	}, 5*time.Second, 20*time.Millisecond, "B never enforced the newer schema")
	var ti struct {
		Versions []struct {
			Version int `json:"version"`
			By      struct {
				Source        string `json:"source"`
				WorkerName    string `json:"worker_name"`
				WorkerVersion string `json:"worker_version"`
			} `json:"by"`
		} `json:"versions"`
	}
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/api/v1/types/report.build", nil, &ti))
	require.Len(t, ti.Versions, 2)
	require.Equal(t, 2, ti.Versions[0].Version)
	require.Equal(t, "2.0", ti.Versions[0].By.WorkerVersion)
	require.Equal(t, "remote", ti.Versions[0].By.Source)

	// Bad schemas are refused at registration, naming them.
	for _, bad := range []string{`{"type": "strnig"}`, `{"$ref": "file:///etc/passwd"}`, `"object"`,
		`{"description": "` + strings.Repeat("x", 70<<10) + `"}`} {
		var refused apiError
		var out map[string]any
		require.Equal(t, http.StatusUnprocessableEntity, a.do(t, http.MethodPost, "/api/v1/workers",
			`{"types": ["report.build"], "schemas": {"report.build": `+bad+`}}`, &refused), "%.80s: %v", bad, out)
		require.Equal(t, "schemas.report.build", refused.Error.Field, "%+v", refused)
	}
	r = refusedField(t, a, "/api/v1/workers", `{"types": ["report.build"], "schemas": {"report.other": {}}}`)
	require.Equal(t, "schemas.report.other", r.Error.Field)
}

// TestPushQueueSchemaIsEnforcedByAnotherAPIProcess: a push queue's
// settings give a schema for a type its endpoint takes; another API
// process refuses a payload of that type that does not fit.
func TestPushQueueSchemaIsEnforcedByAnotherAPIProcess(t *testing.T) {
	t.Parallel()
	u := dbtest.NewDatabase(t)
	addrA, addrB := freeAddr(t), freeAddr(t)
	startFlint(t, "api", u, "FLINT_ADDR="+addrA, "FLINT_HTTP_ALLOW=127.0.0.1")
	a, b := newAPIClient("http://"+addrA), newAPIClient("http://"+addrB)
	a.waitReady(t, 60*time.Second) // migrated
	startFlint(t, "api", u, "FLINT_ADDR="+addrB)
	b.waitReady(t, 60*time.Second)

	var out map[string]any
	bad := `{"push": {"url": "http://127.0.0.1:9/hooks", "schemas": {"hook.ping": {"type": "nope"}}}}`
	var refused apiError
	require.Equal(t, http.StatusUnprocessableEntity, a.do(t, http.MethodPatch, "/api/v1/queues/hooks", bad, &refused))
	require.Equal(t, "push.schemas.hook.ping", refused.Error.Field, "%+v", refused)
	good := `{"push": {"url": "http://127.0.0.1:9/hooks", "schemas": {"hook.ping": {"type": "object",
		"properties": {"to": {"type": "string", "format": "uri"}, "count": {"type": "integer"}}, "required": ["to"]}}}}`
	require.Equal(t, http.StatusOK, a.do(t, http.MethodPatch, "/api/v1/queues/hooks", good, &out), "%v", out)
	require.Eventually(t, func() bool {
		var refused apiError
		return b.do(t, http.MethodPost, "/api/v1/jobs", `{"type": "hook.ping", "queue": "hooks", "payload": {"count": 1}}`,
			&refused) == http.StatusUnprocessableEntity && refused.Error.Field == "payload.to"
	}, 5*time.Second, 20*time.Millisecond, "B never enforced the push queue's schema")
	require.Equal(t, http.StatusCreated, b.do(t, http.MethodPost, "/api/v1/jobs", `{"type": "hook.ping", "queue": "hooks", "payload": {"to": "x"}}`, &out), "%v", out)
}
