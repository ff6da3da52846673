package handlers_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/auth"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// TestKnownTypesBounded: a work key cannot grow the job types Flint
// knows without bound: a worker may serve at most 200, registering past
// domain.MaxKnownTypes in all is refused, and an unknown type's 422 stays
// short however many are known, suggesting the few most like it.
func TestKnownTypesBounded(t *testing.T) {
	t.Parallel()
	r := workSetup(t)
	_, key, err := r.store.CreateAPIKey(r.ctx, auth.KeySpec{Name: "w", Scopes: []auth.Scope{auth.ScopeWork}}, "test")
	require.NoError(t, err)
	typesOf := func(worker, n int) string {
		ts := make([]string, n)
		for i := range ts {
			ts[i] = fmt.Sprintf("tenant%02d.report.%03d", worker, i)
		}
		b, _ := json.Marshal(map[string]any{"types": ts})
		return string(b)
	}
	var e errBody
	require.Equal(t, http.StatusUnprocessableEntity, r.call(t, key, http.MethodPost, "/api/v1/workers", typesOf(0, 201), &e))
	require.Equal(t, "types", e.Error.Field)
	registered, refused := 0, false
	for w := 0; w < domain.MaxKnownTypes/200+1 && !refused; w++ {
		status := r.call(t, key, http.MethodPost, "/api/v1/workers", typesOf(w, 200), &e)
		if refused = status == http.StatusConflict; refused {
			require.Equal(t, "too_many_types", e.Error.Code)
			require.Equal(t, "types", e.Error.Field)
			continue
		}
		require.Equal(t, http.StatusCreated, status, "%+v", e)
		registered++
	}
	// The built-in types count too: registrations stop within one worker
	// of the limit, never past it.
	require.True(t, refused)
	require.LessOrEqual(t, registered*200, domain.MaxKnownTypes)
	require.Greater(t, registered*200, domain.MaxKnownTypes-200-len(jobs.NewRegistry().Types())-10)
	// A worker serving types already known still registers.
	require.Equal(t, http.StatusCreated, r.call(t, key, http.MethodPost, "/api/v1/workers", typesOf(3, 200), nil))

	req := `{"type": "tenant03.reprt.007"}`
	require.Equal(t, http.StatusUnprocessableEntity, r.call(t, apiKey, http.MethodPost, "/api/v1/jobs", req, &e))
	body, _ := json.Marshal(e)
	require.Less(t, len(body), 1024, "the refusal lists no types but a few like it: %s", body)
	require.Equal(t, "type", e.Error.Field)
	require.Contains(t, e.Error.Message, "did you mean tenant03.report.007")
	require.Contains(t, e.Error.Message, "types are known")
}
