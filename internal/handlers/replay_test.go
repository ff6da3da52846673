package handlers_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// deadJob puts a job with payload in the dead-letter queue.
func deadJob(t *testing.T, store *db.Store, payload string) *jobs.Job {
	t.Helper()
	ctx := t.Context()
	zero := 0
	queue := "dlq-" + uuid.NewString()[:8]
	res, err := store.Enqueue(ctx, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: queue, MaxRetries: &zero, Payload: json.RawMessage(payload)})
	require.NoError(t, err)
	c, err := store.ClaimJobs(ctx, domain.ClaimParams{WorkerID: "w", Limit: 1, LeaseTTL: time.Minute, Queues: []string{queue}})
	require.NoError(t, err)
	require.Len(t, c, 1)
	_, _, err = store.FinishJobs(ctx, []domain.Finish{{Lease: domain.LeaseOf(c[0]), Outcome: domain.OutcomeFailed, Error: "boom"}})
	require.NoError(t, err)
	return res[0].Job
}

func TestReplayAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := deadJob(t, b.store, `{"n":1}`)
	path := "/api/v1/jobs/" + j.ID.String() + "/replay"

	for _, tc := range []struct {
		body   string
		status int
		field  string
	}{
		{`{}`, http.StatusUnprocessableEntity, "payload"},
		{`{"payload": null}`, http.StatusUnprocessableEntity, "payload"},
		{`{"payload": [1,2]}`, http.StatusUnprocessableEntity, "payload"},
		{`{"payload": {"n":1}, "extra": true}`, http.StatusUnprocessableEntity, "extra"},
		{`{"payload": `, http.StatusBadRequest, ""},
	} {
		r := b.do(t, http.MethodPost, path, "application/json", tc.body)
		require.Equal(t, tc.status, r.status, "%s: %s", tc.body, r.body)
		if tc.field != "" {
			require.Equal(t, tc.field, r.json(t)["error"].(map[string]any)["field"], tc.body)
		}
	}
	r := b.do(t, http.MethodPost, path, "application/json", `{"payload": {"n": 2}}`)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	m := r.json(t)
	require.Equal(t, "queued", m["job"].(map[string]any)["status"])
	require.Equal(t, map[string]any{"n": float64(1)}, m["payload_before"])
	got, err := b.store.GetJob(b.ctx, j.ID)
	require.NoError(t, err)
	require.JSONEq(t, `{"n": 2}`, string(got.Payload))

	// Queued now, not in the DLQ: 409 with the reason.
	r = b.do(t, http.MethodPost, path, "application/json", `{"payload": {"n": 3}}`)
	require.Equal(t, http.StatusConflict, r.status, string(r.body))
	require.Contains(t, r.json(t)["error"].(map[string]any)["message"], "is queued")
	r = b.do(t, http.MethodPost, "/api/v1/jobs/"+uuid.NewString()+"/replay", "application/json", `{"payload": {}}`)
	require.Equal(t, http.StatusNotFound, r.status)
}

// The dashboard's edit and replay: editor, diff to confirm, replay, and
// the audit trail keeps the old payload.
func TestReplayInTheDashboard(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	j := deadJob(t, b.store, `{"to":"old@example.com","n":1}`)
	base := "/jobs/" + j.ID.String()

	p := b.request(t, http.MethodGet, base, nil)
	require.Contains(t, p.body, `data-testid="action-edit-replay"`)
	p = b.request(t, http.MethodGet, base+"/edit", nil)
	require.Equal(t, http.StatusOK, p.status)
	require.Contains(t, p.body, "old@example.com")

	// Bad JSON comes back with the error and the text kept.
	p = b.hx(t, http.MethodPost, base+"/edit", url.Values{"step": {"preview"}, "payload": {`{"to": `}}, "replay-form")
	require.Equal(t, http.StatusUnprocessableEntity, p.status)
	require.Contains(t, p.body, "not valid JSON")
	require.Contains(t, p.body, `{&#34;to&#34;: `)

	// A preview shows the change line by line and changes nothing yet.
	evil := `{"to":"<script>xssmark()</script>","n":1}`
	p = b.hx(t, http.MethodPost, base+"/edit", url.Values{"step": {"preview"}, "payload": {evil}}, "replay-form")
	require.Equal(t, http.StatusOK, p.status)
	checkNoInjection(t, "preview", p.body)
	doc, err := html.Parse(strings.NewReader(p.body))
	require.NoError(t, err)
	diff := findAll(doc, func(n *html.Node) bool { return attr(n, "data-testid") == "replay-diff" })
	require.Len(t, diff, 1)
	var dels, adds []string
	for _, n := range findAll(diff[0], func(n *html.Node) bool { return n.Data == "span" }) {
		switch attr(n, "class") {
		case "diff-del":
			dels = append(dels, textOf(n))
		case "diff-add":
			adds = append(adds, textOf(n))
		}
	}
	require.Equal(t, []string{`-   "to": "old@example.com"`}, dels)
	require.Equal(t, []string{`+   "to": "<script>xssmark()</script>"`}, adds)
	require.Equal(t, jobs.StateDeadLetter, mustJob(t, b.store, j.ID).Status)

	// Confirm: replayed, redirected to the job, old payload on the trail.
	p = b.hx(t, http.MethodPost, base+"/edit", url.Values{"step": {"replay"}, "payload": {evil}}, "replay-form")
	require.Equal(t, http.StatusNoContent, p.status)
	require.Equal(t, base, p.header.Get("HX-Redirect"))
	got := mustJob(t, b.store, j.ID)
	require.NotEqual(t, jobs.StateDeadLetter, got.Status)
	require.JSONEq(t, evil, string(got.Payload))
	entries, err := b.store.ListAudit(b.ctx, domain.AuditQuery{JobID: &j.ID})
	require.NoError(t, err)
	require.Equal(t, domain.AuditEditReplay, entries[0].Action)
	require.Equal(t, adminEmail, entries[0].Actor)
	require.Contains(t, string(entries[0].Details), "old@example.com")

	// Once out of the DLQ, the form refuses.
	p = b.hx(t, http.MethodPost, base+"/edit", url.Values{"step": {"replay"}, "payload": {`{}`}}, "replay-form")
	require.Equal(t, http.StatusUnprocessableEntity, p.status)
	require.Contains(t, p.body, "Only a job in the dead-letter queue can be edited and replayed")
}

func mustJob(t *testing.T, s *db.Store, id uuid.UUID) *jobs.Job {
	t.Helper()
	j, err := s.GetJob(t.Context(), id)
	require.NoError(t, err)
	return j
}
