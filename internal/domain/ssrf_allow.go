package domain

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
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
