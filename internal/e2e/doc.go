// Package e2e holds Flint's end-to-end tests, browser tests and
// benchmarks: the flint binary run as separate processes (killed, signalled,
// put behind PgBouncer and an HTTPS proxy), the dashboard driven in
// headless Chromium, alert emails read back from the mail catcher, and the
// throughput and latency benchmarks that README.md's tables quote. It has
// no code of its own outside tests.
package e2e
