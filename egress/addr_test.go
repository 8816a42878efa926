package egress

import (
	"net/netip"
	"testing"
)

func TestRefusal(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		public bool
	}{
		{"93.184.216.34", true},
		{"151.101.0.223", true},
		{"2a04:4e42::223", true},
		{"2606:4700::1", true},
		{"0.0.0.0", false},
		{"0.1.2.3", false},
		{"10.0.0.1", false},
		{"100.64.0.1", false},
		{"100.127.255.255", false},
		{"100.128.0.1", true},
		{"127.0.0.1", false},
		{"127.9.9.9", false},
		{"169.254.169.254", false},
		{"172.16.0.1", false},
		{"172.31.255.255", false},
		{"172.32.0.1", true},
		{"192.0.0.8", false},
		{"192.0.2.1", false},
		{"192.168.1.1", false},
		{"198.18.0.1", false},
		{"198.51.100.7", false},
		{"203.0.113.9", false},
		{"224.0.0.251", false},
		{"239.255.255.250", false},
		{"240.0.0.1", false},
		{"255.255.255.255", false},
		{"::", false},
		{"::1", false},
		{"::ffff:127.0.0.1", false},
		{"::ffff:10.1.2.3", false},
		{"::ffff:93.184.216.34", true},
		{"::127.0.0.1", false},
		{"64:ff9b::a00:1", false},
		{"2002:a00:1::", false},
		{"2001:0:4136:e378::1", false},
		{"2001:db8::1", false},
		{"fc00::1", false},
		{"fd12:3456::1", false},
		{"fe80::1", false},
		{"fec0::1", false},
		{"ff02::1", false},
		{"100::1", false},
		{"4000::1", false},
		{"fe80::1%eth0", false},
	} {
		a := netip.MustParseAddr(tc.addr)
		why := Refusal(a)
		if (why == "") != tc.public {
			t.Errorf("Refusal(%s) = %q, want public=%v", tc.addr, why, tc.public)
		}
	}
	if Refusal(netip.Addr{}) == "" {
		t.Error("the invalid address passed")
	}
}
