package jobs

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
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ParseHTTPAllow parses the value of FLINT_HTTP_ALLOW: a comma-separated list
// of destinations the http_request job may reach despite the SSRF guard.
// Each entry is one of
//
//	10.0.0.0/8          a CIDR: any address in it, on any port
//	192.168.1.20        one IP address, on any port
//	127.0.0.1:8080      one IP address, on that port only ([::1]:8080 for IPv6)
//	api.internal        a host name: URLs whose host is exactly that name, on any port
//	api.internal:8443   a host name, on that port only
//
// Blank entries are skipped. It returns the entries in canonical form, or an
// error naming the first entry that is none of the above.
func ParseHTTPAllow(s string) ([]string, error) {
	var out []string
	for _, raw := range strings.Split(s, ",") {
		entry := strings.TrimSpace(raw)
		if entry == "" {
			continue
		}
		r, err := parseAllowEntry(entry)
		if err != nil {
			return nil, fmt.Errorf("FLINT_HTTP_ALLOW entry %q: %w", entry, err)
		}
		out = append(out, r.String())
	}
	return out, nil
}

// allowRule is one parsed allow-list entry. Exactly one of prefix and host is
// set; port 0 means any port.
type allowRule struct {
	prefix netip.Prefix
	host   string // lower case, no trailing dot
	port   uint16
}

func (r allowRule) String() string {
	var s string
	switch {
	case r.host != "":
		s = r.host
	case r.prefix.IsSingleIP():
		if r.port != 0 {
			return netip.AddrPortFrom(r.prefix.Addr(), r.port).String()
		}
		return r.prefix.Addr().String()
	default:
		return r.prefix.String()
	}
	if r.port != 0 {
		s = net.JoinHostPort(s, strconv.Itoa(int(r.port)))
	}
	return s
}

func parseAllowEntry(entry string) (allowRule, error) {
	if strings.Contains(entry, "/") {
		p, err := netip.ParsePrefix(entry)
		if err != nil {
			return allowRule{}, errors.New("not a valid CIDR (like 10.0.0.0/8 or fd00::/8)")
		}
		return allowRule{prefix: unmapPrefix(p.Masked())}, nil
	}
	if a, err := netip.ParseAddr(entry); err == nil {
		if a.Zone() != "" {
			return allowRule{}, errors.New("IPv6 zones are not supported")
		}
		a = a.Unmap()
		return allowRule{prefix: netip.PrefixFrom(a, a.BitLen())}, nil
	}
	if ap, err := netip.ParseAddrPort(entry); err == nil {
		if ap.Addr().Zone() != "" {
			return allowRule{}, errors.New("IPv6 zones are not supported")
		}
		if ap.Port() == 0 {
			return allowRule{}, errors.New("port must be between 1 and 65535")
		}
		a := ap.Addr().Unmap()
		return allowRule{prefix: netip.PrefixFrom(a, a.BitLen()), port: ap.Port()}, nil
	}
	host, port := entry, uint16(0)
	if h, p, err := net.SplitHostPort(entry); err == nil {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return allowRule{}, errors.New("port must be between 1 and 65535")
		}
		host, port = h, uint16(n)
	}
	host = normalizeHost(host)
	if !validHostName(host) {
		return allowRule{}, errors.New("not a CIDR, an IP address or a host name (optionally with :port)")
	}
	return allowRule{host: host, port: port}, nil
}

// unmapPrefix turns a prefix of IPv4-mapped IPv6 addresses (::ffff:10.0.0.0/104)
// into the IPv4 prefix it stands for, since addresses are unmapped before
// they are matched.
func unmapPrefix(p netip.Prefix) netip.Prefix {
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p
}

// normalizeHost lower-cases a host name and drops a trailing dot, so that
// "API.Internal." and "api.internal" compare equal.
func normalizeHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// validHostName reports whether h (normalised) is a DNS name in ASCII
// (punycode for international names) that cannot be mistaken for a numeric
// address.
func validHostName(h string) bool {
	if h == "" || len(h) > 253 || numericHost(h) {
		return false
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// numericHost reports whether a host that is not a canonical IP address would
// still be read as an IPv4 address by some resolver: inet_aton accepts octal
// ("0177.0.0.1"), hexadecimal ("0x7f.1"), shortened ("127.1") and single-number
// ("2130706433") forms. Go's own parser refuses them, but the system resolver
// may not, so such hosts are refused outright rather than left to chance. Real
// top-level domains are never numeric, so no legitimate name is lost.
func numericHost(h string) bool {
	h = strings.TrimSuffix(h, ".")
	last := h[strings.LastIndexByte(h, '.')+1:]
	if last == "" {
		return false
	}
	if len(last) >= 2 && last[0] == '0' && (last[1] == 'x' || last[1] == 'X') {
		return isHexDigits(last[2:])
	}
	for i := 0; i < len(last); i++ {
		if last[i] < '0' || last[i] > '9' {
			return false
		}
	}
	return true
}

func isHexDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

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

// special is one range of the IANA special-purpose registries (or otherwise
// not publicly routable) with the reason it is refused.
type special struct {
	prefix netip.Prefix
	why    string
}

func mustSpecial(cidr, why string) special {
	return special{prefix: netip.MustParsePrefix(cidr), why: why}
}

// specialV4 lists IPv4 destinations that are not the public internet. More
// specific entries come first so that the reason given is the most precise.
var specialV4 = []special{
	mustSpecial("0.0.0.0/32", "unspecified address"),
	mustSpecial("0.0.0.0/8", `"this network" (0.0.0.0/8)`),
	mustSpecial("10.0.0.0/8", "private network (RFC 1918)"),
	mustSpecial("100.64.0.0/10", "carrier-grade NAT shared space (100.64.0.0/10)"),
	mustSpecial("127.0.0.0/8", "loopback"),
	mustSpecial("169.254.169.254/32", "link-local: the cloud metadata service"),
	mustSpecial("169.254.0.0/16", "link-local"),
	mustSpecial("172.16.0.0/12", "private network (RFC 1918)"),
	mustSpecial("192.0.0.0/24", "IETF protocol assignments (192.0.0.0/24)"),
	mustSpecial("192.0.2.0/24", "documentation range (TEST-NET-1)"),
	mustSpecial("192.88.99.0/24", "deprecated 6to4 relay anycast"),
	mustSpecial("192.168.0.0/16", "private network (RFC 1918)"),
	mustSpecial("198.18.0.0/15", "benchmarking range (198.18.0.0/15)"),
	mustSpecial("198.51.100.0/24", "documentation range (TEST-NET-2)"),
	mustSpecial("203.0.113.0/24", "documentation range (TEST-NET-3)"),
	mustSpecial("224.0.0.0/4", "multicast"),
	mustSpecial("255.255.255.255/32", "broadcast"),
	mustSpecial("240.0.0.0/4", "reserved (240.0.0.0/4)"),
}

// specialV6 lists IPv6 destinations that are refused outright. The ranges
// that embed an IPv4 address and may lead to the public internet (NAT64
// 64:ff9b::/96, 6to4 2002::/16) are judged by the embedded address instead,
// and IPv4-mapped addresses are unmapped first. Anything outside 2000::/3,
// the global unicast space, is refused after this list.
var specialV6 = []special{
	mustSpecial("::/128", "unspecified address"),
	mustSpecial("::1/128", "loopback"),
	mustSpecial("::/96", "deprecated IPv4-compatible address"),
	mustSpecial("64:ff9b:1::/48", "local-use NAT64 (64:ff9b:1::/48)"),
	mustSpecial("100::/64", "discard-only range (100::/64)"),
	mustSpecial("2001::/32", "Teredo tunnelling (2001::/32)"),
	mustSpecial("2001::/23", "IETF protocol assignments (2001::/23)"),
	mustSpecial("2001:db8::/32", "documentation range (2001:db8::/32)"),
	mustSpecial("3fff::/20", "documentation range (3fff::/20)"),
	mustSpecial("5f00::/16", "segment routing (5f00::/16)"),
	mustSpecial("fc00::/7", "unique local address (fc00::/7)"),
	mustSpecial("fe80::/10", "link-local"),
	mustSpecial("fec0::/10", "deprecated site-local"),
	mustSpecial("ff00::/8", "multicast"),
}

var (
	nat64Prefix     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFourPrefix = netip.MustParsePrefix("2002::/16")
	globalUnicastV6 = netip.MustParsePrefix("2000::/3")
)

const (
	notGlobalWhy = "not a global unicast address"
	addrHint     = "to allow it, add it (or a CIDR that contains it) to FLINT_HTTP_ALLOW"
)

// blockedReason says why a is not a public unicast address that the
// http_request job may connect to, or returns "" if it is one.
func blockedReason(a netip.Addr) string {
	if !a.IsValid() {
		return "invalid address"
	}
	a = a.WithZone("")
	if a.Is4In6() {
		v4 := a.Unmap()
		if why := blockedReasonV4(v4); why != "" {
			return fmt.Sprintf("IPv4-mapped %s: %s", v4, why)
		}
		return ""
	}
	if a.Is4() {
		return blockedReasonV4(a)
	}
	b := a.As16()
	switch {
	case nat64Prefix.Contains(a):
		v4 := netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
		if why := blockedReasonV4(v4); why != "" {
			return fmt.Sprintf("NAT64 of %s: %s", v4, why)
		}
		return ""
	case sixToFourPrefix.Contains(a):
		v4 := netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})
		if why := blockedReasonV4(v4); why != "" {
			return fmt.Sprintf("6to4 of %s: %s", v4, why)
		}
		return ""
	}
	for _, s := range specialV6 {
		if s.prefix.Contains(a) {
			return s.why
		}
	}
	if !globalUnicastV6.Contains(a) || !a.IsGlobalUnicast() {
		return notGlobalWhy
	}
	return ""
}

func blockedReasonV4(a netip.Addr) string {
	for _, s := range specialV4 {
		if s.prefix.Contains(a) {
			return s.why
		}
	}
	if !a.IsGlobalUnicast() {
		return notGlobalWhy
	}
	return ""
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
