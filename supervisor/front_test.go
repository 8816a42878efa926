package supervisor

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/audit/facts"
)

// browserReq is send, with the answer's error code.
func (s *tcpServer) browserReq(t *testing.T, method, path, body string, hdr map[string]string) (int, api.ErrorBody) {
	t.Helper()
	st, b, _ := s.send(t, method, path, body, hdr)
	var e api.ErrorBody
	_ = json.Unmarshal(b, &e)
	return st, e
}

// TestNoAuthListenerRefusesBrowsers: a TCP listener without keys
// (--allow-no-auth) refuses what a web page in a browser on the host can
// send it: a foreign Host (DNS rebinding), an Origin or a cross-site
// Sec-Fetch-Site, and a POST that is not declared JSON (a CORS "simple"
// request, sent without a preflight). Nothing refused reaches the
// launcher. With keys the browser rules hold too, and a foreign Host is
// served (a remote listener's clients name it as they like).
func TestNoAuthListenerRefusesBrowsers(t *testing.T) {
	s := startTCP(t, nil, func(s *Server) { s.SetAuth(Auth{}) })
	port := s.url[strings.LastIndex(s.url, ":")+1:]
	exec := `{"language":"python","code":"print(1)"}`
	jsonCT := map[string]string{"Content-Type": "application/json"}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{"Content-Type": "application/json"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		name   string
		method string
		path   string
		body   string
		hdr    map[string]string
		status int
		code   api.ErrorCode
	}{
		{"rebinding host", "POST", "/v1/exec", exec, with(map[string]string{"Host": "attacker.example:" + port}), 403, api.CodeForbidden},
		{"rebinding host GET", "GET", "/v1/sessions", "", map[string]string{"Host": "attacker.example:" + port}, 403, api.CodeForbidden},
		{"origin", "POST", "/v1/exec", exec, with(map[string]string{"Origin": "http://attacker.example"}), 403, api.CodeForbidden},
		{"null origin", "GET", "/v1/sessions", "", map[string]string{"Origin": "null"}, 403, api.CodeForbidden},
		{"cross-site fetch", "GET", "/v1/sessions", "", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, api.CodeForbidden},
		{"same-site fetch", "GET", "/v1/sessions", "", map[string]string{"Sec-Fetch-Site": "same-site"}, 403, api.CodeForbidden},
		{"CORS preflight", "OPTIONS", "/v1/exec", "", map[string]string{"Origin": "http://attacker.example", "Access-Control-Request-Method": "POST"}, 403, api.CodeForbidden},
		{"PATCH without Content-Type", "PATCH", "/v1/admin/settings", "{}", nil, 400, api.CodeInvalidArgument},
		{"POST without Content-Type", "POST", "/v1/exec", exec, nil, 400, api.CodeInvalidArgument},
		{"POST as text/plain", "POST", "/v1/exec", exec, map[string]string{"Content-Type": "text/plain"}, 400, api.CodeInvalidArgument},
		{"bodyless POST without Content-Type", "POST", "/v1/sessions", "", nil, 400, api.CodeInvalidArgument},
		{"loopback literal", "POST", "/v1/exec", exec, jsonCT, 200, ""},
		{"localhost", "POST", "/v1/exec", exec, with(map[string]string{"Host": "localhost:" + port}), 200, ""},
		{"IPv6 loopback literal", "GET", "/v1/sessions", "", map[string]string{"Host": "[::1]:" + port}, 200, ""},
		{"a forwarded port (ssh -L)", "GET", "/v1/sessions", "", map[string]string{"Host": "127.0.0.1:9"}, 200, ""},
		{"user typed the URL", "GET", "/v1/sessions", "", map[string]string{"Sec-Fetch-Site": "none"}, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(s.launcher.calls())
			st, e := s.browserReq(t, tc.method, tc.path, tc.body, tc.hdr)
			if st != tc.status || e.Error.Code != tc.code {
				t.Fatalf("got %d %q (%s); want %d %q", st, e.Error.Code, e.Error.Message, tc.status, tc.code)
			}
			if tc.status != 200 && len(s.launcher.calls()) != before {
				t.Fatal("a refused request reached the launcher")
			}
		})
	}
}

// TestKeyedListenerRefusesBrowsers: with keys, Origin and a POST not
// declared JSON are still refused (before the key is compared); a foreign
// Host is served; an upload (PUT, never a CORS simple request) may be
// application/octet-stream.
func TestKeyedListenerRefusesBrowsers(t *testing.T) {
	s := startTCP(t, nil)
	auth := "Bearer " + keyAlice
	exec := `{"language":"python","code":"print(1)"}`
	if st, e := s.browserReq(t, "POST", "/v1/exec", exec, map[string]string{"Authorization": auth, "Content-Type": "application/json", "Origin": "https://x.example"}); st != 403 {
		t.Fatalf("Origin with a key: %d %+v", st, e)
	}
	if st, e := s.browserReq(t, "POST", "/v1/exec", exec, map[string]string{"Authorization": auth}); st != 400 {
		t.Fatalf("POST without Content-Type with a key: %d %+v", st, e)
	}
	if st, e := s.browserReq(t, "POST", "/v1/exec", exec, map[string]string{"Authorization": auth, "Content-Type": "application/json", "Host": "sandboxd.example.net"}); st != 200 {
		t.Fatalf("a named host with a key: %d %+v", st, e)
	}
	st, b, _ := s.req(t, "POST", "/v1/sessions", auth, "{}")
	var sess api.Session
	if err := json.Unmarshal(b, &sess); err != nil || st != 201 {
		t.Fatalf("create: %d %s", st, b)
	}
	if st, e := s.browserReq(t, "PUT", "/v1/sessions/"+sess.ID+"/files/a.bin", "raw bytes", map[string]string{"Authorization": auth, "Content-Type": "application/octet-stream"}); st != 201 {
		t.Fatalf("octet-stream upload: %d %+v", st, e)
	}
}

// dialFrom opens a TCP connection to addr from the local address src.
func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", src, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestTCPCannotStarveUnixSocket: 300 idle TCP connections from ten
// addresses, none of which ever sends a byte, leave the Unix socket its own
// budget: a Unix-socket exec is served while they are held.
func TestTCPCannotStarveUnixSocket(t *testing.T) {
	s := startTCP(t, nil) // the default --max-connections and share
	addr := strings.TrimPrefix(s.url, "http://")
	const n = 300
	for i := 0; i < n; i++ {
		dialFrom(t, fmt.Sprintf("127.0.0.%d", 2+i%10), addr)
	}
	waitFor(t, func() bool {
		s.srv.limits.mu.Lock()
		defer s.srv.limits.mu.Unlock()
		seen := len(s.srv.limits.conns)
		for _, v := range s.srv.limits.connRefused {
			seen += int(v)
		}
		return seen >= n
	})
	r := s.testServer.do("POST", "/v1/exec", `{"language":"python","code":"print(1)"}`)
	if r.status != 200 {
		t.Fatalf("a Unix-socket exec while %d TCP connections are held: %d %s", n, r.status, r.body)
	}
}

// fakeTCPConn is a net.Conn with chosen TCP addresses, for the counting
// rules (nothing is read or written).
type fakeTCPConn struct {
	net.Conn
	local, remote *net.TCPAddr
}

func (c fakeTCPConn) LocalAddr() net.Addr  { return c.local }
func (c fakeTCPConn) RemoteAddr() net.Addr { return c.remote }

// TestUnauthenticatedConnIdentity: a TCP connection is counted, before its
// key is known, per IPv4 address and per IPv6 /64, so one host's /64 is one
// peer however many of its addresses it uses.
func TestUnauthenticatedConnIdentity(t *testing.T) {
	local := &net.TCPAddr{IP: net.ParseIP("::1"), Port: 8080}
	id := func(ip string) string {
		_, who := connIdentity(fakeTCPConn{local: local, remote: &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000}})
		return who
	}
	if a, b := id("2001:db8:1:2::1"), id("2001:db8:1:2:ffff::9"); a != b {
		t.Fatalf("two addresses of one /64 count apart: %q, %q", a, b)
	}
	if a, b := id("2001:db8:1:2::1"), id("2001:db8:1:3::1"); a == b {
		t.Fatalf("two /64s count as one: %q", a)
	}
	if a, b := id("192.0.2.1"), id("192.0.2.2"); a == b {
		t.Fatalf("two IPv4 addresses count as one: %q", a)
	}
}

// TestAuthOverflowDoesNotLockOutGoodKeys: more addresses than the failure
// table holds (production sizes) fail, first once each (a guesser that
// failed up to its limit before stays limited), then up to their limit;
// a fresh address with a correct key is then served, and with a wrong key
// gets 401, not 429.
func TestAuthOverflowDoesNotLockOutGoodKeys(t *testing.T) {
	s := startTCP(t, nil, func(s *Server) { s.authFailDelay = 0 })
	now := time.Now()
	a := s.srv.authFails
	for i := 0; i < authFailLimit; i++ {
		a.fail("198.51.100.7", now)
	}
	flood := func(failures int) {
		for i := 0; i < authFailTable+200; i++ {
			for j := 0; j < failures; j++ {
				a.fail(net.IPv4(10, byte(i>>16), byte(i>>8), byte(i)).String(), now)
			}
		}
		if n := a.size(); n > authFailTable {
			t.Fatalf("the table holds %d addresses; bound %d", n, authFailTable)
		}
	}
	flood(1)
	if _, lim := a.limited("198.51.100.7", now); !lim {
		t.Fatal("the guesser's count was lost to a flood of single failures")
	}
	flood(authFailLimit)
	if st, b, _ := s.req(t, "GET", "/v1/health", "Bearer "+keyAlice, ""); st != 200 {
		t.Fatalf("a correct key from a fresh address after %d failing addresses: %d %s", authFailTable+200, st, b)
	}
	if st, b, _ := s.req(t, "GET", "/v1/health", "Bearer "+keyAlice+"x", ""); st != 401 {
		t.Fatalf("a wrong key from a fresh address: %d %s; want 401", st, b)
	}
}

// TestAdminExecRefusedInForeignKernel: an admin's exec in another caller's
// session may not run in that caller's kernel (the owner's threads would
// see it); it may run as a process, and the owner's kernel exec is not
// refused by the rule.
func TestAdminExecRefusedInForeignKernel(t *testing.T) {
	s := startTCP(t, nil, func(s *Server) { s.authFailDelay = 0 })
	admin := "Bearer " + strings.Repeat("a", 40)
	st, b, _ := s.req(t, "POST", "/v1/sessions", "Bearer "+keyAlice, "{}")
	var sess api.Session
	if err := json.Unmarshal(b, &sess); err != nil || st != 201 {
		t.Fatalf("create: %d %s", st, b)
	}
	path := "/v1/sessions/" + sess.ID + "/exec"
	st, b, _ = s.req(t, "POST", path, admin, `{"language":"python","code":"print(1)","mode":"kernel"}`)
	var e api.ErrorBody
	if err := json.Unmarshal(b, &e); err != nil || st != 403 || e.Error.Code != api.CodeForbidden || !strings.Contains(e.Error.Message, "process") {
		t.Fatalf("admin kernel exec in alice's session: %d %s; want 403 naming mode process", st, b)
	}
	if st, b, _ = s.req(t, "POST", path, admin, `{"language":"python","code":"print(1)","mode":"process"}`); st != 200 {
		t.Fatalf("admin process exec in alice's session: %d %s", st, b)
	}
	st, b, _ = s.req(t, "POST", path, "Bearer "+keyAlice, `{"language":"python","code":"print(1)","mode":"kernel"}`)
	if json.Unmarshal(b, &e) == nil && strings.Contains(e.Error.Message, "another caller's kernel") {
		t.Fatalf("the owner's kernel exec refused by the rule: %d %s", st, b)
	}
}

// TestLocalhostListenerMustBeLoopback: a listener asked for as localhost
// that the resolver put on another address is refused; literals and
// loopback resolutions pass.
func TestLocalhostListenerMustBeLoopback(t *testing.T) {
	for _, tc := range []struct {
		hostPort string
		bound    string
		ok       bool
	}{
		{"localhost:8080", "127.0.0.1", true},
		{"LocalHost.:8080", "::1", true},
		{"localhost:8080", "10.0.0.5", false},
		{"localhost:8080", "0.0.0.0", false},
		{"127.0.0.1:8080", "127.0.0.1", true},
		{"sandboxd.example:8080", "192.0.2.1", true}, // a keyed listener's own name
	} {
		err := checkLocalhostBound(tc.hostPort, &net.TCPAddr{IP: net.ParseIP(tc.bound), Port: 8080})
		if (err == nil) != tc.ok {
			t.Errorf("%s bound to %s: %v; want ok %v", tc.hostPort, tc.bound, err, tc.ok)
		}
	}
}

// TestReloadKeysFailureKeepsKeys: a reload whose file fails validation
// keeps the keys in force, shows the error in health and audits a failed
// keys.reload record; the next good reload applies the file and clears it.
func TestReloadKeysFailureKeepsKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(path, []byte("alice:"+keyAlice+"\nbob:"+keyBob+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startTCP(t, nil, func(s *Server) {
		s.authFailDelay = 0
		if err := s.LoadKeys(path); err != nil {
			t.Fatal(err)
		}
	})
	health := func() api.KeysHealth {
		st, b, _ := s.req(t, "GET", "/v1/health", "Bearer "+keyAlice, "")
		var h api.Health
		if err := json.Unmarshal(b, &h); err != nil || st != 200 || h.Keys == nil {
			t.Fatalf("health: %d %s", st, b)
		}
		return *h.Keys
	}
	if h := health(); h.Keys != 2 || h.LoadedAt.IsZero() || h.LastReloadError != "" {
		t.Fatalf("keys at start: %+v", h)
	}
	if err := os.WriteFile(path, []byte("alice:"+keyAlice+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.srv.ReloadKeys(path); err == nil {
		t.Fatal("a keys file of mode 0644 reloaded")
	}
	if h := health(); h.Keys != 2 || !strings.Contains(h.LastReloadError, "mode") || h.LastReloadErrorAt == nil {
		t.Fatalf("keys after a failed reload: %+v", h)
	}
	if st, b, _ := s.req(t, "GET", "/v1/health", "Bearer "+keyBob, ""); st != 200 {
		t.Fatalf("bob after the failed reload: %d %s; the old keys stay", st, b)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.srv.ReloadKeys(path); err != nil {
		t.Fatal(err)
	}
	if h := health(); h.Keys != 1 || h.LastReloadError != "" {
		t.Fatalf("keys after a good reload: %+v", h)
	}
	if st, _, _ := s.req(t, "GET", "/v1/health", "Bearer "+keyBob, ""); st != 401 {
		t.Fatalf("bob after the good reload: %d; want 401", st)
	}
	var oks []bool
	for _, r := range s.sink.Records {
		if r.Step == facts.StepKeysReload {
			oks = append(oks, r.OK)
		}
	}
	if len(oks) != 2 || oks[0] || !oks[1] {
		t.Fatalf("keys.reload records ok=%v; want [false true]", oks)
	}
	requireStrictFacts(t, s.sink.Records, facts.StepKeysReload)
}

// TestTCPPoolIsTheListener: a connection counts in the budget of the
// listener that accepted it (named by its bound address), under TLS too;
// two listeners have two budgets.
func TestTCPPoolIsTheListener(t *testing.T) {
	lns, err := ListenTCP([]string{"tcp://127.0.0.1:0", "tcp://127.0.0.1:0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(lns)
	pool := func(ln net.Listener) string {
		go func() {
			if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
				defer c.Close()
				time.Sleep(100 * time.Millisecond)
			}
		}()
		c, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if p := tcpPool(tls.Server(c, &tls.Config{})); p != tcpPool(c) {
			t.Fatalf("under TLS the pool is %q, not %q", p, tcpPool(c))
		}
		return tcpPool(c)
	}
	a, b := pool(lns[0]), pool(lns[1])
	if a != "tcp "+lns[0].Addr().String() || a == b {
		t.Fatalf("pools %q and %q for listeners %s and %s", a, b, lns[0].Addr(), lns[1].Addr())
	}
}
