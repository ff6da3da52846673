// Command flint is the Flint job system: one binary that runs the API and
// dashboard, the worker pool and the scheduler loops, together (serve) or
// one role per process (api, worker, scheduler).
//
// It is the app package with no job types but the built-in ones; a
// program of your own that registers handlers is the same few lines (see
// app's documentation and examples/). Start reading at app/doc.go, then
// jobs/doc.go for the state machine and ARCHITECTURE.md for the map.
package main

import (
	"os"

	"github.com/flinthq/flint/app"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = app.DefaultVersion

func main() {
	a := app.New()
	a.Version = version
	os.Exit(a.Main(os.Args[1:]))
}
