// Package views holds the dashboard's templ components: full pages
// (XxxPage), partials an HTMX route can return alone (exported Xxx), view
// models, formatting helpers and server-rendered SVG charts.
//
// Every value from a job (type, queue, payload, result, errors) reaches the
// page through templ's escaping, in text or attribute context; nothing is
// ever rendered raw, and containers of job content carry hx-disable so that
// text can never become an HTMX instruction. views imports jobs, auth (roles, for what a
// page offers) and logs (the stored log's values) only: no I/O, no Fiber,
// no database rows.
package views
