package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sandboxd/sandboxd/errdefs"
)

func TestParseAllowNets(t *testing.T) {
	got, err := ParseAllowNets([]string{"10.0.0.0/8", " 100.64.0.0/10", "192.0.2.0/24", "fd00::/8", "10.0.0.0/8", "203.0.113.7/32"})
	if err != nil || len(got) != 5 {
		t.Fatalf("good ranges: %v, %v", got, err)
	}
	for _, tc := range []struct{ in, why string }{
		{"127.0.0.0/8", "loopback"},
		{"127.0.0.1/32", "loopback"},
		{"169.254.0.0/16", "link-local"},
		{"169.254.169.254/32", "cloud metadata"},
		{"0.0.0.0/0", "unspecified"},
		{"::/0", "unspecified"},
		{"224.0.0.0/4", "multicast"},
		{"255.255.255.255/32", "broadcast"},
		{"ff02::/16", "multicast"},
		{"fe80::/64", "link-local"},
		{"::1/128", "loopback"},
		{"::ffff:10.0.0.0/104", "IPv4-mapped"},
		{"64:ff9b::/96", "NAT64"},
		{"2002::/16", "6to4"},
		{"10.0.0.1/8", "host bits"},
		{"10.0.0.1", "CIDR"},
		{"fe80::/64%eth0", "CIDR"},
		{"mirror.internal", "CIDR"},
	} {
		_, err := ParseAllowNets([]string{tc.in})
		if err == nil || !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("ParseAllowNets(%q) = %v, want ErrInvalid naming %q", tc.in, err, tc.why)
		}
	}
}

func localAddrs(s ...string) func() ([]netip.Addr, error) {
	return func() ([]netip.Addr, error) {
		var out []netip.Addr
		for _, a := range s {
			out = append(out, netip.MustParseAddr(a))
		}
		return out, nil
	}
}

// TestNewRefusesAllowNetHoldingHostAddress: a range holding one of the
// host's own addresses never starts a proxy.
func TestNewRefusesAllowNetHoldingHostAddress(t *testing.T) {
	allow, _ := ParseAllowlist("mirror.internal")
	cfg := Config{Allow: allow, AllowNets: []netip.Prefix{mp("10.0.0.0/8")}, LocalAddrs: localAddrs("127.0.0.1", "10.9.8.7")}
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "10.9.8.7, an address of this host") {
		t.Errorf("New with a range holding a host address: %v", err)
	}
	cfg.AllowNets = []netip.Prefix{mp("10.20.0.0/16")}
	if _, err := New(cfg); err != nil {
		t.Errorf("New with a range clear of the host: %v", err)
	}
	cfg.AllowNets = []netip.Prefix{mp("127.0.0.0/8")}
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("New with loopback opted in: %v", err)
	}
}

func TestLocalAddrsReadsInterfaces(t *testing.T) {
	local, err := LocalAddrs()
	if err != nil {
		t.Fatal(err)
	}
	ifs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	if len(local) != len(ifs) || len(local) == 0 {
		t.Fatalf("LocalAddrs %v, interfaces %v", local, ifs)
	}
	for _, a := range ifs {
		ip, _, _ := net.ParseCIDR(a.String())
		if na, _ := netip.AddrFromSlice(ip); !containsAddr(local, na.Unmap()) {
			t.Errorf("%s missing from %v", a, local)
		}
	}
}

func containsAddr(s []netip.Addr, a netip.Addr) bool {
	for _, x := range s {
		if x == a {
			return true
		}
	}
	return false
}

// mapResolver answers from a fixed map and counts lookups.
type mapResolver struct {
	mu    sync.Mutex
	m     map[string][]netip.Addr
	calls map[string]int
}

func (r *mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[host]++
	a, ok := r.m[host]
	if !ok {
		return nil, fmt.Errorf("no such host")
	}
	return a, nil
}

// execProxy is one exec of a proxy serving a Unix socket.
type execProxy struct {
	e      *Exec
	sock   string
	cancel context.CancelFunc // ends the exec
	done   chan error         // Serve's result
}

// startExecProxy starts exec id of a proxy built from cfg on a Unix socket.
func startExecProxy(t *testing.T, cfg Config, id string) *execProxy {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	x := &execProxy{sock: filepath.Join(t.TempDir(), "s"), done: make(chan error, 1)}
	l, err := net.Listen("unix", x.sock)
	if err != nil {
		t.Fatal(err)
	}
	var ctx context.Context
	ctx, x.cancel = context.WithCancel(context.Background())
	x.e = p.NewExec(id, nil)
	go func() { x.done <- x.e.Serve(ctx, l) }()
	return x
}

// serveProxy serves one exec of a proxy built from cfg on a Unix socket
// until the test ends.
func serveProxy(t *testing.T, cfg Config) (*Exec, string) {
	t.Helper()
	x := startExecProxy(t, cfg, "e-allownet")
	t.Cleanup(func() { x.cancel(); <-x.done })
	return x.e, x.sock
}

// plainGet sends one plain-HTTP proxy request for u through sock.
func plainGet(t *testing.T, sock, u string) int {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	host := strings.TrimPrefix(u, "http://")
	host = host[:strings.IndexByte(host, '/')]
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", u, host)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestProxyAllowNet: an address in an opted-in range is reached through a
// name on the allowlist, and the record names the range; the range admits
// no name off the allowlist, no IP literal, no address outside it and
// never the host's own address; without the range the name is refused.
func TestProxyAllowNet(t *testing.T) {
	allow, _ := ParseAllowlist("mirror.internal,other.internal,self.internal,meta.internal")
	res := &mapResolver{calls: map[string]int{}, m: map[string][]netip.Addr{
		"mirror.internal":    {netip.MustParseAddr("10.20.3.4")},
		"notlisted.internal": {netip.MustParseAddr("10.20.3.4")},
		"other.internal":     {netip.MustParseAddr("10.30.0.1")},
		"self.internal":      {netip.MustParseAddr("10.20.0.1")},
		"meta.internal":      {netip.MustParseAddr("169.254.169.254")},
	}}
	dial := &recordingDialer{}
	cfg := Config{Allow: allow, Resolver: res, Dialer: dial, AllowNets: []netip.Prefix{mp("10.20.0.0/24"), mp("10.20.3.0/24")},
		LocalAddrs: localAddrs("127.0.0.1", "10.20.0.1")}
	// 10.20.0.0/24 holds the host's 10.20.0.1: refused at start.
	if _, err := New(cfg); err == nil {
		t.Fatal("a range holding the host's address was accepted")
	}
	cfg.AllowNets = []netip.Prefix{mp("10.20.3.0/24")}
	e, sock := serveProxy(t, cfg)
	for _, tc := range []struct {
		u    string
		want int
	}{
		{"http://mirror.internal/simple/", 200},
		{"http://notlisted.internal/", 403},
		{"http://10.20.3.4/", 403},
		{"http://other.internal/", 403},
		{"http://meta.internal/", 403},
	} {
		if got := plainGet(t, sock, tc.u); got != tc.want {
			t.Errorf("GET %s: %d, want %d", tc.u, got, tc.want)
		}
	}
	// Records come in order of completion: find the allowed one by host.
	for _, r := range waitRecords(t, e, 5) {
		if r.Host != "mirror.internal" {
			if r.Allowed || r.AllowNet != "" {
				t.Errorf("refused record: %+v", r)
			}
		} else if !r.Allowed || r.AllowNet != "10.20.3.0/24" || !strings.Contains(r.Reason, "10.20.3.0/24") || r.Address != "10.20.3.4" {
			t.Errorf("allowed record: %+v", r)
		}
	}
	if res.calls["notlisted.internal"] != 0 || len(dial.addrs) != 1 || dial.addrs[0] != "10.20.3.4:80" {
		t.Errorf("lookups %v, dials %v: want no lookup off the allowlist and one dial", res.calls, dial.addrs)
	}

	// Without the range the same name is refused as private.
	cfg.AllowNets = nil
	e2, sock2 := serveProxy(t, cfg)
	if got := plainGet(t, sock2, "http://mirror.internal/"); got != 403 {
		t.Errorf("without --egress-allow-net: %d", got)
	}
	if r := waitRecords(t, e2, 1)[0]; r.Allowed || !strings.Contains(r.Reason, "private address") {
		t.Errorf("record without the range: %+v", r)
	}
}

// TestProxyRefusesLocalInterfaceAddresses: a name on the allowlist that
// resolves to one of the host's own addresses is refused, even when the
// address is otherwise reachable (here: public by the TESTONLY switch),
// and nothing is dialled.
func TestProxyRefusesLocalInterfaceAddresses(t *testing.T) {
	var hits atomic.Int64
	up := listenOn(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }), false)
	allow, _ := ParseAllowlist(fmt.Sprintf("pypi.test:%d", port(t, up)))
	e, sock := serveProxy(t, Config{Allow: allow,
		LocalAddrs: localAddrs("127.0.0.1", "127.0.0.2"),
		TestOnly:   &TestOnly{Resolve: map[string][][]netip.Addr{"pypi.test": {pub}}, PublicLoopback: pub}})
	if got := plainGet(t, sock, fmt.Sprintf("http://pypi.test:%d/", port(t, up))); got != 403 {
		t.Errorf("GET a name resolving to the host's own address: %d, want 403", got)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the host's own address was reached (%d requests)", n)
	}
	if r := waitRecords(t, e, 1)[0]; r.Allowed || !strings.Contains(r.Reason, "local address of the supervisor's host") {
		t.Errorf("record: %+v", r)
	}
}
