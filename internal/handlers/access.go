package handlers

import (
	"github.com/gofiber/fiber/v2"

	"github.com/flinthq/flint/internal/auth"
)

// Access control. Every route is either public or has an entry in
// accessTable, naming the one scope it needs ("METHOD /path", the path as
// registered, with :params). People get the scopes of their role, API keys
// the scopes they were created with (auth.Grants says what implies what).
// A route that is in neither table is refused to everybody: forgetting an
// entry fails closed, and TestEveryRouteHasAnAccessRule fails with the
// route's name.
//
// Adding a route: add its line below in the same commit. GETs that only
// read need needRead (viewer); operational actions needOperate (operator);
// settings-like changes, people, keys and purging needAdmin. An API route's
// operation in openapi.json says the same scope in "x-flint-scope" and
// documents a 403 (TestOpenAPINamesEachScope).

// rule is what a route needs: a scope, raised to another when a form or
// query field (field) has one of the values in raise (bulk purge, DELETE
// with purge=true).
type rule struct {
	need  auth.Scope
	field string
	raise map[string]auth.Scope
}

var (
	needEnqueue = rule{need: auth.ScopeEnqueue}
	needWork    = rule{need: auth.ScopeWork}
	needRead    = rule{need: auth.ScopeRead}
	needOperate = rule{need: auth.ScopeOperate}
	needAdmin   = rule{need: auth.ScopeAdmin}
)

// raisedBy returns r needing scope when field has one of values.
func (r rule) raisedBy(field string, scope auth.Scope, values ...string) rule {
	r.field = field
	r.raise = map[string]auth.Scope{}
	for _, v := range values {
		r.raise[v] = scope
	}
	return r
}

// needFor is the scope the rule needs when its field has value v.
func (r rule) needFor(v string) auth.Scope {
	if raised, ok := r.raise[v]; ok && r.field != "" {
		return raised
	}
	return r.need
}

// needOf is the scope the rule needs for request c: its field is read
// from the query, or from the form of a request that is not a GET.
func (r rule) needOf(c *fiber.Ctx) auth.Scope {
	if r.field == "" {
		return r.need
	}
	v := c.Query(r.field)
	if v == "" && c.Method() != fiber.MethodGet {
		v = c.FormValue(r.field)
	}
	return r.needFor(v)
}

// publicRoutes need no credentials at all.
var publicRoutes = map[string]bool{
	"GET /healthz":             true,
	"GET /readyz":              true,
	"GET /metrics":             true, // its own bearer token (FLINT_METRICS_TOKEN)
	"GET /api/v1/docs":         true,
	"GET /api/v1/openapi.json": true,
	"GET /favicon.ico":         true,
	"GET /login":               true,
	"POST /login":              true,
}

// accessTable is the one place that says who may use which route.
var accessTable = map[string]rule{
	// The JSON API, for keys.
	"POST /api/v1/jobs":                     needEnqueue,
	"POST /api/v1/jobs/batch":               needEnqueue,
	"POST /api/v1/workflows":                needEnqueue,
	"POST /api/v1/batches":                  needEnqueue,
	"GET /api/v1/batches":                   needRead,
	"GET /api/v1/batches/:id":               needRead,
	"POST /api/v1/batches/:id/jobs":         needEnqueue,
	"POST /api/v1/batches/:id/close":        needEnqueue,
	"GET /api/v1/jobs":                      needRead,
	"GET /api/v1/jobs/:id":                  needRead,
	"GET /api/v1/jobs/:id/explain":          needRead,
	"GET /api/v1/jobs/:id/logs":             needRead,
	"POST /api/v1/jobs/:id/replay":          needOperate,
	"POST /api/v1/jobs/:id/signals/:name":   needEnqueue,
	"POST /api/v1/events":                   needEnqueue,
	"POST /api/v1/jobs/:id/steps":           needWork,
	"POST /api/v1/jobs/:id/cancel":          needOperate,
	"POST /api/v1/jobs/:id/retry":           needOperate,
	"POST /api/v1/jobs/:id/restore":         needOperate,
	"DELETE /api/v1/jobs/:id":               needOperate.raisedBy("purge", auth.ScopeAdmin, "true", "1"),
	"GET /api/v1/dlq":                       needRead,
	"POST /api/v1/dlq/retry":                needOperate,
	"GET /api/v1/bin":                       needRead,
	"GET /api/v1/stats":                     needRead,
	"GET /api/v1/workers":                   needRead,
	"GET /api/v1/types/:type":               needRead,
	"POST /api/v1/workers":                  needWork,
	"POST /api/v1/workers/:id/claim":        needWork,
	"POST /api/v1/workers/:id/heartbeat":    needWork,
	"POST /api/v1/workers/:id/finish":       needWork,
	"DELETE /api/v1/workers/:id":            needWork,
	"POST /api/v1/jobs/:id/logs":            needWork,
	"POST /api/v1/jobs/:id/heartbeat":       needWork,
	"POST /api/v1/jobs/:id/finish":          needWork,
	"POST /api/v1/workers/:id/quiet":        needOperate,
	"POST /api/v1/workers/:id/terminate":    needOperate,
	"POST /api/v1/benchmark/run":            needAdmin, // loads the machine
	"GET /api/v1/logs":                      needRead,
	"GET /api/v1/audit":                     needRead,
	"GET /api/v1/sse/events":                needRead,
	"GET /api/v1/recurring":                 needRead,
	"GET /api/v1/recurring/:id":             needRead,
	"POST /api/v1/recurring/:id/pause":      needOperate,
	"POST /api/v1/recurring/:id/resume":     needOperate,
	"POST /api/v1/recurring/:id/run":        needOperate,
	"DELETE /api/v1/recurring/:id":          needAdmin,
	"GET /api/v1/queues":                    needRead,
	"GET /api/v1/queues/:name":              needRead,
	"POST /api/v1/queues/:name/pause":       needOperate,
	"POST /api/v1/queues/:name/resume":      needOperate,
	"PATCH /api/v1/queues/:name":            needAdmin,
	"POST /api/v1/queues/:name/push/rotate": needAdmin,
	"POST /api/v1/queues/:name/push/revoke": needAdmin,
	"GET /api/v1/settings":                  needRead,
	"PATCH /api/v1/settings":                needAdmin,
	"GET /api/v1/settings/changes":          needRead,
	"GET /api/v1/alerts":                    needRead,
	"GET /api/v1/alerts/deliveries":         needRead,
	"GET /api/v1/alerts/rules":              needRead,
	"POST /api/v1/alerts/rules":             needAdmin,
	"GET /api/v1/alerts/rules/:id":          needRead,
	"PATCH /api/v1/alerts/rules/:id":        needAdmin,
	"DELETE /api/v1/alerts/rules/:id":       needAdmin,
	"POST /api/v1/alerts/rules/:id/test":    needOperate,
	"GET /api/v1/keys":                      needAdmin,
	"POST /api/v1/keys":                     needAdmin,
	"DELETE /api/v1/keys/:id":               needAdmin,
	"POST /api/v1/keys/:id/rotate":          needAdmin,

	// The dashboard, for people.
	"POST /logout":                  needRead,
	"GET /":                         needRead,
	"GET /overview/live":            needRead,
	"GET /jobs":                     needRead,
	"GET /jobs/rows":                needRead,
	"POST /jobs/bulk":               needOperate.raisedBy("action", auth.ScopeAdmin, string(jobPurge)),
	"GET /jobs/new":                 needEnqueue,
	"GET /jobs/new/fields":          needEnqueue,
	"POST /jobs/new":                needEnqueue,
	"GET /jobs/:id":                 needRead,
	"GET /jobs/:id/live":            needRead,
	"GET /jobs/:id/log":             needRead,
	"GET /jobs/:id/payload.json":    needRead,
	"GET /jobs/:id/result.json":     needRead,
	"GET /jobs/:id/edit":            needOperate,
	"POST /jobs/:id/edit":           needOperate,
	"POST /jobs/:id/signal":         needOperate,
	"POST /jobs/:id/retry":          needOperate,
	"POST /jobs/:id/cancel":         needOperate,
	"POST /jobs/:id/delete":         needOperate,
	"POST /jobs/:id/restore":        needOperate,
	"POST /jobs/:id/purge":          needAdmin,
	"GET /dlq":                      needRead,
	"POST /dlq/bulk":                needOperate.raisedBy("action", auth.ScopeAdmin, string(jobPurge)),
	"POST /dlq/replay-all":          needOperate,
	"POST /dlq/delete-all":          needOperate,
	"GET /bin":                      needRead,
	"POST /bin/bulk":                needOperate.raisedBy("action", auth.ScopeAdmin, string(jobPurge)),
	"GET /recurring":                needRead,
	"GET /batches":                  needRead,
	"GET /batches/:id":              needRead,
	"GET /batches/:id/live":         needRead,
	"POST /recurring/:id/pause":     needOperate,
	"POST /recurring/:id/resume":    needOperate,
	"POST /recurring/:id/run":       needOperate,
	"POST /recurring/:id/delete":    needAdmin,
	"GET /workers":                  needRead,
	"GET /types/:type":              needRead,
	"POST /workers/:id/quiet":       needOperate,
	"POST /workers/:id/terminate":   needOperate,
	"GET /queues":                   needRead,
	"GET /queues/:name":             needRead,
	"POST /queues/:name/pause":      needOperate,
	"POST /queues/:name/resume":     needOperate,
	"POST /queues/:name/limits":     needAdmin,
	"GET /settings":                 needRead,
	"GET /alerts":                   needRead,
	"GET /alerts/rules/new":         needAdmin,
	"POST /alerts/rules":            needAdmin,
	"GET /alerts/rules/:id":         needRead,
	"POST /alerts/rules/:id":        needAdmin,
	"POST /alerts/rules/:id/delete": needAdmin,
	"POST /alerts/rules/:id/test":   needOperate,
	"POST /settings":                needAdmin,
	"GET /benchmark":                needRead,
	"POST /benchmark":               needAdmin,
	"GET /events":                   needRead,
	"GET /audit":                    needRead,
	"GET /logs":                     needRead,
	"GET /logs/tail":                needRead,
	"GET /account":                  needRead, // one's own password
	"POST /account/password":        needRead,
	"GET /users":                    needAdmin,
	"POST /users":                   needAdmin,
	"POST /users/:id/role":          needAdmin,
	"POST /users/:id/disable":       needAdmin,
	"POST /users/:id/enable":        needAdmin,
	"POST /users/:id/remove":        needAdmin,
	"GET /keys":                     needAdmin,
	"POST /keys":                    needAdmin,
	"POST /keys/:id/revoke":         needAdmin,
	"POST /keys/:id/rotate":         needAdmin,
}

// routeKey names a route in the tables: HEAD is GET without a body.
func routeKey(method, path string) string {
	if method == fiber.MethodHead {
		method = fiber.MethodGet
	}
	return method + " " + path
}
