package domain

// The SSRF guard of the http_request job.
//
// A job's URL is chosen by whoever enqueues it, so without a guard the worker
// would fetch whatever that person points it at: the cloud metadata service,
// the database, an admin port on localhost. The guard refuses every
// destination that is not a public unicast address on port 80 or 443, unless
// the operator opens it with FLINT_HTTP_ALLOW.
//
// The enforcement point is the dial: net.Dialer.Control sees the address the
// socket is about to connect to, after name resolution, so neither a host
// name that resolves to a private address nor DNS rebinding (one answer when
// checked, another when connecting) gets past it. The URL checks made before
// the request and on every redirect (scheme, user info, port, odd numeric
// host forms) give clearer errors earlier; they do not replace the dial check.

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// blockedError is the refusal of the SSRF guard. The http_request handler
// turns it into a permanent failure: retrying cannot reach a blocked address.
type blockedError struct {
	// What was refused: "address 10.0.0.1", "port 8080 on 203.0.113.9",
	// `scheme "ftp"`.
	What string
	// Why it was refused, e.g. "private network (RFC 1918)".
	Why string
	// Hint says how to open it, when FLINT_HTTP_ALLOW can.
	Hint string
	// Redirect is the redirect target that led here, if any.
	Redirect string
}

func (e *blockedError) Error() string {
	s := e.What + " is blocked (" + e.Why + ")"
	if e.Redirect != "" {
		s = "redirect to " + e.Redirect + ": " + s
	}
	if e.Hint != "" {
		s += "; " + e.Hint
	}
	return s
}

// ssrfGuard applies the allow list and the special-range tables.
type ssrfGuard struct {
	rules []allowRule
}

// newSSRFGuard parses the allow list; see ParseHTTPAllow for its entries.
func newSSRFGuard(allow []string) (*ssrfGuard, error) {
	g := &ssrfGuard{}
	for _, entry := range allow {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		r, err := parseAllowEntry(entry)
		if err != nil {
			return nil, fmt.Errorf("FLINT_HTTP_ALLOW entry %q: %w", entry, err)
		}
		g.rules = append(g.rules, r)
	}
	return g, nil
}

// hostAllowed reports whether a host-name entry opens host on port.
func (g *ssrfGuard) hostAllowed(host string, port uint16) bool {
	host = normalizeHost(host)
	for _, r := range g.rules {
		if r.host != "" && r.host == host && (r.port == 0 || r.port == port) {
			return true
		}
	}
	return false
}

// addrAllowed reports whether an IP or CIDR entry opens a on port.
func (g *ssrfGuard) addrAllowed(a netip.Addr, port uint16) bool {
	a = a.WithZone("").Unmap()
	for _, r := range g.rules {
		if r.host == "" && r.prefix.Contains(a) && (r.port == 0 || r.port == port) {
			return true
		}
	}
	return false
}

// mayOpenPort reports whether some IP or CIDR entry might open port on an
// address a host name resolves to; only the dial can tell for sure.
func (g *ssrfGuard) mayOpenPort(port uint16) bool {
	for _, r := range g.rules {
		if r.host == "" && (r.port == 0 || r.port == port) {
			return true
		}
	}
	return false
}

func standardPort(port uint16) bool { return port == 80 || port == 443 }

// checkConn is the dial-time decision: may a socket connect to ap? hostOK is
// true when the URL's host matched a host-name entry of the allow list.
func (g *ssrfGuard) checkConn(network string, ap netip.AddrPort, hostOK bool) error {
	if network != "tcp4" && network != "tcp6" {
		return &blockedError{What: fmt.Sprintf("network %q", network), Why: "only TCP over IPv4 or IPv6 is used"}
	}
	if hostOK {
		return nil
	}
	a, port := ap.Addr(), ap.Port()
	if g.addrAllowed(a, port) {
		return nil
	}
	shown := a.WithZone("").Unmap()
	if !standardPort(port) {
		return &blockedError{
			What: fmt.Sprintf("port %d on %s", port, shown),
			Why:  "only ports 80 and 443 are open",
			Hint: fmt.Sprintf("to allow it, add %s (or the URL's host name with the port) to FLINT_HTTP_ALLOW", netip.AddrPortFrom(shown, port)),
		}
	}
	if why := blockedReason(a); why != "" {
		return &blockedError{What: "address " + shown.String(), Why: why, Hint: addrHint}
	}
	return nil
}

// dialContext is the Transport's dialer. addr is the URL's host and port, so
// the host-name entries of the allow list are matched here; the resolved
// addresses are checked by the Control hook of a dialer made for this dial.
func (g *ssrfGuard) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, &blockedError{What: fmt.Sprintf("network %q", network), Why: "only TCP over IPv4 or IPv6 is used"}
	}
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("dial %s: bad port", addr)
	}
	hostOK := g.hostAllowed(host, uint16(port))
	d := net.Dialer{
		Timeout:   30 * time.Second,
		KeepAlive: 30 * time.Second,
		Control: func(network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return &blockedError{What: fmt.Sprintf("address %q", address), Why: "not an IP address and port"}
			}
			return g.checkConn(network, ap, hostOK)
		},
	}
	return d.DialContext(ctx, network, addr)
}

// checkURL checks a URL the job is about to request, the first one or a
// redirect target: http or https, no user info, a host that is a name or a
// canonical IP address, and a port that is 80, 443 or opened by the allow
// list. Addresses are checked at dial time, not here.
func (g *ssrfGuard) checkURL(u *url.URL) error {
	if err := checkURLSyntax(u); err != nil {
		return err
	}
	host := u.Hostname()
	port := urlPort(u)
	if standardPort(port) || g.hostAllowed(host, port) {
		return nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if g.addrAllowed(a, port) {
			return nil
		}
	} else if g.mayOpenPort(port) {
		return nil // a host name: the dial sees the address and decides
	}
	return &blockedError{
		What: fmt.Sprintf("port %d on %s", port, host),
		Why:  "only ports 80 and 443 are open",
		Hint: fmt.Sprintf("to allow it, add %s to FLINT_HTTP_ALLOW", net.JoinHostPort(host, strconv.Itoa(int(port)))),
	}
}

// urlPort is the URL's port, or the scheme's default. The URL must have
// passed checkURLSyntax.
func urlPort(u *url.URL) uint16 {
	if p := u.Port(); p != "" {
		n, _ := strconv.ParseUint(p, 10, 16)
		return uint16(n)
	}
	if u.Scheme == "https" {
		return 443
	}
	return 80
}

// checkURLSyntax checks what does not depend on the allow list. Its errors
// are *blockedError so that a redirect to such a URL is a permanent failure.
func checkURLSyntax(u *url.URL) error {
	if u.Scheme == "" {
		return &blockedError{What: "a URL without a scheme", Why: "the URL must be absolute, like https://example.com/path"}
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return &blockedError{What: fmt.Sprintf("scheme %q", u.Scheme), Why: "only http and https"}
	}
	if u.User != nil {
		return &blockedError{What: "a URL with user info (user:password@)", Why: "send credentials in an Authorization header instead"}
	}
	if u.Opaque != "" || u.Host == "" {
		return &blockedError{What: "a URL without a host", Why: "the URL must be absolute, like https://example.com/path"}
	}
	host := u.Hostname()
	if host == "" {
		return &blockedError{What: "a URL without a host", Why: "the URL must be absolute, like https://example.com/path"}
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.ParseUint(p, 10, 16); err != nil || n == 0 {
			return &blockedError{What: fmt.Sprintf("port %q", p), Why: "a port must be between 1 and 65535"}
		}
	}
	if _, err := netip.ParseAddr(host); err != nil && numericHost(host) {
		return &blockedError{
			What: fmt.Sprintf("host %q", host),
			Why:  "a numeric address in a non-standard form such as octal, hexadecimal, shortened or a single number; write an IPv4 address as four decimal numbers, like 93.184.216.34",
		}
	}
	return nil
}
