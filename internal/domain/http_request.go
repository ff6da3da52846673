package domain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/flinthq/flint/jobs"
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
func NewHTTPRequestHandler(cfg HTTPConfig) jobs.Handler {
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

// Work makes the request. A 2xx response is success; any other status, a
// network error or a timeout fails the attempt (it is retried); a payload
// that is invalid or a destination the SSRF guard refuses fails the job for
// good (to the dead-letter queue, skipping the retries left),
// since no retry can change either.
func (h *httpRequestHandler) Work(ctx context.Context, job *jobs.Job) (any, error) {
	r, err := parseHTTPRequestPayload(job.Payload)
	if err != nil {
		return nil, jobs.Permanent(fmt.Errorf("http_request: bad payload: %w", err))
	}
	shown := r.method + " " + redactURL(r.url)
	if err := h.guard.checkURL(r.url); err != nil {
		return nil, jobs.Permanent(fmt.Errorf("http_request: %s refused: %w", shown, err))
	}

	reqCtx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	req, err := h.newRequest(reqCtx, r)
	if err != nil {
		return nil, jobs.Permanent(fmt.Errorf("http_request: %s: %v", shown, err))
	}

	log := jobs.Logger(ctx)
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
		return nil, readError(ctx, reqCtx, r, shown, readErr)
	}
	snippet := utf8Prefix(head)
	truncated := limited || n > int64(len(head))
	if resp.StatusCode/100 != 2 {
		return nil, statusError(shown, resp.StatusCode, snippet, truncated)
	}
	res := httpRequestResult{
		Status:       resp.StatusCode,
		Body:         snippet,
		Truncated:    truncated,
		BytesRead:    n,
		LimitReached: limited,
		DurationMS:   elapsed.Milliseconds(),
		Headers:      resultHeaders(resp.Header),
	}
	return res, nil
}

// newRequest builds the request r describes, under ctx (which carries the
// payload's timeout), with the default User-Agent unless r sets one.
func (h *httpRequestHandler) newRequest(ctx context.Context, r *httpRequest) (*http.Request, error) {
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, r.url.String(), body)
	if err != nil {
		return nil, err
	}
	for name, value := range r.headers {
		req.Header.Set(name, value)
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", h.userAgent)
	}
	return req, nil
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
		return jobs.Permanent(fmt.Errorf("http_request: %s refused: %w", shown, &c))
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
