// Package static holds the dashboard's browser assets — the vendored,
// version-pinned htmx and its SSE extension, Flint's own CSS and a small
// script — embedded in the binary. Nothing is loaded from a CDN.
package static

import "embed"

// FS is the asset tree, served under /static/.
//
//go:embed app.css app.js vendor
var FS embed.FS
