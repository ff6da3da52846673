package handlers_test

import (
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/views"
)

// allocated returns the bytes the whole process allocated while f ran.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestHostileRequestsAllocateLittle: no request of the hostile-input
// corpus (malformedRequests) makes the server allocate more than a few
// times its own size beyond what the cheapest refusal costs. It measures the whole
// process, so it does not call t.Parallel: Go runs it before any parallel
// test of the package resumes.
func TestHostileRequestsAllocateLittle(t *testing.T) {
	b := setup(t)
	// The floor: what the cheapest refusals cost (a missing key, a bad
	// field, an unknown route), each measured after a first call warmed
	// the caches.
	var floor uint64
	for _, tc := range []malformedRequest{
		{path: "/api/v1/jobs", body: `{"type":"noop"}`, noKey: true},
		{path: "/api/v1/jobs", body: `{"type":"noop","priority":9}`},
		{method: http.MethodGet, path: "/api/v1/nope"},
	} {
		sendMalformed(t, b, tc)
		for range 3 {
			floor = max(floor, allocated(func() { sendMalformed(t, b, tc) }))
		}
	}
	t.Logf("the cheapest refusals allocate up to %d bytes", floor)
	for _, tc := range malformedRequests() {
		size := uint64(len(tc.body) + len(tc.path))
		// What the test's own plumbing costs for a body this size (app.Test
		// copies the request twice), from a request refused before the
		// body is read.
		// The least of five runs of each: pools (fasthttp's body buffers)
		// hand out a buffer on some runs and not on others.
		plumbing, got := uint64(1<<63), uint64(1<<63)
		for range 5 {
			plumbing = min(plumbing, allocated(func() {
				sendMalformed(t, b, malformedRequest{path: "/api/v1/jobs", contentType: "text/plain", body: tc.body})
			}))
			got = min(got, allocated(func() { sendMalformed(t, b, tc) }))
		}
		server := got - min(got, plumbing)
		t.Logf("%-40s %8d bytes sent, %9d allocated by the server (%.1fx the request)", tc.name, size, server, float64(server)/float64(size))
		// encoding/json's decoder copies a body into a buffer it grows by
		// doubling: 4-6 times a large body's size.
		require.LessOrEqual(t, server, floor+8*size, "%s: %d bytes sent made the server allocate %d", tc.name, size, server)
	}
}

// TestHostilePayloadPagesBounded: a job whose payload made it into the
// database past today's checks (nesting 9,990 deep, the shape that cost
// 200 MB to show) and one within them that indents a thousandfold (a
// megabyte nested 64 deep) each show in bounded pages, and the cut one
// links to its raw JSON, served whole. Not parallel: it measures
// allocations of the whole process.
func TestHostilePayloadPagesBounded(t *testing.T) {
	b := dashSetup(t)
	deep := `{"a":` + strings.Repeat("[", 9990) + strings.Repeat("]", 9990) + `}`
	wide := `{"a":` + strings.Repeat("[", 63) + strings.TrimSuffix(strings.Repeat("0,", 500_000), ",") + strings.Repeat("]", 63) + `}`
	insert := func(payload string) uuid.UUID {
		id := uuid.Must(uuid.NewV7())
		_, err := b.store.Pool().Exec(b.ctx, `INSERT INTO jobs (id, type, effective_priority, status, payload) VALUES ($1, 'noop', 2, 'queued', $2::jsonb)`, id, payload)
		require.NoError(t, err)
		return id
	}
	plain := insert(`{"a": 1}`)
	view := func(id uuid.UUID, path string) (size int) {
		p := b.request(t, http.MethodGet, "/jobs/"+id.String()+path, nil)
		require.Equal(t, http.StatusOK, p.status)
		return len(p.body)
	}
	view(plain, "")
	var floor uint64
	floorBody := 0
	for range 3 {
		floor = max(floor, allocated(func() { floorBody = view(plain, "") }))
	}
	t.Logf("the page of a small job: %d bytes, %d allocated", floorBody, floor)
	for _, tc := range []struct{ name, payload string }{{"9990 deep", deep}, {"1 MB nested 64 deep", wide}} {
		id := insert(tc.payload)
		for _, path := range []string{"", "/live"} {
			var body int
			got := allocated(func() { body = view(id, path) })
			t.Logf("%s%s: payload %d bytes, page %d bytes, %d allocated", tc.name, path, len(tc.payload), body, got)
			require.LessOrEqual(t, body, floorBody+64<<10+2*len(tc.payload), "%s%s", tc.name, path)
			require.LessOrEqual(t, body, floorBody+2*views.PrettyMaxBytes, "%s%s", tc.name, path)
			// Reading the payload, and a few copies of the page (more
			// under the race detector).
			require.LessOrEqual(t, got, 2*floor+8*uint64(len(tc.payload))+8*uint64(body), "%s%s", tc.name, path)
		}
	}
	id := insert(wide)
	p := b.request(t, http.MethodGet, "/jobs/"+id.String(), nil)
	require.Contains(t, p.body, `data-testid="payload-cut"`)
	require.Contains(t, p.body, `href="/jobs/`+id.String()+`/payload.json"`)
	raw := b.request(t, http.MethodGet, "/jobs/"+id.String()+"/payload.json", nil)
	require.Equal(t, http.StatusOK, raw.status)
	require.JSONEq(t, wide, raw.body)
}
