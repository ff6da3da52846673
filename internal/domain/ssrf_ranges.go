package domain

import (
	"fmt"
	"net/netip"
)

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
