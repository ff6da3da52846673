package domain

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"time"
)

// GuardedClient makes HTTP requests behind the same SSRF guard as the
// http_request job (the FLINT_HTTP_ALLOW list, checked at dial time), for
// other outgoing requests whose address an operator typed, like alert
// webhooks. It follows no redirects and uses no proxy.
type GuardedClient struct {
	guard  *ssrfGuard
	client *http.Client
}

// NewGuardedClient returns a client with the given allow list (entries as
// ParseHTTPAllow returns them) and per-request timeout.
func NewGuardedClient(allow []string, timeout time.Duration) (*GuardedClient, error) {
	guard, err := newSSRFGuard(allow)
	if err != nil {
		return nil, err
	}
	transport := &http.Transport{
		Proxy:                  nil,
		DialContext:            guard.dialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           10,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return &GuardedClient{guard: guard, client: &http.Client{
		Transport:     transport,
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}, nil
}

// Do sends req once its URL passes the guard's checks; the dial checks the
// address it resolves to.
func (c *GuardedClient) Do(req *http.Request) (*http.Response, error) {
	if err := c.guard.checkURL(req.URL); err != nil {
		return nil, err
	}
	return c.client.Do(req)
}

// Check tells, before anything is sent, whether the guard lets a request
// to rawURL through: its form and port, and every address its host
// resolves to now. The dial checks again each time, so a host that later
// resolves elsewhere is still refused then.
func (c *GuardedClient) Check(ctx context.Context, rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("not a URL: %w", err)
	}
	if err := c.guard.checkURL(u); err != nil {
		return err
	}
	host, port := u.Hostname(), urlPort(u)
	if c.guard.hostAllowed(host, port) {
		return nil
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return fmt.Errorf("the host %s does not resolve: %w", host, err)
	}
	for _, a := range addrs {
		network := "tcp4"
		if !a.Unmap().Is4() {
			network = "tcp6"
		}
		if err := c.guard.checkConn(network, netip.AddrPortFrom(a, port), false); err != nil {
			return err
		}
	}
	return nil
}

// KeepAlive sets how many idle connections the client keeps to each host,
// for clients that send many requests to one endpoint.
func (c *GuardedClient) KeepAlive(perHost int) {
	if t, ok := c.client.Transport.(*http.Transport); ok {
		t.MaxIdleConnsPerHost = perHost
		t.MaxIdleConns = max(t.MaxIdleConns, perHost)
	}
}
