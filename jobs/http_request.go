package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits of the http_request payload and result.
const (
	httpMaxURLLen         = 8 << 10
	httpMaxBodyBytes      = 1 << 20
	httpMaxHeaders        = 100
	httpMaxHeaderValueLen = 8 << 10
	httpDefaultTimeout    = 30
	httpMaxTimeout        = 300
	httpMaxRedirects      = 5
	// httpSnippetLen is how much of a response body goes into a result or an
	// error message; the rest is read (up to the cap) but never kept.
	httpSnippetLen = 512
	// httpDefaultMaxResponse is HTTPConfig.MaxResponseBytes when zero.
	httpDefaultMaxResponse = 1 << 20
	httpDefaultUserAgent   = "Flint/1"
)

// HTTPConfig configures the http_request job. Its zero value is the strict
// guard: public addresses on ports 80 and 443 only.
type HTTPConfig struct {
	// Allow opens destinations the SSRF guard would refuse. It is
	// FLINT_HTTP_ALLOW parsed by ParseHTTPAllow: CIDRs ("10.0.0.0/8"), IP
	// addresses ("192.168.1.20", "127.0.0.1:8080") and host names
	// ("api.internal", "api.internal:8443"). An address entry opens
	// connections to matching resolved addresses; a host-name entry opens
	// URLs whose host is exactly that name, whatever it resolves to. Empty
	// means nothing is opened.
	Allow []string
	// MaxResponseBytes caps how much of a response body is read; the rest is
	// left unread and the result says it was truncated. Zero means 1 MiB.
	MaxResponseBytes int64
	// UserAgent is sent unless the payload sets User-Agent. Empty means
	// "Flint/1".
	UserAgent string
}

// httpMethods are the methods an http_request payload may use.
var httpMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true,
}

// httpForbiddenHeaders may not be set by a payload: Host would send the
// request to one site under another's name, the hop-by-hop headers belong
// to the connection (RFC 9110 section 7.6.1), and the framing headers are
// set by the client from the body.
var httpForbiddenHeaders = map[string]string{
	"Host":                "the host comes from the url",
	"Connection":          "it is a hop-by-hop header",
	"Keep-Alive":          "it is a hop-by-hop header",
	"Proxy-Connection":    "it is a hop-by-hop header",
	"Proxy-Authenticate":  "it is a hop-by-hop header",
	"Proxy-Authorization": "it is a hop-by-hop header",
	"Te":                  "it is a hop-by-hop header",
	"Trailer":             "it is a hop-by-hop header",
	"Transfer-Encoding":   "it is a hop-by-hop header",
	"Upgrade":             "it is a hop-by-hop header",
	"Content-Length":      "it is set from the body",
}

// httpResultHeaders are the response headers copied into the result.
var httpResultHeaders = []string{"Content-Type", "Content-Length", "Content-Encoding", "ETag", "Last-Modified", "Location", "Retry-After"}

// httpRequestPayload is {"method", "url", "headers", "body", "timeout_seconds"}.
type httpRequestPayload struct {
	Method         string            `json:"method"`
	URL            string            `json:"url"`
	Headers        map[string]string `json:"headers"`
	Body           string            `json:"body"`
	TimeoutSeconds *int              `json:"timeout_seconds"`
}

// httpRequest is a validated payload.
type httpRequest struct {
	method  string
	url     *url.URL
	headers map[string]string
	body    string
	timeout time.Duration
}

// parseHTTPRequestPayload decodes and validates a payload. Its errors name
// the payload field at fault. Nothing here depends on the allow list, so a
// payload valid on one process is valid on all.
func parseHTTPRequestPayload(payload json.RawMessage) (*httpRequest, error) {
	var p httpRequestPayload
	if err := decodeStrict(payload, &p); err != nil {
		return nil, err
	}
	r := &httpRequest{method: strings.ToUpper(strings.TrimSpace(p.Method)), body: p.Body}
	if r.method == "" {
		r.method = http.MethodGet
	}
	if !httpMethods[r.method] {
		return nil, fmt.Errorf(`"method" must be one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, not %q`, p.Method)
	}

	switch {
	case p.URL == "":
		return nil, errors.New(`needs "url", the http or https URL to request`)
	case len(p.URL) > httpMaxURLLen:
		return nil, fmt.Errorf(`"url" must be at most %d bytes`, httpMaxURLLen)
	}
	u, err := url.Parse(p.URL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf(`"url" is not a valid URL: %v`, err)
	}
	if err := checkURLSyntax(u); err != nil {
		var be *blockedError
		if errors.As(err, &be) {
			return nil, fmt.Errorf(`"url": %s is not allowed (%s)`, be.What, be.Why)
		}
		return nil, fmt.Errorf(`"url": %v`, err)
	}
	r.url = u

	if len(p.Headers) > httpMaxHeaders {
		return nil, fmt.Errorf(`"headers" may hold at most %d headers`, httpMaxHeaders)
	}
	seen := make(map[string]bool, len(p.Headers))
	for name, value := range p.Headers {
		if err := checkHeader(name, value); err != nil {
			return nil, err
		}
		canon := http.CanonicalHeaderKey(name)
		if seen[canon] {
			return nil, fmt.Errorf(`"headers" sets %s twice (names are case-insensitive)`, canon)
		}
		seen[canon] = true
	}
	r.headers = p.Headers

	if len(p.Body) > httpMaxBodyBytes {
		return nil, fmt.Errorf(`"body" must be at most %d bytes`, httpMaxBodyBytes)
	}

	secs := httpDefaultTimeout
	if p.TimeoutSeconds != nil {
		secs = *p.TimeoutSeconds
		if secs < 1 || secs > httpMaxTimeout {
			return nil, fmt.Errorf(`"timeout_seconds" must be between 1 and %d`, httpMaxTimeout)
		}
	}
	r.timeout = time.Duration(secs) * time.Second
	return r, nil
}

// checkHeader refuses header names that are not HTTP tokens, the headers in
// httpForbiddenHeaders, and values with CR, LF, NUL or other control
// characters (which could smuggle a second header or request).
func checkHeader(name, value string) error {
	if name == "" {
		return errors.New(`"headers" has an empty header name`)
	}
	for i := 0; i < len(name); i++ {
		if !isTokenChar(name[i]) {
			return fmt.Errorf(`"headers": name %q may contain only letters, digits and !#$%%&'*+-.^_`+"`"+`|~ (no spaces, colons, CR, LF or NUL)`, name)
		}
	}
	if why, ok := httpForbiddenHeaders[http.CanonicalHeaderKey(name)]; ok {
		return fmt.Errorf(`"headers" may not set %s: %s`, http.CanonicalHeaderKey(name), why)
	}
	if len(value) > httpMaxHeaderValueLen {
		return fmt.Errorf(`"headers": value of %s must be at most %d bytes`, name, httpMaxHeaderValueLen)
	}
	if HasControl(value) {
		return fmt.Errorf(`"headers": value of %s must not contain CR, LF, NUL or other control characters`, name)
	}
	return nil
}

// isTokenChar reports whether c may appear in an HTTP token (RFC 9110 5.6.2).
func isTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// httpRequestHandler runs http_request jobs.
type httpRequestHandler struct {
	guard     *ssrfGuard
	client    *http.Client
	transport *http.Transport
	maxBody   int64
	userAgent string
}

// NewHTTPRequestHandler returns the http_request handler, which also
// validates payloads at enqueue time. It panics if cfg.Allow holds an entry
// ParseHTTPAllow would refuse: validate FLINT_HTTP_ALLOW with it first.
func NewHTTPRequestHandler(cfg HTTPConfig) Handler {
	h, err := newHTTPRequestHandler(cfg)
	if err != nil {
		panic("jobs: " + err.Error())
	}
	return h
}

func newHTTPRequestHandler(cfg HTTPConfig) (*httpRequestHandler, error) {
	guard, err := newSSRFGuard(cfg.Allow)
	if err != nil {
		return nil, err
	}
	h := &httpRequestHandler{
		guard:     guard,
		maxBody:   cfg.MaxResponseBytes,
		userAgent: cfg.UserAgent,
	}
	if h.maxBody <= 0 {
		h.maxBody = httpDefaultMaxResponse
	}
	if h.userAgent == "" {
		h.userAgent = httpDefaultUserAgent
	}
	h.transport = &http.Transport{
		// Never a proxy, least of all one named by HTTP_PROXY: the proxy
		// would make the connection and the guard would check the proxy's
		// address instead of the destination's.
		Proxy:                  nil,
		DialContext:            guard.dialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           100,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  1 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	h.client = &http.Client{Transport: h.transport, CheckRedirect: h.checkRedirect}
	return h, nil
}

// ValidatePayload refuses a payload that could never run, naming the field.
func (h *httpRequestHandler) ValidatePayload(payload json.RawMessage) error {
	_, err := parseHTTPRequestPayload(payload)
	return err
}

// checkRedirect follows at most httpMaxRedirects redirects and re-checks
// each target's scheme, user info, host form and port; the dial checks the
// address as for any request.
func (h *httpRequestHandler) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > httpMaxRedirects {
		return fmt.Errorf("stopped after %d redirects", httpMaxRedirects)
	}
	if err := h.guard.checkURL(req.URL); err != nil {
		var be *blockedError
		if errors.As(err, &be) {
			c := *be
			c.Redirect = redactURL(req.URL)
			return &c
		}
		return fmt.Errorf("redirect to %s: %w", redactURL(req.URL), err)
	}
	return nil
}

// httpRequestResult is the result of a successful http_request job.
type httpRequestResult struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	// Body is the first 512 bytes of the response body.
	Body string `json:"body"`
	// Truncated is true when Body is not the whole response body.
	Truncated bool `json:"truncated"`
	// BytesRead is how much of the body was read, at most the cap.
	BytesRead int64 `json:"bytes_read"`
	// LimitReached is true when the body was longer than the cap and the
	// rest was left unread.
	LimitReached bool  `json:"limit_reached,omitempty"`
	DurationMS   int64 `json:"duration_ms"`
}

// Work makes the request. A 2xx response is success; any other status, a
// network error or a timeout fails the attempt (it is retried); a payload
// that is invalid or a destination the SSRF guard refuses fails the job for
// good (to the dead-letter queue, skipping the retries left),
// since no retry can change either.
func (h *httpRequestHandler) Work(ctx context.Context, job *Job) (any, error) {
	r, err := parseHTTPRequestPayload(job.Payload)
	if err != nil {
		return nil, Permanent(fmt.Errorf("http_request: bad payload: %w", err))
	}
	shown := r.method + " " + redactURL(r.url)
	if err := h.guard.checkURL(r.url); err != nil {
		return nil, Permanent(fmt.Errorf("http_request: %s refused: %w", shown, err))
	}

	reqCtx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(reqCtx, r.method, r.url.String(), body)
	if err != nil {
		return nil, Permanent(fmt.Errorf("http_request: %s: %v", shown, err))
	}
	for name, value := range r.headers {
		req.Header.Set(name, value)
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", h.userAgent)
	}

	log := Logger(ctx)
	log.Info("sending "+shown, "timeout", r.timeout.String(), "body_bytes", len(r.body))
	start := time.Now()
	resp, err := h.client.Do(req)
	if err != nil {
		err = h.requestError(ctx, reqCtx, r, shown, err)
		log.Warn("request failed", "error", err.Error(), "duration_ms", time.Since(start).Milliseconds())
		return nil, err
	}
	defer resp.Body.Close()

	head, n, limited, readErr := readCapped(resp.Body, h.maxBody, httpSnippetLen)
	elapsed := time.Since(start)
	log.Info(fmt.Sprintf("%s answered %d", shown, resp.StatusCode), "status", resp.StatusCode, "bytes", n,
		"duration_ms", elapsed.Milliseconds())
	if readErr != nil && resp.StatusCode/100 == 2 {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("http_request: %s: %w", shown, context.Cause(ctx))
		}
		if reqCtx.Err() != nil {
			return nil, fmt.Errorf("http_request: %s: timed out after %s reading the response (timeout_seconds)", shown, r.timeout)
		}
		return nil, fmt.Errorf("http_request: %s: reading the response: %v", shown, readErr)
	}
	snippet := utf8Prefix(head)

	if resp.StatusCode/100 != 2 {
		msg := fmt.Sprintf("http_request: %s returned %d", shown, resp.StatusCode)
		if snippet != "" {
			msg += fmt.Sprintf(" (body: %q", snippet)
			if limited || n > int64(len(head)) {
				msg += " …"
			}
			msg += ")"
		}
		return nil, errors.New(msg)
	}

	res := httpRequestResult{
		Status:       resp.StatusCode,
		Body:         snippet,
		Truncated:    limited || n > int64(len(head)),
		BytesRead:    n,
		LimitReached: limited,
		DurationMS:   elapsed.Milliseconds(),
		Headers:      map[string]string{},
	}
	for _, name := range httpResultHeaders {
		if v := resp.Header.Get(name); v != "" {
			if len(v) > 256 {
				v = utf8Prefix([]byte(v[:256]))
			}
			res.Headers[name] = v
		}
	}
	return res, nil
}

// requestError turns a failed client.Do into the handler's error. The URL in
// a *url.Error is replaced by the redacted one so that query strings (which
// often carry tokens) stay out of last_error.
func (h *httpRequestHandler) requestError(jobCtx, reqCtx context.Context, r *httpRequest, shown string, err error) error {
	// A *url.Error names the URL that failed, which after a redirect is not
	// the payload's.
	redirect := ""
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil && u.String() != r.url.String() {
			redirect = redactURL(u)
		}
		err = ue.Err
	}
	var be *blockedError
	if errors.As(err, &be) {
		c := *be
		if c.Redirect == "" {
			c.Redirect = redirect
		}
		return Permanent(fmt.Errorf("http_request: %s refused: %w", shown, &c))
	}
	if jobCtx.Err() != nil {
		return fmt.Errorf("http_request: %s: %w", shown, context.Cause(jobCtx))
	}
	if reqCtx.Err() != nil {
		return fmt.Errorf("http_request: %s: timed out after %s (timeout_seconds)", shown, r.timeout)
	}
	if redirect != "" {
		return fmt.Errorf("http_request: %s: redirect to %s: %v", shown, redirect, err)
	}
	return fmt.Errorf("http_request: %s: %v", shown, err)
}

// readCapped reads r to its end or to limit bytes, whichever comes first,
// and keeps only the first keep bytes. It returns those, the number of bytes
// read (at most limit), and whether the body went on past limit.
func readCapped(r io.Reader, limit int64, keep int) (head []byte, n int64, limited bool, err error) {
	w := &headWriter{keep: keep}
	n, err = io.Copy(w, io.LimitReader(r, min(limit, math.MaxInt64-1)+1))
	if n > limit {
		return w.buf, limit, true, nil
	}
	return w.buf, n, false, err
}

// headWriter keeps the first keep bytes written to it and discards the rest.
type headWriter struct {
	buf  []byte
	keep int
}

func (w *headWriter) Write(p []byte) (int, error) {
	if room := w.keep - len(w.buf); room > 0 {
		w.buf = append(w.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// utf8Prefix returns b as valid UTF-8 text: a rune cut at the end is
// dropped and invalid bytes become U+FFFD.
func utf8Prefix(b []byte) string {
	for i := 1; i <= utf8.UTFMax && i <= len(b); i++ {
		c := b[len(b)-i]
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-i:]) {
				b = b[:len(b)-i]
			}
			break
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// redactURL renders u for messages without its query string or fragment,
// which often carry tokens.
func redactURL(u *url.URL) string {
	c := *u
	c.User = nil
	c.Fragment, c.RawFragment = "", ""
	if c.RawQuery != "" || c.ForceQuery {
		c.RawQuery, c.ForceQuery = "", false
		return c.String() + "?…"
	}
	return c.String()
}
