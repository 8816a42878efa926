package egress

import "net/netip"

// special lists every range the proxy refuses after resolution, with the
// reason a refusal names. Sources: the IANA IPv4 and IPv6 Special-Purpose
// Address Registries (RFC 6890 and its updates). The ranges that embed an
// IPv4 address in an IPv6 one (NAT64, 6to4, Teredo, IPv4-compatible) are
// refused whole: through them a "public" IPv6 address can carry a private
// IPv4 one to a translator.
var special = []struct {
	prefix netip.Prefix
	why    string
}{
	{mp("0.0.0.0/8"), "unspecified/this-network address"},
	{mp("10.0.0.0/8"), "private address (RFC 1918)"},
	{mp("100.64.0.0/10"), "carrier-grade NAT address (RFC 6598)"},
	{mp("127.0.0.0/8"), "loopback address"},
	{mp("169.254.0.0/16"), "link-local address (incl. cloud metadata 169.254.169.254)"},
	{mp("172.16.0.0/12"), "private address (RFC 1918)"},
	{mp("192.0.0.0/24"), "IETF protocol assignment (RFC 6890)"},
	{mp("192.0.2.0/24"), "documentation address (TEST-NET-1)"},
	{mp("192.88.99.0/24"), "6to4 relay anycast (deprecated)"},
	{mp("192.168.0.0/16"), "private address (RFC 1918)"},
	{mp("198.18.0.0/15"), "benchmarking address (RFC 2544)"},
	{mp("198.51.100.0/24"), "documentation address (TEST-NET-2)"},
	{mp("203.0.113.0/24"), "documentation address (TEST-NET-3)"},
	{mp("224.0.0.0/4"), "multicast address"},
	{mp("240.0.0.0/4"), "reserved address (incl. broadcast)"},
	{mp("::/128"), "unspecified address"},
	{mp("::1/128"), "loopback address"},
	{mp("::/96"), "IPv4-compatible IPv6 address (deprecated)"},
	{mp("64:ff9b::/96"), "NAT64 address (embeds an IPv4 address)"},
	{mp("64:ff9b:1::/48"), "local-use NAT64 address"},
	{mp("100::/64"), "discard-only address"},
	{mp("2001::/23"), "IETF protocol assignment (incl. Teredo)"},
	{mp("2001:db8::/32"), "documentation address"},
	{mp("2002::/16"), "6to4 address (embeds an IPv4 address)"},
	{mp("3fff::/20"), "documentation address"},
	{mp("5f00::/16"), "segment-routing SID"},
	{mp("fc00::/7"), "unique local address (ULA)"},
	{mp("fe80::/10"), "link-local address"},
	{mp("fec0::/10"), "site-local address (deprecated)"},
	{mp("ff00::/8"), "multicast address"},
}

func mp(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// Refusal returns why the proxy must not connect to ip, or "" when ip is a
// public unicast address. An IPv4-mapped IPv6 address (::ffff:a.b.c.d) is
// judged as the IPv4 address it carries; a zoned address is always refused.
func Refusal(ip netip.Addr) string {
	if !ip.IsValid() {
		return "invalid address"
	}
	if ip.Zone() != "" {
		return "zoned (interface-scoped) address"
	}
	ip = ip.Unmap()
	for _, s := range special {
		if s.prefix.Contains(ip) {
			return s.why
		}
	}
	if ip.Is6() && !mp("2000::/3").Contains(ip) {
		// Outside global unicast, nothing is assigned for use on the internet.
		return "IPv6 address outside global unicast (2000::/3)"
	}
	return ""
}
