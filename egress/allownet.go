package egress

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/sandboxd/sandboxd/errdefs"
)

// neverOptIn are the ranges no --egress-allow-net may overlap: what a
// name on the allowlist must never reach, whatever the operator opts in.
// Loopback and unspecified addresses are the host itself, link-local is
// the cloud metadata service, multicast and broadcast are not one
// destination, and the IPv6 forms that embed an IPv4 address would let a
// translator carry any of these.
var neverOptIn = []struct {
	prefix netip.Prefix
	why    string
}{
	{mp("0.0.0.0/8"), "unspecified/this-network addresses"},
	{mp("127.0.0.0/8"), "loopback addresses"},
	{mp("169.254.0.0/16"), "link-local addresses (cloud metadata)"},
	{mp("224.0.0.0/4"), "multicast addresses"},
	{mp("255.255.255.255/32"), "the broadcast address"},
	{mp("::/128"), "the unspecified address"},
	{mp("::1/128"), "the loopback address"},
	{mp("fe80::/10"), "link-local addresses"},
	{mp("ff00::/8"), "multicast addresses"},
	{mp("::/96"), "IPv4-compatible addresses (embed an IPv4 address)"},
	{mp("::ffff:0:0/96"), "IPv4-mapped addresses (name the IPv4 range itself)"},
	{mp("64:ff9b::/96"), "NAT64 addresses (embed an IPv4 address)"},
	{mp("64:ff9b:1::/48"), "local-use NAT64 addresses (embed an IPv4 address)"},
	{mp("2002::/16"), "6to4 addresses (embed an IPv4 address)"},
	{mp("2001::/32"), "Teredo addresses (embed an IPv4 address)"},
}

// ParseAllowNets parses the --egress-allow-net ranges: CIDR prefixes in
// canonical form (no host bits set) that overlap none of neverOptIn. An
// empty list opts nothing in. Whether a range holds one of the host's own
// addresses is checked by New, against the interfaces at that moment.
func ParseAllowNets(items []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, item := range items {
		p, err := parseAllowNet(strings.TrimSpace(item))
		if err != nil {
			return nil, fmt.Errorf("%w: egress range %q: %w", errdefs.ErrInvalid, trunc(item), err)
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, nil
}

func parseAllowNet(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("want a CIDR range such as 10.20.0.0/16 or fd12:3456::/48")
	}
	if p.Addr().Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("a zoned (interface-scoped) range cannot be opted in")
	}
	if p != p.Masked() {
		return netip.Prefix{}, fmt.Errorf("host bits are set: did you mean %s?", p.Masked())
	}
	for _, n := range neverOptIn {
		if n.prefix.Overlaps(p) {
			return netip.Prefix{}, fmt.Errorf("overlaps %s (%s), which can never be reached through egress", n.prefix, n.why)
		}
	}
	return p, nil
}

// checkAllowNetsLocal refuses a range that holds one of the host's own
// addresses: a connection to the host itself is local traffic that
// reaches every service bound to a wildcard address there.
func checkAllowNetsLocal(nets []netip.Prefix, local []netip.Addr) error {
	for _, p := range nets {
		for _, a := range local {
			if p.Contains(a) {
				return fmt.Errorf("%w: --egress-allow-net %s holds %s, an address of this host, which can never be reached through egress; name a narrower range", errdefs.ErrInvalid, p, a)
			}
		}
	}
	return nil
}

// LocalAddrs returns the addresses of the host's interfaces (net.Interface
// Addrs, unmapped, without their prefix length), read afresh on each call
// so an address added after start counts at once.
func LocalAddrs() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("read the host's interface addresses: %w", err)
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		var ip net.IP
		switch v := a.(type) {
		case *net.IPNet:
			ip = v.IP
		case *net.IPAddr:
			ip = v.IP
		}
		if na, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, na.Unmap())
		}
	}
	return out, nil
}

// admission is the verdict on one resolved address: why it is refused
// (empty when it may be reached), and the opted-in range that admitted it
// when it is not public.
type admission struct {
	why string
	via netip.Prefix
}

// judge decides whether a may be dialled: a public address is admitted,
// a special-purpose one only when it lies in an --egress-allow-net range,
// and either is refused when it is one of the host's own addresses (which
// no range and no switch can admit).
func (e *Exec) judge(a netip.Addr, local []netip.Addr) admission {
	var v admission
	if !e.p.cfg.TestOnly.publicLoopback(a) {
		v.why = Refusal(a)
	}
	if v.why != "" && a.Zone() == "" {
		for _, p := range e.p.cfg.AllowNets {
			if p.Contains(a.Unmap()) {
				v = admission{via: p}
				break
			}
		}
	}
	if v.why == "" && slices.Contains(local, a.Unmap()) {
		return admission{why: "local address of the supervisor's host (one of its own interfaces)"}
	}
	return v
}
