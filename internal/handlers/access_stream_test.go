package handlers_test

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/auth"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// serve puts the rig's app on a real port: streams do not end, so they
// cannot go through app.Test.
func (r *accessRig) serve(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = r.app.Listener(ln) }()
	t.Cleanup(func() { _ = r.app.ShutdownWithTimeout(time.Second) })
	return "http://" + ln.Addr().String()
}

// openStream opens an event stream with the given request headers and
// sends each message on the channel it returns (comments left out); the
// channel closes when the server ends the stream.
func openStream(t *testing.T, url string, header http.Header) <-chan sseMsg {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	out := make(chan sseMsg, 1000)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		var m sseMsg
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if m.event != "" || m.data != "" {
					out <- m
				}
				m = sseMsg{}
			case strings.HasPrefix(line, "event: "):
				m.event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				m.data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return out
}

// nextNamed returns the next message named event, skipping others (pings).
func nextNamed(t *testing.T, ch <-chan sseMsg, event string, within time.Duration) sseMsg {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case m, ok := <-ch:
			require.True(t, ok, "the stream ended before a %q event", event)
			if m.event == event {
				return m
			}
		case <-deadline:
			t.Fatalf("no %q event within %s", event, within)
		}
	}
}

// endsWith waits for the stream to send "ended" and close, and returns
// the reason it gave. Nothing but pings may come before it.
func endsWith(t *testing.T, ch <-chan sseMsg, within time.Duration) string {
	t.Helper()
	deadline := time.After(within)
	var reason string
	for {
		select {
		case m, ok := <-ch:
			if !ok {
				require.NotEmpty(t, reason, "the stream closed without saying why")
				return reason
			}
			require.Empty(t, reason, "nothing may follow the ended event, got %+v", m)
			require.Contains(t, []string{"ping", "ended"}, m.event, "no event may reach a stream whose access is gone: %+v", m)
			if m.event == "ended" {
				reason = m.data
			}
		case <-deadline:
			t.Fatalf("the stream was still open %s after its access went", within)
		}
	}
}

func deliver(r *accessRig, n int) {
	events := make([]domain.Event, n)
	for i := range events {
		events[i] = domain.Event{JobID: uuid.New(), Status: jobs.StateQueued, Type: "noop", Queue: "default", At: time.Now()}
	}
	r.broker.Deliver(events)
}

// TestOpenStreamsEndWithTheirAccess: disabling a person ends their open
// dashboard stream, and revoking a key ends the event stream opened with
// it, within moments (one re-check interval, 100 ms in tests), with an
// "ended" event saying why and nothing after it; other people's and keys'
// streams go on.
func TestOpenStreamsEndWithTheirAccess(t *testing.T) {
	t.Parallel()
	r := accessSetup(t)
	base := r.serve(t)
	cookies := func(role auth.Role) http.Header {
		var parts []string
		for k, v := range r.people[role].cookies {
			parts = append(parts, (&http.Cookie{Name: k, Value: v}).String())
		}
		return http.Header{"Cookie": {strings.Join(parts, "; ")}}
	}
	withKey := func(secret string) http.Header { return http.Header{"X-Api-Key": {secret}} }

	viewer := openStream(t, base+"/events", cookies(auth.RoleViewer))
	operator := openStream(t, base+"/events", cookies(auth.RoleOperator))
	readKey := openStream(t, base+"/api/v1/sse/events", withKey(r.keys[auth.ScopeRead]))
	operateKey := openStream(t, base+"/api/v1/sse/events", withKey(r.keys[auth.ScopeOperate]))
	// Each stream delivers while its access holds.
	deliver(r, 1)
	for _, ch := range []<-chan sseMsg{viewer, operator} {
		nextNamed(t, ch, "update", 5*time.Second)
	}
	for _, ch := range []<-chan sseMsg{readKey, operateKey} {
		nextNamed(t, ch, "job", 5*time.Second)
	}
	// Re-checks end only the streams whose access went: the others live
	// through the very re-checks that end these two, as they show below.

	u, err := r.store.UserByEmail(r.ctx, r.emails[auth.RoleViewer])
	require.NoError(t, err)
	_, err = r.store.DisableUser(r.ctx, u.ID)
	require.NoError(t, err)
	disabledAt := time.Now()
	reason := endsWith(t, viewer, 3*time.Second)
	require.Contains(t, reason, "session ended")
	t.Logf("the disabled person's stream ended %s after disabling", time.Since(disabledAt).Round(time.Millisecond))

	_, err = r.store.RevokeAPIKey(r.ctx, r.keyIDs[auth.ScopeRead])
	require.NoError(t, err)
	revokedAt := time.Now()
	reason = endsWith(t, readKey, 3*time.Second)
	require.Contains(t, reason, "revoked")
	t.Logf("the revoked key's stream ended %s after revoking", time.Since(revokedAt).Round(time.Millisecond))

	// The others still stream, and the ended ones are gone for good.
	deliver(r, 3)
	nextNamed(t, operator, "update", 5*time.Second)
	nextNamed(t, operateKey, "job", 5*time.Second)
	for _, ch := range []<-chan sseMsg{viewer, readKey} {
		_, open := <-ch
		require.False(t, open)
	}
	// Reconnecting is refused.
	req, _ := http.NewRequest(http.MethodGet, base+"/api/v1/sse/events", nil)
	req.Header = withKey(r.keys[auth.ScopeRead])
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}
