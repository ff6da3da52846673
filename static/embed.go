// Package static holds the dashboard's browser assets — the vendored,
// version-pinned htmx, Flint's own CSS and a small script (which also holds
// the browser's one live stream) — embedded in the binary. Nothing is
// loaded from a CDN.
package static

import "embed"

// FS is the asset tree, served under /static/.
//
//go:embed app.css app.js favicon.svg vendor
var FS embed.FS
