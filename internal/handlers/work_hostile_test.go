package handlers_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/jobs"
)

// TestFinishBadResultFailsOnlyItsJob: a result PostgreSQL cannot store
// (invalid UTF-8, a lone surrogate) fails its own job with the reason;
// the other outcomes of the request are applied as sent.
func TestFinishBadResultFailsOnlyItsJob(t *testing.T) {
	t.Parallel()
	r := workSetup(t)
	id := r.register(t, apiKey, `{"types": ["py.x"]}`)
	r.enqueue(t, jobs.EnqueueParams{Type: "py.x"}, jobs.EnqueueParams{Type: "py.x"}, jobs.EnqueueParams{Type: "py.x"})
	var got claimed
	require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodPost, "/api/v1/workers/"+id+"/claim", `{"max": 3}`, &got))
	require.Len(t, got.Jobs, 3)
	outcome := func(i int, result string) string {
		return `{"job_id": "` + got.Jobs[i].ID.String() + `", "lease_token": "` + got.Jobs[i].LeaseToken.String() +
			`", "status": "completed", "result": ` + result + `}`
	}
	body := `{"outcomes": [` + outcome(0, `{"ok": 1}`) + `, ` + outcome(1, "{\"x\": \"\xff\xfe\"}") + `, ` + outcome(2, `{"x": "\ud800"}`) + `]}`
	var out struct {
		Outcomes []struct {
			OK      bool   `json:"ok"`
			Error   string `json:"error"`
			Message string `json:"message"`
		} `json:"outcomes"`
	}
	require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodPost, "/api/v1/workers/"+id+"/finish", body, &out))
	require.Len(t, out.Outcomes, 3)
	require.True(t, out.Outcomes[0].OK)
	require.Equal(t, jobs.StateCompleted, r.job(t, got.Jobs[0].ID).Status)
	for i, want := range map[int]string{1: "not valid UTF-8", 2: "lone UTF-16 surrogate"} {
		require.False(t, out.Outcomes[i].OK)
		require.Equal(t, "result_refused", out.Outcomes[i].Error)
		require.Contains(t, out.Outcomes[i].Message, want)
		j := r.job(t, got.Jobs[i].ID)
		require.Equal(t, jobs.StateScheduled, j.Status, "failed, to be retried")
		require.Contains(t, *j.LastError, "the worker's result was refused")
		require.Contains(t, *j.LastError, want)
	}
}
