package domain

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/flinthq/flint/internal/jsonutil"
	"github.com/flinthq/flint/jobs"
)

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
	if err := jsonutil.DecodeStrict(payload, &p); err != nil {
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
	if jobs.HasControl(value) {
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
