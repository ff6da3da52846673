// Package static holds the dashboard's browser assets — the vendored,
// version-pinned htmx, Flint's own CSS and its scripts (live-updates.js,
// live.js with the browser's one live stream, and dashboard.js, loaded in
// that order) — embedded in the binary. Nothing is loaded from a CDN.
package static

import "embed"

// FS is the asset tree, served under /static/.
//
//go:embed app.css live-updates.js live.js dashboard.js favicon.svg vendor
var FS embed.FS
