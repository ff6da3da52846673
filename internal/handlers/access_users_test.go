package handlers_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/auth"
	"github.com/flinthq/flint/internal/domain"
)

var regexpSecret = regexp.MustCompile(`<code class="secret">([^<]+)</code>`)

// TestDisablingAUserEndsTheirSession: the disabled person's open dashboard
// fails on its next request, they cannot sign in again, and a role change
// applies to the next request.
func TestDisablingAUserEndsTheirSession(t *testing.T) {
	t.Parallel()
	r := accessSetup(t)
	op := r.people[auth.RoleOperator]
	require.Equal(t, http.StatusOK, dashCall(t, op, "GET", "/jobs", nil).status)
	opUser, err := r.store.UserByEmail(r.ctx, r.emails[auth.RoleOperator])
	require.NoError(t, err)

	// Demoted to viewer: the next action is refused.
	admin := r.people[auth.RoleAdmin]
	p := dashCall(t, admin, "POST", "/users/"+opUser.ID.String()+"/role", url.Values{"role": {"viewer"}})
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Equal(t, http.StatusForbidden, dashCall(t, op, "GET", "/jobs/new", nil).status)

	p = dashCall(t, admin, "POST", "/users/"+opUser.ID.String()+"/disable", nil)
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "disabled")
	p = op.request(t, "GET", "/jobs", nil)
	require.Equal(t, http.StatusSeeOther, p.status, "the open session ends at once")
	p = op.request(t, "GET", "/overview/live", nil, "HX-Request", "true")
	require.Equal(t, http.StatusUnauthorized, p.status)
	again := &dashBundle{app: r.app, cookies: map[string]string{}}
	p = again.login(t, r.emails[auth.RoleOperator], rolePassword, http.StatusForbidden)
	require.Contains(t, p.body, "disabled")

	// The last admin cannot be disabled, demoted or removed; nobody can
	// disable themself from the page.
	adminUser, err := r.store.UserByEmail(r.ctx, r.emails[auth.RoleAdmin])
	require.NoError(t, err)
	p = dashCall(t, admin, "POST", "/users/"+adminUser.ID.String()+"/role", url.Values{"role": {"viewer"}})
	require.Equal(t, http.StatusUnprocessableEntity, p.status)
	require.Contains(t, p.header.Get("HX-Trigger"), "last enabled admin")
	p = dashCall(t, admin, "POST", "/users/"+adminUser.ID.String()+"/disable", nil)
	require.Equal(t, http.StatusUnprocessableEntity, p.status)
	_, err = r.store.DisableUser(r.ctx, adminUser.ID)
	require.ErrorContains(t, err, "last enabled admin")

	// Enabled again, they sign in with the role they were given.
	p = dashCall(t, admin, "POST", "/users/"+opUser.ID.String()+"/enable", nil)
	require.Equal(t, http.StatusOK, p.status)
	again.login(t, r.emails[auth.RoleOperator], rolePassword, http.StatusSeeOther)
	require.Equal(t, http.StatusForbidden, dashCall(t, again, "GET", "/jobs/new", nil).status)
}

// TestUsersPageAndPasswords: an admin adds people (a generated password is
// shown once and works), bad input is answered in the form, and a person
// changes their own password, which ends their other sessions.
func TestUsersPageAndPasswords(t *testing.T) {
	t.Parallel()
	r := accessSetup(t)
	admin := r.people[auth.RoleAdmin]
	p := dashCall(t, admin, "POST", "/users", url.Values{"email": {"new@example.com"}, "role": {"operator"}})
	require.Equal(t, http.StatusOK, p.status, p.body)
	m := regexpSecret.FindStringSubmatch(p.body)
	require.NotNil(t, m, p.body)
	fresh := &dashBundle{app: r.app, cookies: map[string]string{}}
	fresh.login(t, "new@example.com", m[1], http.StatusSeeOther)

	p = dashCall(t, admin, "POST", "/users", url.Values{"email": {"new@example.com"}, "role": {"viewer"}})
	require.Equal(t, http.StatusUnprocessableEntity, p.status)
	require.Contains(t, p.body, "a user with this email exists")
	p = dashCall(t, admin, "POST", "/users", url.Values{"email": {"x@example.com"}, "role": {"root"}})
	require.Equal(t, http.StatusUnprocessableEntity, p.status)
	require.Contains(t, p.body, "must be viewer, operator or admin")
	p = dashCall(t, admin, "POST", "/users", url.Values{"email": {"y@example.com"}, "role": {"viewer"}, "password": {"short"}})
	require.Equal(t, http.StatusUnprocessableEntity, p.status)
	require.Contains(t, p.body, "at least 8")

	// Changing one's own password.
	viewer := r.people[auth.RoleViewer]
	other := r.signIn(t, r.emails[auth.RoleViewer])
	p = dashCall(t, viewer, "POST", "/account/password", url.Values{"current_password": {"wrong"}, "new_password": {"another long one"}, "confirm_password": {"another long one"}})
	require.Equal(t, http.StatusUnprocessableEntity, p.status)
	require.Contains(t, p.body, "is not your current password")
	p = dashCall(t, viewer, "POST", "/account/password", url.Values{"current_password": {rolePassword}, "new_password": {"another long one"}, "confirm_password": {"different"}})
	require.Equal(t, http.StatusUnprocessableEntity, p.status)
	p = dashCall(t, viewer, "POST", "/account/password", url.Values{"current_password": {rolePassword}, "new_password": {"another long one"}, "confirm_password": {"another long one"}})
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "Password changed")
	require.Equal(t, http.StatusOK, viewer.request(t, "GET", "/jobs", nil).status, "this session stays")
	require.Equal(t, http.StatusSeeOther, other.request(t, "GET", "/jobs", nil).status, "the other session ends")
	again := &dashBundle{app: r.app, cookies: map[string]string{}}
	again.login(t, r.emails[auth.RoleViewer], "another long one", http.StatusSeeOther)
}

// TestAuditNamesPersonOrKey: every audit entry says which person or which
// key acted.
func TestAuditNamesPersonOrKey(t *testing.T) {
	t.Parallel()
	r := accessSetup(t)
	a, b, c := enqueueDead(t, r), enqueueDead(t, r), enqueueDead(t, r)
	require.Equal(t, http.StatusOK, apiCall(t, r.app, r.keys[auth.ScopeOperate], "POST", "/api/v1/jobs/"+a.String()+"/retry", "").status)
	require.Equal(t, http.StatusOK, apiCall(t, r.app, apiKey, "POST", "/api/v1/jobs/"+b.String()+"/retry", "").status)
	p := dashCall(t, r.people[auth.RoleOperator], "POST", "/jobs/"+c.String()+"/retry", nil)
	require.Equal(t, http.StatusOK, p.status, p.body)
	res := apiCall(t, r.app, r.keys[auth.ScopeAdmin], "POST", "/api/v1/keys", `{"name":"made-by-key","scopes":["read"]}`)
	require.Equal(t, http.StatusCreated, res.status)
	require.Equal(t, "key:svc-admin", res.json(t)["created_by"])
	res = apiCall(t, r.app, r.keys[auth.ScopeAdmin], "PATCH", "/api/v1/settings", `{"retention_completed_days": 3}`)
	require.Equal(t, http.StatusOK, res.status, string(res.body))

	entries, err := r.store.ListAudit(r.ctx, domain.AuditQuery{Limit: 100})
	require.NoError(t, err)
	who := map[string]string{}
	for _, e := range entries {
		key := e.Action
		if e.JobID != nil {
			key += " " + e.JobID.String()
		}
		who[key] = e.Source + " " + e.Actor
	}
	require.Equal(t, "api key:svc-operate", who["retry "+a.String()])
	require.Equal(t, "api key:FLINT_API_KEY", who["retry "+b.String()])
	require.Equal(t, "dashboard operator@example.com", who["retry "+c.String()])
	require.Equal(t, "api key:svc-admin", who["key_create"])
	changes, err := r.store.ListSettingsChanges(r.ctx, 10)
	require.NoError(t, err)
	require.NotEmpty(t, changes)
	require.True(t, strings.HasPrefix(changes[0].ChangedBy, "key:svc-admin@"), changes[0].ChangedBy)
}
