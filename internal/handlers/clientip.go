package handlers

import (
	"net/netip"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// clientIP is the address a request came from: the connection's peer, or,
// when the peer is a trusted reverse proxy (Config.TrustedProxies), the
// nearest address in X-Forwarded-For that is not one. Proxies append the
// address they received from, so everything left of the first untrusted
// entry may have been written by the client and is ignored. The sign-in
// throttle, sessions and the audit trail all use it: behind a proxy the
// peer is the proxy, the same for everybody.
func (s *server) clientIP(c *fiber.Ctx) string {
	peer, ok := netip.AddrFromSlice(c.Context().RemoteIP())
	if !ok {
		return c.IP()
	}
	addr := peer.Unmap()
	if !s.trustedProxy(addr) {
		return addr.String()
	}
	hops := strings.Split(c.Get(fiber.HeaderXForwardedFor), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		hop, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break // a malformed entry: nothing left of it can be believed
		}
		addr = hop.Unmap()
		if !s.trustedProxy(addr) {
			break
		}
	}
	return addr.String()
}

// clientIPKey holds clientIP's answer in Locals, set for every request.
const clientIPKey = "client_ip"

// clientAddr is the client's address as clientIP found it.
func clientAddr(c *fiber.Ctx) string {
	if ip, ok := c.Locals(clientIPKey).(string); ok {
		return ip
	}
	return c.IP()
}

func (s *server) trustedProxy(a netip.Addr) bool {
	for _, p := range s.proxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// throttleAddress is the address as the sign-in throttle counts it: an
// IPv4 address whole, an IPv6 address by its /64, which one subscriber
// usually holds whole (counting single IPv6 addresses would give an
// attacker 2^64 fresh ones).
func throttleAddress(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	a = a.Unmap()
	if a.Is4() {
		return a.String()
	}
	p, _ := a.Prefix(64)
	return p.String()
}
