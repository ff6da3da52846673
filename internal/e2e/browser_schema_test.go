package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db/dbtest"
)

const browserSchemaV1 = `{"type": "object", "required": ["account"], "properties": {
	"account": {"type": "string", "minLength": 1, "description": "the customer's account"},
	"months": {"type": "integer", "minimum": 1, "maximum": 24},
	"draft": {"type": "boolean"},
	"filters": {"type": "object"}}}`

const browserSchemaV2 = `{"type": "object", "required": ["account", "format"], "properties": {
	"account": {"type": "string", "minLength": 1, "description": "the customer's account"},
	"months": {"type": "integer", "minimum": 1, "maximum": 24},
	"format": {"enum": ["pdf", "csv"]},
	"draft": {"type": "boolean"},
	"filters": {"type": "object"}}}`

// TestPayloadSchemaInABrowser: a worker declares a type's schema, a newer
// one changes it; the create form offers the type's fields (typed inputs,
// required ones marked) beside the raw JSON editor, shows a refusal next
// to its field, and creates the job from fields and JSON together; the
// type's page shows the schema, both versions with what changed, the
// worker and the job.
//
//flint:long a browser scenario: one operator's session, step after step, reads best top to bottom
func TestPayloadSchemaInABrowser(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	addr := freeAddr(t)
	startFlint(t, "serve", dbtest.NewDatabase(t), "FLINT_ADDR="+addr,
		"FLINT_ADMIN_EMAIL=ops@example.com", "FLINT_ADMIN_PASSWORD=browser-test-pw")
	base := "http://" + addr
	api := newAPIClient(base)
	api.waitReady(t, 60*time.Second)
	var reg struct {
		ID string `json:"id"`
	}
	for _, v := range []struct{ version, schema string }{{"1.0", browserSchemaV1}, {"2.0", browserSchemaV2}} {
		require.Equal(t, http.StatusCreated, api.do(t, http.MethodPost, "/api/v1/workers", `{"name": "reports", "language": "python",
			"version": "`+v.version+`", "types": ["report.build"], "schemas": {"report.build": `+v.schema+`}}`, &reg))
	}
	// The newer worker heartbeats, so that it stays among the live ones.
	beatCtx, stopBeats := context.WithCancel(context.Background())
	beats := make(chan struct{})
	go func() {
		defer close(beats)
		for beatCtx.Err() == nil {
			api.do(t, http.MethodPost, "/api/v1/workers/"+reg.ID+"/heartbeat", `{"leases": []}`, nil)
			select {
			case <-beatCtx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	t.Cleanup(func() { stopBeats(); <-beats })

	signIn(t, ctx, base)
	fieldsReady := chromedp.WaitVisible(chromedp.CSS(`[data-testid="schema-fields"][data-type="report.build"] [data-testid="schema-field"]`))
	within(t, ctx, 20*time.Second, chromedp.EmulateViewport(1400, 900), chromedp.Navigate(base+"/jobs/new?type=report.build"), fieldsReady)
	type field struct{ Name, Kind string }
	fieldsJS := `[...document.querySelectorAll('[data-testid="schema-field"]')].map(f => ({Name: f.dataset.field, Kind: f.dataset.kind}))`
	require.Equal(t, []field{{"account", "string"}, {"months", "integer"}, {"format", "enum"}, {"draft", "boolean"}, {"filters", "json"}},
		eval[[]field](t, ctx, fieldsJS), "the fields of the newer schema, in its order")
	require.Equal(t, []string{"account", "format"}, eval[[]string](t, ctx,
		`[...document.querySelectorAll('[data-testid="schema-field"]')].filter(f => f.querySelector('[data-testid="schema-required"]')).map(f => f.dataset.field)`))
	require.Equal(t, "number", eval[string](t, ctx, `document.getElementById('pf-months').type`))
	require.Equal(t, []string{"", "pdf", "csv"}, eval[[]string](t, ctx, `[...document.getElementById('pf-format').options].map(o => o.value)`))
	require.True(t, eval[bool](t, ctx, `!!document.getElementById('f-payload')`), "the raw JSON editor is still there")
	shoot(t, ctx, "create-schema-form")

	// Another type has no schema: its fields go; back again, they return.
	setType := func(typ string) {
		require.True(t, eval[bool](t, ctx, `(() => { const s = document.getElementById('f-type'); s.value = `+jsString(typ)+`;
			s.dispatchEvent(new Event('change', {bubbles: true})); return true; })()`))
	}
	setType("noop")
	waitJS(t, ctx, `(() => { const f = document.getElementById('schema-fields'); return f && f.dataset.type === 'noop' && f.hidden; })()`, 10*time.Second)
	setType("report.build")
	within(t, ctx, 10*time.Second, fieldsReady)

	// A value the schema refuses is shown next to its field.
	typeInto(t, ctx, "#pf-account", "acme")
	typeInto(t, ctx, "#pf-months", "30")
	require.True(t, eval[bool](t, ctx, `(() => { document.getElementById('pf-format').value = 'pdf'; return true; })()`))
	require.True(t, eval[bool](t, ctx, `(() => { const p = document.getElementById('f-payload'); p.value = '{"note": "from the JSON editor"}'; return true; })()`))
	click(t, ctx, `[data-testid="create-submit"]`)
	within(t, ctx, 10*time.Second, chromedp.WaitVisible(chromedp.CSS(`[data-testid="error-pf.months"]`)))
	require.Contains(t, eval[string](t, ctx, `document.querySelector('[data-testid="error-pf.months"]').textContent`), "maximum")
	require.Equal(t, "acme", eval[string](t, ctx, `document.getElementById('pf-account').value`), "what was typed stays")
	shoot(t, ctx, "create-schema-refused")

	// Fixed, the job is created from the fields and the JSON together.
	require.True(t, eval[bool](t, ctx, `(() => { document.getElementById('pf-months').value = '6'; return true; })()`))
	click(t, ctx, `[data-testid="create-submit"]`)
	waitJS(t, ctx, `/^\/jobs\/[0-9a-f-]{36}$/.test(location.pathname)`, 10*time.Second)
	id := eval[string](t, ctx, `location.pathname.split('/').pop()`)
	var job struct {
		Payload map[string]any `json:"payload"`
	}
	require.Equal(t, http.StatusOK, api.do(t, http.MethodGet, "/api/v1/jobs/"+id, nil, &job))
	require.Equal(t, map[string]any{"account": "acme", "months": 6.0, "format": "pdf", "note": "from the JSON editor"}, job.Payload)

	// The type's page, reached from the job's.
	within(t, ctx, 10*time.Second, chromedp.WaitVisible(chromedp.CSS(`[data-testid="job-type-link"]`)))
	click(t, ctx, `[data-testid="job-type-link"]`)
	within(t, ctx, 10*time.Second, chromedp.WaitVisible(chromedp.CSS(`[data-testid="type-schema"]`)))
	require.Equal(t, "report.build", eval[string](t, ctx, `document.querySelector('[data-testid="type-name"]').textContent.trim()`))
	require.Equal(t, []string{"account", "months", "format", "draft", "filters"}, eval[[]string](t, ctx,
		`[...document.querySelectorAll('[data-testid="type-field"]')].map(r => r.dataset.field)`))
	require.Equal(t, 2, eval[int](t, ctx, `document.querySelectorAll('[data-testid="type-field-required"]').length`))
	type version struct{ Version, By, Change string }
	versions := eval[[]version](t, ctx, `[...document.querySelectorAll('[data-testid="type-version"]')].map(r => ({Version: r.dataset.version,
		By: r.querySelector('[data-testid="type-version-by"]').textContent.trim(), Change: r.querySelector('[data-testid="type-version-change"]').textContent.trim()}))`)
	require.Len(t, versions, 2)
	require.Equal(t, "2", versions[0].Version)
	require.Equal(t, "python worker reports (version 2.0)", versions[0].By)
	require.Equal(t, "added format", versions[0].Change)
	require.Equal(t, "first version", versions[1].Change)
	require.True(t, strings.Contains(eval[string](t, ctx, `document.querySelector('[data-testid="type-workers"]').textContent`), "reports"))
	require.Equal(t, []string{"/jobs/" + id}, eval[[]string](t, ctx,
		`[...document.querySelectorAll('[data-testid="type-jobs"] [data-testid="job-row"] a')].map(a => a.getAttribute('href')).filter(h => h.startsWith('/jobs/'))`))
	shoot(t, ctx, "type-page")
}
