package handlers_test

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/flinthq/flint/internal/auth"
	"github.com/flinthq/flint/internal/handlers"
	"github.com/flinthq/flint/jobs"
)

// TestViewsNameRoutesOfTheAccessTable: the templates decide what to show
// by asking about routes (views.Can(ctx, "POST /benchmark")); every route
// named in the views is one the access table has, and every question is
// asked with a route written out, so this test sees it.
func TestViewsNameRoutesOfTheAccessTable(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../views/*.templ")
	require.NoError(t, err)
	goFiles, err := filepath.Glob("../views/*.go")
	require.NoError(t, err)
	for _, f := range goFiles {
		if !strings.HasSuffix(f, "_templ.go") && !strings.HasSuffix(f, "_test.go") {
			files = append(files, f)
		}
	}
	routeLit := regexp.MustCompile(`"((?:GET|POST|PUT|PATCH|DELETE) /[^"]*)"`)
	question := regexp.MustCompile(`\b(Can|CanWith|needs|canBulk)\(ctx, ([^,)]+)`)
	named := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range routeLit.FindAllStringSubmatch(string(src), -1) {
			method, path, _ := strings.Cut(m[1], " ")
			_, _, _, ok := handlers.AccessNeed(method, path)
			require.True(t, ok, "%s names %q, which is not in accessTable (handlers/access.go)", f, m[1])
			named++
		}
		for _, m := range question.FindAllStringSubmatch(string(src), -1) {
			arg := m[2]
			switch {
			case strings.HasPrefix(arg, `"`):
			case m[1] == "canBulk" && arg == "l.Kind", m[1] == "canBulk" && arg == "kind":
			case m[1] == "Can" && arg == "n.route": // navItems, whose routes are written out
			case strings.HasSuffix(f, "access.go") && (arg == "route" || arg == "kind"): // the definitions
			default:
				t.Errorf("%s asks %s(ctx, %s): write the route out, so that this test checks it", f, m[1], arg)
			}
		}
	}
	require.Greater(t, named, 40)
}

// control is something a page offers: a link, a form or an HTMX request.
type control struct {
	method, path, value string // value: of the control's name=action field
	what                string
}

// controls lists the enabled controls in a page that lead to Flint.
func controls(t *testing.T, body string) []control {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(body))
	require.NoError(t, err)
	var out []control
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			attr := map[string]string{}
			disabled := false
			for _, a := range n.Attr {
				attr[a.Key] = a.Val
				if a.Key == "disabled" {
					disabled = true
				}
			}
			add := func(method, target string) {
				if !disabled && target != "" {
					value := ""
					if attr["name"] == "action" {
						value = attr["value"]
					}
					out = append(out, control{method: method, path: target, value: value, what: renderTag(n)})
				}
			}
			add(http.MethodPost, attr["hx-post"])
			add(http.MethodGet, attr["hx-get"])
			add(http.MethodGet, attr["data-live-url"])
			switch n.Data {
			case "a":
				add(http.MethodGet, attr["href"])
			case "form":
				method := strings.ToUpper(attr["method"])
				if method == "" {
					method = http.MethodGet
				}
				add(method, attr["action"])
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return out
}

func renderTag(n *html.Node) string {
	var b strings.Builder
	b.WriteString("<" + n.Data)
	for _, a := range n.Attr {
		fmt.Fprintf(&b, " %s=%q", a.Key, a.Val)
	}
	return b.String() + ">"
}

// matchRoute finds the registered route a path of this site goes to,
// preferring the one with the most fixed segments (/jobs/new over
// /jobs/:id).
func matchRoute(app *fiber.App, method, path string) (string, bool) {
	parts := strings.Split(path, "/")
	best, bestScore := "", -1
	for _, r := range app.GetRoutes(true) {
		if r.Method != method {
			continue
		}
		rp := strings.Split(r.Path, "/")
		if len(rp) != len(parts) {
			continue
		}
		score := 0
		for i := range rp {
			switch {
			case strings.HasPrefix(rp[i], ":"):
			case rp[i] == parts[i]:
				score++
			default:
				score = -1
			}
			if score < 0 {
				break
			}
		}
		if score > bestScore {
			best, bestScore = r.Path, score
		}
	}
	return best, bestScore >= 0
}

// TestPagesOfferOnlyWhatTheRoleMayUse renders every dashboard page as
// each role and checks that each link, form and HTMX request in it goes
// to a route the role may use, as accessTable says; and, by name, that
// only an admin gets the benchmark's Run button.
func TestPagesOfferOnlyWhatTheRoleMayUse(t *testing.T) {
	t.Parallel()
	r := accessSetup(t)
	dead := enqueueDead(t, r)
	binned := enqueueDead(t, r)
	_, err := r.store.DeleteJob(r.ctx, binned)
	require.NoError(t, err)
	res, err := r.store.Enqueue(r.ctx, jobs.EnqueueParams{Type: "noop", Payload: []byte(`{}`), Queue: "default", Delay: 3600e9},
		jobs.EnqueueParams{Type: "noop", Payload: []byte(`{}`), Queue: "default", IntervalSeconds: 3600})
	require.NoError(t, err)
	waiting := res[0].Job.ID
	rule := apiCall(t, r.app, apiKey, "POST", "/api/v1/alerts/rules", `{"kind":"no_worker","name":"nobody serves","queue":"default"}`)
	require.Equal(t, http.StatusCreated, rule.status, string(rule.body))
	ruleID := fmt.Sprint(rule.json(t)["id"])

	pages := []string{"/", "/jobs", "/dlq", "/bin", "/recurring", "/queues", "/workers", "/settings", "/benchmark",
		"/alerts", "/alerts/rules/" + ruleID, "/alerts/rules/new", "/logs", "/audit", "/account", "/users", "/keys",
		"/jobs/new", "/jobs/" + dead.String(), "/jobs/" + binned.String(), "/jobs/" + waiting.String(), "/jobs/" + dead.String() + "/edit"}
	for _, role := range auth.Roles {
		b := r.people[role]
		seen := 0
		for _, pg := range pages {
			p := b.request(t, http.MethodGet, pg, nil)
			require.Contains(t, []int{http.StatusOK, http.StatusForbidden}, p.status, "%s as %s: %s", pg, role, p.body)
			seen += requireControlsAllowed(t, r, role, pg, p.body)
		}
		require.Greater(t, seen, 50, role)
	}

	// By name: the benchmark's Run button (the page once offered it to
	// everybody, while running it needs admin).
	for _, role := range auth.Roles {
		p := r.people[role].request(t, http.MethodGet, "/benchmark", nil)
		require.Equal(t, http.StatusOK, p.status)
		admin := role == auth.RoleAdmin
		require.Equal(t, admin, strings.Contains(p.body, `data-testid="bench-run"`), "%s: Run button", role)
		require.Equal(t, admin, strings.Contains(p.body, `hx-post="/benchmark"`), "%s: the form", role)
		require.Equal(t, !admin, strings.Contains(p.body, `data-testid="bench-read-only"`), "%s: says why not", role)
		if !admin {
			require.Contains(t, p.body, "needs the admin role")
		}
	}
	// What a viewer and an operator each see of a dead job and the bin.
	for role, want := range map[auth.Role][]string{
		auth.RoleViewer:   {},
		auth.RoleOperator: {"action-retry", "action-edit-replay", "action-delete"},
		auth.RoleAdmin:    {"action-retry", "action-edit-replay", "action-delete"},
	} {
		p := r.people[role].request(t, http.MethodGet, "/jobs/"+dead.String(), nil)
		got := regexp.MustCompile(`data-testid="(action-[a-z-]+)"`).FindAllStringSubmatch(p.body, -1)
		var names []string
		for _, m := range got {
			names = append(names, m[1])
		}
		slices.Sort(names)
		require.ElementsMatch(t, want, slices.Compact(names), "%s on a dead job", role)
		p = r.people[role].request(t, http.MethodGet, "/bin", nil)
		require.Equal(t, role == auth.RoleAdmin, strings.Contains(p.body, `data-testid="purge-selected"`), "%s: purge in the bin", role)
		require.Equal(t, role != auth.RoleViewer, strings.Contains(p.body, `data-testid="restore-selected"`), "%s: restore in the bin", role)
	}
}

// requireControlsAllowed requires that each link, form and HTMX request in
// body, page pg as rendered for role, goes to a route the role may use, as
// accessTable says. It returns how many controls it checked.
func requireControlsAllowed(t *testing.T, r *accessRig, role auth.Role, pg, body string) (seen int) {
	t.Helper()
	for _, c := range controls(t, body) {
		u, err := url.Parse(c.path)
		require.NoError(t, err, c.what)
		if u.Host != "" || !strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "/static/") {
			continue // another site (the mail catcher), or a file
		}
		route, ok := matchRoute(r.app, c.method, u.Path)
		require.True(t, ok, "%s as %s offers %s %s, which is no route: %s", pg, role, c.method, u.Path, c.what)
		if handlers.IsPublicRoute(c.method, route) {
			continue
		}
		need, field, raise, ok := handlers.AccessNeed(c.method, route)
		require.True(t, ok, "%s %s has no access rule", c.method, route)
		if v := c.value; field == "action" && v != "" {
			if raised, ok := raise[v]; ok {
				need = raised
			}
		}
		require.True(t, auth.Grants(role.Scopes(), need),
			"%s as %s offers %s %s, which needs %s: %s", pg, role, c.method, route, need, c.what)
		seen++
	}
	return seen
}
