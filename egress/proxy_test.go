package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fixture is one exec's proxy on a Unix socket (as in production), with
// servers on 127.0.0.2 standing in for the internet.
type fixture struct {
	exec  *Exec
	sock  string
	plain *httptest.Server
	tls   *httptest.Server
	done  chan error
}

func listenOn(t *testing.T, h http.Handler, useTLS bool) *httptest.Server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewUnstartedServer(h)
	s.Listener.Close()
	s.Listener = l
	if useTLS {
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s
}

func port(t *testing.T, s *httptest.Server) int {
	t.Helper()
	_, p, _ := net.SplitHostPort(s.Listener.Addr().String())
	n, err := parsePort(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func newFixture(t *testing.T, lim Limits, resolve map[string][][]netip.Addr, allowFmt string) *fixture {
	t.Helper()
	f := &fixture{done: make(chan error, 1)}
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s %s", r.Host, r.URL.Path)
	})
	f.plain, f.tls = listenOn(t, hello, false), listenOn(t, hello, true)
	allow, err := ParseAllowlist(fmt.Sprintf(allowFmt, port(t, f.plain), port(t, f.tls)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{Allow: allow, Limits: lim, TestOnly: &TestOnly{
		Resolve:        resolve,
		PublicLoopback: []netip.Addr{netip.MustParseAddr("127.0.0.2")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	f.sock = filepath.Join(t.TempDir(), "proxy.sock")
	l, err := net.Listen("unix", f.sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.exec = p.NewExec("e1", nil)
	go func() { f.done <- f.exec.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-f.done; err != nil {
			t.Error(err)
		}
	})
	return f
}

func (f *fixture) client(serverName string) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "relay"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", f.sock)
		},
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true, ServerName: serverName},
		DisableKeepAlives: true,
	}}
}

var (
	pub  = []netip.Addr{netip.MustParseAddr("127.0.0.2")}
	priv = []netip.Addr{netip.MustParseAddr("10.0.0.1")}
)

func defaultResolve() map[string][][]netip.Addr {
	return map[string][][]netip.Addr{
		"pypi.test":       {pub},
		"off.test":        {pub},
		"private.test":    {priv},
		"localhost":       {{netip.MustParseAddr("127.0.0.1")}},
		"metadata.test":   {{netip.MustParseAddr("169.254.169.254")}},
		"rebind.test":     {pub, priv},
		"mixed.test":      {{pub[0], priv[0]}},
		"nxdomain.test":   nil,
		"other.pypi.test": {pub},
	}
}

const allowAll = "pypi.test:%[1]d,pypi.test:%[2]d,private.test:%[1]d,localhost:%[1]d,metadata.test:%[1]d,rebind.test:%[1]d,mixed.test:%[1]d,*.pypi.test:%[2]d"

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestProxyAllowedAndRefused(t *testing.T) {
	f := newFixture(t, Limits{}, defaultResolve(), allowAll)
	pp, tp := port(t, f.plain), port(t, f.tls)
	c := f.client("pypi.test")
	for _, tc := range []struct {
		url        string
		wantStatus int
		wantBody   string
	}{
		{fmt.Sprintf("http://pypi.test:%d/simple/", pp), 200, "hello from pypi.test"},
		{fmt.Sprintf("https://pypi.test:%d/simple/", tp), 200, "hello from pypi.test"},
		{fmt.Sprintf("http://off.test:%d/", pp), 403, "not on the operator's egress allowlist"},
		{fmt.Sprintf("http://pypi.test:%d/", tp+1000), 403, "not on the operator's egress allowlist"},
		{fmt.Sprintf("http://127.0.0.2:%d/", pp), 403, "IP literal"},
		{fmt.Sprintf("http://localhost:%d/", pp), 403, "loopback"},
		{fmt.Sprintf("http://private.test:%d/", pp), 403, "10.0.0.1, a private address"},
		{fmt.Sprintf("http://metadata.test:%d/", pp), 403, "link-local"},
		{fmt.Sprintf("http://mixed.test:%d/", pp), 403, "10.0.0.1"},
		{fmt.Sprintf("http://rebind.test:%d/", pp), 200, "hello from rebind.test"},
		{fmt.Sprintf("http://rebind.test:%d/", pp), 403, "10.0.0.1, a private address"},
	} {
		st, body := get(t, c, tc.url)
		if st != tc.wantStatus || !strings.Contains(body, tc.wantBody) {
			t.Errorf("GET %s: %d %q; want %d and %q", tc.url, st, body, tc.wantStatus, tc.wantBody)
		}
	}
	recs := waitRecords(t, f.exec, 11)
	allowed := 0
	for _, r := range recs {
		if r.Allowed {
			allowed++
			if r.BytesIn == 0 || r.BytesOut == 0 || r.Address != "127.0.0.2" {
				t.Errorf("allowed record without bytes or address: %+v", r)
			}
		} else if r.Reason == "" {
			t.Errorf("refused record without reason: %+v", r)
		}
	}
	if allowed != 3 {
		t.Errorf("%d allowed records, want 3: %+v", allowed, recs)
	}
}

func waitRecords(t *testing.T, e *Exec, n int) []Record {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if r := e.Records(); len(r) >= n {
			return r
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("want %d records, have %+v", n, e.Records())
	return nil
}

func TestProxySNIMismatchRefused(t *testing.T) {
	f := newFixture(t, Limits{}, defaultResolve(), allowAll)
	tp := port(t, f.tls)
	for _, sni := range []string{"other.pypi.test", "evil.example"} {
		st, body := get(t, f.client(sni), fmt.Sprintf("https://pypi.test:%d/", tp))
		if st != 0 {
			t.Errorf("SNI %q: got through: %d %q", sni, st, body)
		}
	}
	for _, r := range waitRecords(t, f.exec, 2) {
		if r.Allowed || !strings.Contains(r.Reason, "server name") {
			t.Errorf("SNI mismatch record: %+v", r)
		}
	}
}

func TestProxyConnectNeedsTLS(t *testing.T) {
	f := newFixture(t, Limits{}, defaultResolve(), allowAll)
	c, err := net.Dial("unix", f.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT pypi.test:%d HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nHost: pypi.test\r\n\r\n", port(t, f.plain))
	b, _ := io.ReadAll(c)
	if strings.Contains(string(b), "hello") {
		t.Fatalf("plain text through CONNECT reached the server: %q", b)
	}
	r := waitRecords(t, f.exec, 1)[0]
	if r.Allowed || !strings.Contains(r.Reason, "only TLS") {
		t.Errorf("record: %+v", r)
	}
}

func TestProxyConnLimit(t *testing.T) {
	f := newFixture(t, Limits{MaxConns: 2}, defaultResolve(), allowAll)
	c := f.client("pypi.test")
	u := fmt.Sprintf("http://pypi.test:%d/", port(t, f.plain))
	for i := 0; i < 3; i++ {
		st, _ := get(t, c, u)
		if want := map[bool]int{true: 200, false: 0}[i < 2]; st != want {
			t.Errorf("request %d: status %d, want %d", i, st, want)
		}
	}
	if d := f.exec.Dropped(); d != 1 {
		t.Errorf("dropped %d, want 1", d)
	}
}

func TestProxyByteLimit(t *testing.T) {
	f := newFixture(t, Limits{MaxBytes: 300}, defaultResolve(), allowAll)
	big := strings.Repeat("x", 4096)
	_, body := get(t, f.client("pypi.test"), fmt.Sprintf("http://pypi.test:%d/%s", port(t, f.plain), big))
	if strings.Contains(body, "hello") {
		t.Errorf("over-budget request went through: %q", body)
	}
	r := waitRecords(t, f.exec, 1)[0]
	if !strings.Contains(r.Reason, "byte limit") || r.BytesOut > 300 {
		t.Errorf("record: %+v", r)
	}
}

func TestProxyHeadBounded(t *testing.T) {
	f := newFixture(t, Limits{}, defaultResolve(), allowAll)
	c, err := net.Dial("unix", f.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() {
		fmt.Fprintf(c, "GET http://pypi.test/ HTTP/1.1\r\nX: %s", strings.Repeat("a", 1<<20))
	}()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err == nil && resp.StatusCode != 403 {
		t.Errorf("over-long head: status %d", resp.StatusCode)
	}
	if r := waitRecords(t, f.exec, 1)[0]; r.Allowed {
		t.Errorf("record: %+v", r)
	}
}

// countingResolver answers a public address once, then a private one: a
// rebinding DNS server. The proxy must look up once and dial what it got.
type countingResolver struct {
	mu    sync.Mutex
	calls int
}

func (r *countingResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.calls == 1 {
		return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
	}
	return []netip.Addr{netip.MustParseAddr("10.0.0.1")}, nil
}

// recordingDialer never touches the network: it records the address and
// serves a canned response over a pipe.
type recordingDialer struct {
	mu    sync.Mutex
	addrs []string
}

func (d *recordingDialer) DialContext(_ context.Context, _, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.addrs = append(d.addrs, addr)
	d.mu.Unlock()
	a, b := net.Pipe()
	go func() {
		defer b.Close()
		http.ReadRequest(bufio.NewReader(b))
		io.WriteString(b, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
	}()
	return a, nil
}

func TestProxyDialsTheCheckedAddress(t *testing.T) {
	allow, _ := ParseAllowlist("rebind.example")
	res, dial := &countingResolver{}, &recordingDialer{}
	p, err := New(Config{Allow: allow, Resolver: res, Dialer: dial})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := p.NewExec("e2", nil)
	go e.Serve(ctx, l)
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "GET http://rebind.example/ HTTP/1.1\r\nHost: rebind.example\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("response: %v %v", resp, err)
	}
	c.Close()
	r := waitRecords(t, e, 1)[0]
	if res.calls != 1 || len(dial.addrs) != 1 || dial.addrs[0] != "93.184.216.34:80" || r.Address != "93.184.216.34" {
		t.Errorf("lookups %d, dials %v, record %+v: want one lookup and a dial of the checked address", res.calls, dial.addrs, r)
	}
}

func TestTestOnlyFromEnv(t *testing.T) {
	env := map[string]string{
		EnvTestOnlyResolve:        "pypi.test=127.0.0.2,rebind.test=127.0.0.2;10.0.0.1,mixed.test=127.0.0.2+10.0.0.1",
		EnvTestOnlyPublicLoopback: "127.0.0.2",
	}
	to, err := TestOnlyFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if len(to.Resolve["rebind.test"]) != 2 || len(to.Resolve["mixed.test"][0]) != 2 || !to.publicLoopback(pub[0]) {
		t.Errorf("parsed %+v", to)
	}
	if to.publicLoopback(netip.MustParseAddr("127.0.0.1")) {
		t.Error("127.0.0.1 counted as public")
	}
	env[EnvTestOnlyPublicLoopback] = "10.0.0.1"
	if _, err := TestOnlyFromEnv(func(k string) string { return env[k] }); err == nil {
		t.Error("a non-loopback public override accepted")
	}
	if to, err := TestOnlyFromEnv(func(string) string { return "" }); to != nil || err != nil {
		t.Errorf("unset: %v %v", to, err)
	}
}

// TestProxyExecEndClosesConnections: when the exec ends (its timeout, or
// its end), Serve closes the listener and every open connection, and
// records them, before it returns.
func TestProxyExecEndClosesConnections(t *testing.T) {
	allow, _ := ParseAllowlist("pypi.test")
	x := startExecProxy(t, Config{Allow: allow, TestOnly: &TestOnly{Resolve: map[string][][]netip.Addr{"pypi.test": {pub}}, PublicLoopback: pub}}, "e3")
	e, sock, cancel, done := x.e, x.sock, x.cancel, x.done
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET http://pypi.test/ HTTP/1.1\r\n") // a head that never ends
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve still running after the exec ended")
	}
	if r := e.Records(); len(r) != 1 || r[0].Allowed {
		t.Errorf("records: %+v", r)
	}
	if _, err := net.Dial("unix", sock); err == nil {
		t.Error("the socket still accepts after the exec ended")
	}
}

// rawUpstream is a TCP listener on 127.0.0.2 standing in for a server: it
// counts the connections it accepts and closes them.
type rawUpstream struct {
	l       net.Listener
	accepts atomic.Int64
}

func startRawUpstream(t *testing.T) *rawUpstream {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &rawUpstream{l: l}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			u.accepts.Add(1)
			c.Close()
		}
	}()
	return u
}

func (u *rawUpstream) port() int { return u.l.Addr().(*net.TCPAddr).Port }

// connectWith sends CONNECT host:port and then hello through f's socket,
// and returns the proxy's answer line and what followed until it closed.
func connectWith(t *testing.T, f *fixture, hostport string, hello []byte) string {
	t.Helper()
	c, err := net.Dial("unix", f.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", hostport, hostport)
	c.Write(hello)
	b, _ := io.ReadAll(c)
	return string(b)
}

// TestProxyRefusesECH: a CONNECT whose ClientHello carries an ECH or ESNI
// extension never reaches upstream, even with the CONNECT host as its
// outer name; a plain hello for the same host does.
func TestProxyRefusesECH(t *testing.T) {
	up := startRawUpstream(t)
	f := newFixture(t, Limits{}, defaultResolve(), allowAll+fmt.Sprintf(",pypi.test:%d", up.port()))
	hp := fmt.Sprintf("pypi.test:%d", up.port())
	for i, typ := range []uint16{0xfe0d, 0xffce} {
		connectWith(t, f, hp, rawHello(sniExt("pypi.test"), testExt{typ: typ, data: []byte{0, 1, 2, 3}}))
		r := waitRecords(t, f.exec, i+1)[i]
		if r.Allowed || !strings.Contains(r.Reason, "encrypted ClientHello") {
			t.Errorf("extension %#04x: record %+v", typ, r)
		}
	}
	if n := up.accepts.Load(); n != 0 {
		t.Fatalf("an encrypted ClientHello reached upstream (%d connections)", n)
	}
	connectWith(t, f, hp, rawHello(sniExt("pypi.test")))
	if r := waitRecords(t, f.exec, 3)[2]; !r.Allowed || up.accepts.Load() != 1 {
		t.Errorf("plain hello: record %+v, upstream accepts %d", r, up.accepts.Load())
	}
}

// TestProxyForwardsTheCheckedName: a plain-HTTP forward sends the name the
// allowlist checked (lower case, no trailing dot), not the URL's spelling.
func TestProxyForwardsTheCheckedName(t *testing.T) {
	f := newFixture(t, Limits{}, defaultResolve(), allowAll)
	pp := port(t, f.plain)
	c, err := net.Dial("unix", f.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET http://PyPI.Test.:%d/x HTTP/1.1\r\nHost: PyPI.Test.:%d\r\n\r\n", pp, pp)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if want := fmt.Sprintf("hello from pypi.test:%d /x", pp); resp.StatusCode != 200 || string(b) != want {
		t.Errorf("upstream saw %d %q, want %q", resp.StatusCode, b, want)
	}
}
