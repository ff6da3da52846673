package handlers_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSignedOutEventStreamEnds: a browser's live stream without a session
// (signed out, or Flint restarted with another session key) gets an event
// stream with one "ended" event, which the page answers by reloading into
// the sign-in page, instead of a redirect to an HTML page that EventSource
// refuses and retries forever. Other requests still go to the sign-in page.
func TestSignedOutEventStreamEnds(t *testing.T) {
	t.Parallel()
	b := accessSetup(t)
	for _, cookie := range []string{"", "flint_session=MTczMzQ5OTk5OXxmb3JnZWQ="} {
		req := httptest.NewRequest(http.MethodGet, "/events", nil)
		req.Header.Set("Accept", "text/event-stream")
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		resp, err := b.app.Test(req, 10_000)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
		require.Equal(t, "retry: 2000\n\nevent: ended\ndata: signed out\n\n", string(body))
	}

	req := httptest.NewRequest(http.MethodGet, "/jobs?status=queued", nil)
	resp, err := b.app.Test(req, 10_000)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/login?next=%2Fjobs%3Fstatus%3Dqueued", resp.Header.Get("Location"))
}

// TestSignedOutHTMXRequestReturnsToItsPage: an HTMX request of a
// signed-out page (a live refresh, an action) sends the whole page to the
// sign-in page with that page, not the overview, as where to come back.
func TestSignedOutHTMXRequestReturnsToItsPage(t *testing.T) {
	t.Parallel()
	b := accessSetup(t)
	req := httptest.NewRequest(http.MethodGet, "/jobs/rows?ids=x", nil)
	req.Header.Set("HX-Request", "true")
	req.Header.Set("HX-Current-URL", "http://flint.example/jobs?status=queued&type=noop")
	resp, err := b.app.Test(req, 10_000)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Equal(t, "/login?next=%2Fjobs%3Fstatus%3Dqueued%26type%3Dnoop", resp.Header.Get("HX-Redirect"))
}
