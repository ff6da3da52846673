package handlers_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestListJobsSorted: GET /api/v1/jobs takes the orders the dashboard's
// Jobs list offers (?sort=), pages each by its own cursor, and refuses
// another order naming the ones it takes.
func TestListJobsSorted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Four jobs created a, b, c, d; they started c, a, d, b and finished
	// a, c, b; d has not finished.
	var ids []string
	for range 4 {
		r := b.post(t, "/api/v1/jobs", `{"type": "noop", "queue": "sorted", "delay_seconds": 3600}`)
		require.Equal(t, http.StatusCreated, r.status, string(r.body))
		var j struct{ ID string }
		require.NoError(t, json.Unmarshal(r.body, &j))
		ids = append(ids, j.ID)
	}
	a, bb, c, d := ids[0], ids[1], ids[2], ids[3]
	now := time.Now()
	for _, s := range []struct {
		id                string
		started, finished time.Duration
	}{{c, 9 * time.Minute, 5 * time.Minute}, {a, 8 * time.Minute, 7 * time.Minute}, {bb, 6 * time.Minute, time.Minute}} {
		_, err := b.store.Pool().Exec(b.ctx, `UPDATE jobs SET status = 'completed', started_at = $2, finished_at = $3 WHERE id = $1`,
			s.id, now.Add(-s.started), now.Add(-s.finished))
		require.NoError(t, err)
	}
	// d ran once and waits for its retry.
	_, err := b.store.Pool().Exec(b.ctx, `UPDATE jobs SET attempt = 1, started_at = $2 WHERE id = $1`, d, now.Add(-7*time.Minute))
	require.NoError(t, err)

	// list reads every page of the order, two jobs a page.
	list := func(sort string) []string {
		t.Helper()
		var got []string
		cursor := ""
		for range 5 {
			r := b.do(t, http.MethodGet, "/api/v1/jobs?queue=sorted&limit=2&sort="+sort+"&cursor="+cursor, "", "")
			require.Equal(t, http.StatusOK, r.status, string(r.body))
			var page struct {
				Jobs       []struct{ ID string }
				NextCursor *string `json:"next_cursor"`
			}
			require.NoError(t, json.Unmarshal(r.body, &page))
			for _, j := range page.Jobs {
				got = append(got, j.ID)
			}
			if page.NextCursor == nil {
				return got
			}
			cursor = *page.NextCursor
		}
		t.Fatalf("sort=%s: more pages than jobs", sort)
		return nil
	}
	require.Equal(t, []string{d, c, bb, a}, list(""), "newest first by default")
	require.Equal(t, []string{d, c, bb, a}, list("created"))
	require.Equal(t, []string{a, bb, c, d}, list("oldest"))
	require.Equal(t, []string{bb, d, a, c}, list("started"))
	require.Equal(t, []string{c, a, d, bb}, list("started_oldest"))
	require.Equal(t, []string{d, bb, c, a}, list("finished"), "the unfinished first, then the latest to finish")
	require.Equal(t, []string{a, c, bb, d}, list("finished_oldest"), "the unfinished last")

	// A cursor continues its own order only.
	r := b.do(t, http.MethodGet, "/api/v1/jobs?queue=sorted&limit=1&sort=started", "", "")
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	var first struct {
		NextCursor string `json:"next_cursor"`
	}
	require.NoError(t, json.Unmarshal(r.body, &first))
	r = b.do(t, http.MethodGet, "/api/v1/jobs?queue=sorted&sort=finished&cursor="+first.NextCursor, "", "")
	require.Equal(t, http.StatusUnprocessableEntity, r.status, string(r.body))
	require.Equal(t, "cursor", r.json(t)["error"].(map[string]any)["field"])

	r = b.do(t, http.MethodGet, "/api/v1/jobs?sort=size", "", "")
	require.Equal(t, http.StatusUnprocessableEntity, r.status, string(r.body))
	e := r.json(t)["error"].(map[string]any)
	require.Equal(t, "validation_failed", e["code"])
	require.Equal(t, "sort", e["field"])
	require.Equal(t, `unknown order "size"; use one of created, oldest, started, started_oldest, finished, finished_oldest`, e["message"])
}
