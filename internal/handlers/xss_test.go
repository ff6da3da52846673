package handlers_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/views"
	"github.com/flinthq/flint/jobs"
)

// xssCorpus are strings an attacker might place in a job's payload, error,
// result, idempotency key, type or worker id. Each carries the marker
// "xssmark" so the test can tell where it ended up.
var xssCorpus = []string{
	`<script>alert("xssmark1")</script>`,
	`"><img src=x onerror=alert('xssmark2')>`,
	`' onmouseover='alert(1)' data-xssmark3='`,
	`<svg onload=alert("xssmark4")>`,
	`</textarea></pre><script>xssmark5</script>`,
	`" hx-get="/jobs/bulk?xssmark6" hx-trigger="load`,
	`<div hx-post="/logout" hx-trigger="load">xssmark7</div>`,
	`javascript:alert('xssmark8')`,
	`<a href="javascript:alert(1)">xssmark9</a>`,
	`{{.}}<!--xssmark10--><base href="//evil">`,
	`<iframe srcdoc="<script>parent.xssmark11()</script>">`,
	`&lt;script&gt;xssmark12&lt;/script&gt; & <b sse-swap="x">xssmark13</b>`,
	"\u2028<style>body{display:none}</style>xssmark14",
}

// allowedTags are the elements Flint's templates produce.
var allowedTags = map[string]bool{}

func init() {
	for _, t := range strings.Fields(`html head meta title link script body header div a span nav form input button
		main label select option textarea h1 h2 p table thead tbody tr th td time pre dl dt dd ol li section svg defs
		marker path rect text line g title datalist br strong code i ul small progress colgroup col fieldset legend
		details summary b`) {
		allowedTags[t] = true
	}
}

// checkNoInjection parses a page and fails if anything from the corpus
// became markup: an element, an event handler, an HTMX or SSE attribute, or
// a javascript: URL. Text containing the corpus is fine: that is escaping.
func checkNoInjection(t require.TestingT, name, body string) {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	doc, err := html.Parse(strings.NewReader(body))
	require.NoError(t, err)
	scripts := 0
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			require.True(t, allowedTags[n.Data], "%s: unexpected element <%s>", name, n.Data)
			if n.Data == "script" {
				scripts++
				src := ""
				for _, a := range n.Attr {
					if a.Key == "src" {
						src = a.Val
					}
				}
				require.True(t, strings.HasPrefix(src, "/static/"), "%s: a script that is not ours", name)
				require.Nil(t, n.FirstChild, "%s: inline script", name)
			}
			for _, a := range n.Attr {
				key := strings.ToLower(a.Key)
				require.False(t, strings.HasPrefix(key, "on"), "%s: event handler attribute %s", name, a.Key)
				require.NotContains(t, key, "xssmark", "%s: attribute name from job data", name)
				if strings.HasPrefix(key, "hx-") || strings.HasPrefix(key, "sse-") || key == "href" || key == "src" || key == "action" {
					require.NotContains(t, a.Val, "xssmark", "%s: %s=%q carries job data", name, a.Key, a.Val)
					require.False(t, strings.HasPrefix(strings.ToLower(strings.TrimSpace(a.Val)), "javascript:"), "%s: javascript URL", name)
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	require.LessOrEqual(t, scripts, 4, "%s: more scripts than the layout's htmx and three of ours", name)
}

// TestXSSCorpus puts every corpus string everywhere job data is shown and
// renders every page and partial that shows it.
func TestXSSCorpus(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	var ids []uuid.UUID
	for i, evil := range xssCorpus {
		payload := fmt.Sprintf(`{"note": %q, %q: 1}`, evil, evil)
		j := b.enqueue(t, jobs.EnqueueParams{Type: "noop", Payload: []byte(payload), IdempotencyKey: fmt.Sprintf("k%d %s", i, evil)})
		ids = append(ids, j.ID)
		// Run it and fail it with the corpus as the error, from a worker
		// named with the corpus too.
		_, err := b.store.Pool().Exec(b.ctx, `UPDATE jobs SET queue = $2 WHERE id = $1`, j.ID, fmt.Sprintf("q%d", i))
		require.NoError(t, err)
		claimed, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: "w " + evil, Queues: []string{fmt.Sprintf("q%d", i)}, Limit: 1, LeaseTTL: time.Minute})
		require.NoError(t, err)
		require.Len(t, claimed, 1)
		zero := 0
		_ = zero
		outcome := domain.OutcomeFailed
		if i%2 == 0 {
			outcome = domain.OutcomeCancelled
		}
		_, _, err = b.store.FinishJobs(b.ctx, []domain.Finish{{Lease: domain.LeaseOf(claimed[0]), Outcome: outcome, Error: evil, RetryDelay: time.Hour}})
		require.NoError(t, err)
	}
	// A job whose type and result carry the corpus, written past the API's
	// validation as a compromised database might hold it.
	evilType := uuid.Must(uuid.NewV7())
	_, err := b.store.Pool().Exec(b.ctx, `INSERT INTO jobs (id, type, effective_priority, status, result, last_error)
		VALUES ($1, $2, 2, 'completed', $3::jsonb, $2)`, evilType, xssCorpus[1]+xssCorpus[6], fmt.Sprintf(`{"r": %q}`, xssCorpus[0]))
	require.NoError(t, err)
	ids = append(ids, evilType)

	// A payload schema whose field names, descriptions and choices, and
	// whose author, carry the corpus.
	props := map[string]any{}
	for i, evil := range xssCorpus {
		props[fmt.Sprintf("f%d%s", i, evil)] = map[string]any{"type": "string", "description": evil, "enum": []string{evil}}
	}
	for v, required := range [][]string{{}, {fmt.Sprintf("f0%s", xssCorpus[0])}} {
		raw, err := json.Marshal(map[string]any{"type": "object", "properties": props, "title": xssCorpus[0], "required": required})
		require.NoError(t, err)
		sch, err := jobs.CompileSchema(raw)
		require.NoError(t, err)
		_, err = b.store.RecordSchemas(b.ctx, map[string]*jobs.PayloadSchema{"noop": sch}, domain.SchemaAuthor{Source: domain.SchemaFromRemote,
			WorkerName: fmt.Sprint(xssCorpus[2], v), Language: xssCorpus[3], WorkerVersion: xssCorpus[4]})
		require.NoError(t, err)
	}

	pages := []string{"/", "/jobs", "/jobs?q=alert", "/dlq", "/types/noop", "/jobs/new?type=noop"}
	for _, id := range ids {
		pages = append(pages, "/jobs/"+id.String(), "/jobs/new?clone="+id.String())
	}
	for _, path := range pages {
		p := b.request(t, http.MethodGet, path, nil)
		require.Equal(t, http.StatusOK, p.status, path)
		checkNoInjection(t, path, p.body)
	}
	for _, id := range ids {
		p := b.hx(t, http.MethodGet, "/jobs/"+id.String()+"/live", nil, "job-live")
		checkNoInjection(t, "live "+id.String(), p.body)
		// The row the live stream sends.
		j, err := b.store.GetJob(b.ctx, id)
		require.NoError(t, err)
		var buf bytes.Buffer
		require.NoError(t, views.JobRow(j, "jobs", time.Now()).Render(b.ctx, &buf))
		checkNoInjection(t, "row "+id.String(), "<table><tbody>"+buf.String()+"</tbody></table>")
	}
	// The corpus is on the pages, as text.
	detail := b.request(t, http.MethodGet, "/jobs/"+ids[0].String(), nil)
	require.Contains(t, detail.body, "&lt;script&gt;alert(&#34;xssmark1&#34;)&lt;/script&gt;")
}

// probe is a require.TestingT that records a failure instead of failing.
type probe struct{ failed bool }

type stop struct{}

func (p *probe) Errorf(string, ...any) { p.failed = true }
func (p *probe) FailNow()              { p.failed = true; panic(stop{}) }

// TestCheckerCatchesInjection proves the checker fails on real injection,
// so a passing TestXSSCorpus means something.
func TestCheckerCatchesInjection(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		`<div><img src=x onerror=alert(1)></div>`,
		`<div hx-get="/x?xssmark"></div>`,
		`<a href="javascript:alert(1)">x</a>`,
		`<script>alert(1)</script>`,
		`<marquee>x</marquee>`,
	} {
		p := &probe{}
		func() {
			defer func() {
				if r := recover(); r != nil {
					if _, ok := r.(stop); !ok {
						panic(r)
					}
				}
			}()
			checkNoInjection(p, "probe", bad)
		}()
		require.True(t, p.failed, "the checker must reject %s", bad)
	}
	ok := &probe{}
	checkNoInjection(ok, "probe", `<div>&lt;script&gt;xssmark&lt;/script&gt;</div>`)
	require.False(t, ok.failed, "escaped text is fine")
}
