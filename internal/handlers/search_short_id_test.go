package handlers_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestShortIDFindsItsJob: the eight characters the dashboard prints of a
// job's id, given as the search, find that job over the API (and so in
// the dashboard's lists, which search the same way).
func TestShortIDFindsItsJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ids []string
	for range 3 {
		r := b.post(t, "/api/v1/jobs", `{"type": "noop"}`)
		require.Equal(t, http.StatusCreated, r.status, string(r.body))
		var j struct{ ID string }
		require.NoError(t, json.Unmarshal(r.body, &j))
		ids = append(ids, j.ID)
	}
	short := ids[1][len(ids[1])-8:]
	r := b.do(t, http.MethodGet, "/api/v1/jobs?q="+short, "", "")
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	var page struct{ Jobs []struct{ ID string } }
	require.NoError(t, json.Unmarshal(r.body, &page))
	require.Len(t, page.Jobs, 1)
	require.Equal(t, ids[1], page.Jobs[0].ID)
}
