package handlers_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/auth"
	"github.com/flinthq/flint/jobs"
)

// TestHTTPRequestCredentialsRedactedBelowAdmin: an http_request job's
// credential headers (and URL secrets) are shown redacted to viewers,
// operators and read keys on every view of the job, whole to admins; an
// operator's replay that leaves a redacted value as shown keeps the
// stored one.
func TestHTTPRequestCredentialsRedactedBelowAdmin(t *testing.T) {
	t.Parallel()
	r := accessSetup(t)
	payload := `{"url": "https://api.example/hook?token=QueryTok999", "method": "POST",
		"headers": {"Authorization": "Bearer SecretBearer123", "X-Api-Key": "SecretApiKey456", "Cookie": "sid=SecretCookie789", "Accept": "application/json"}}`
	res, err := r.store.Enqueue(r.ctx, jobs.EnqueueParams{Type: jobs.TypeHTTPRequest, Payload: json.RawMessage(payload)})
	require.NoError(t, err)
	id := res[0].Job.ID.String()
	_, err = r.store.Pool().Exec(r.ctx, `UPDATE jobs SET status = 'dead_letter', finished_at = now() WHERE id = $1`, id)
	require.NoError(t, err)
	secrets := []string{"SecretBearer123", "SecretApiKey456", "SecretCookie789", "QueryTok999"}

	views := map[string]string{}
	for _, role := range []auth.Role{auth.RoleViewer, auth.RoleOperator} {
		b := r.people[role]
		for _, path := range []string{"/jobs/" + id, "/jobs/" + id + "/live", "/jobs/" + id + "/payload.json", "/jobs/new?clone=" + id} {
			p := dashCall(t, b, http.MethodGet, path, nil)
			if p.status == http.StatusOK {
				views[string(role)+" "+path] = p.body
			}
		}
	}
	views["operator edit"] = dashCall(t, r.people[auth.RoleOperator], http.MethodGet, "/jobs/"+id+"/edit", nil).body
	for _, path := range []string{"/api/v1/jobs/" + id, "/api/v1/jobs?type=http_request", "/api/v1/dlq"} {
		res := apiCall(t, r.app, r.keys[auth.ScopeRead], http.MethodGet, path, "")
		require.Equal(t, http.StatusOK, res.status, path)
		views["read key "+path] = string(res.body)
	}
	require.GreaterOrEqual(t, len(views), 10)
	for name, body := range views {
		for _, s := range secrets {
			require.NotContains(t, body, s, name)
		}
		require.Contains(t, body, "REDACTED", name)
		require.Contains(t, body, "application/json", "%s: other headers are shown", name)
	}
	admin := dashCall(t, r.people[auth.RoleAdmin], http.MethodGet, "/jobs/"+id, nil).body
	for _, s := range secrets {
		require.Contains(t, admin, s, "admins see the payload whole")
	}

	// The operator replays with the payload as shown, changing one header:
	// the credentials it never saw are kept.
	op := r.people[auth.RoleOperator]
	shown := dashCall(t, op, http.MethodGet, "/jobs/"+id+"/payload.json", nil).body
	edited := strings.Replace(shown, "application/json", "text/plain", 1)
	p := dashCall(t, op, http.MethodPost, "/jobs/"+id+"/edit", url.Values{"step": {"replay"}, "payload": {edited}})
	require.Less(t, p.status, 400, p.body)
	j, err := r.store.GetJob(r.ctx, res[0].Job.ID)
	require.NoError(t, err)
	var got struct {
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
	}
	require.NoError(t, json.Unmarshal(j.Payload, &got))
	require.Equal(t, "Bearer SecretBearer123", got.Headers["Authorization"])
	require.Equal(t, "SecretApiKey456", got.Headers["X-Api-Key"])
	require.Equal(t, "text/plain", got.Headers["Accept"])
	require.Equal(t, "https://api.example/hook?token=QueryTok999", got.URL)

	// The replay's audit entry holds both payloads: shown redacted below
	// admin, on the job page and the audit trail, whole to admins.
	for name, body := range map[string]string{
		"viewer job page": dashCall(t, r.people[auth.RoleViewer], http.MethodGet, "/jobs/"+id, nil).body,
		"viewer audit":    dashCall(t, r.people[auth.RoleViewer], http.MethodGet, "/audit", nil).body,
		"read key audit":  string(apiCall(t, r.app, r.keys[auth.ScopeRead], http.MethodGet, "/api/v1/audit", "").body),
	} {
		for _, s := range secrets {
			require.NotContains(t, body, s, name)
		}
		require.Contains(t, body, "text/plain", "%s shows the replay's payloads", name)
	}
	require.Contains(t, dashCall(t, r.people[auth.RoleAdmin], http.MethodGet, "/audit", nil).body, "SecretBearer123")
}
