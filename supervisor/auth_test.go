package supervisor

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/internal/testca"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/apikey"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/launch"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/session"
)

const (
	keyAlice = "0123456789abcdef0123456789abcdef0123456789abcdef"
	keyBob   = "fedcba9876543210fedcba9876543210fedcba9876543210"
)

type tcpServer struct {
	*testServer
	url    string
	client *http.Client
}

// startTCP serves a Server on a Unix socket and a loopback TCP listener
// (with TLS when tlsConf is set) with alice's and bob's keys.
func startTCP(t *testing.T, tlsConf *tls.Config, opts ...serverOpt) *tcpServer {
	t.Helper()
	keys, err := apikey.Parse([]byte("alice:" + keyAlice + "\nbob:" + keyBob + "\nroot:" + strings.Repeat("a", 40) + ":admin\n"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := ListenTCP([]string{"tcp://127.0.0.1:0"}, tlsConf)
	if err != nil {
		t.Fatal(err)
	}
	opts = append([]serverOpt{func(s *Server) {
		s.SetAuth(Auth{Keys: keys})
		st, err := session.Open(session.Config{StateDir: t.TempDir(), MaxSessions: 8,
			TTLDefault: 60, TTLCap: 60, SelfUID: os.Getuid(), Sink: s.sink, Log: discardLog()})
		if err != nil {
			t.Fatal(err)
		}
		s.SetSessions(st)
	}}, opts...)
	sock := filepath.Join(t.TempDir(), "s.sock")
	ts := startServerWith(t, sock, testConfig(), opts, ln[0])
	scheme := "http"
	if tlsConf != nil {
		scheme = "https"
	}
	return &tcpServer{testServer: ts, url: scheme + "://" + ln[0].Addr().String(),
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}
}

// startServerWith is startServerAt with extra listeners.
func startServerWith(t *testing.T, sock string, cfg policy.Config, opts []serverOpt, more ...net.Listener) *testServer {
	t.Helper()
	fl := &fakeLauncher{}
	sink := &audit.Memory{}
	srv := NewServer(cfg, fl, fakeProber{readyChecks()}, sink, nil, "1.2.3")
	for _, o := range opts {
		o(srv)
	}
	ln, err := Listen(sock, "")
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts := &testServer{t: t, srv: srv, launcher: fl, sink: sink, sock: sock, client: unixClient(sock), cancel: cancel, done: make(chan error, 1)}
	go func() { ts.done <- srv.Serve(ctx, ln, more...) }()
	t.Cleanup(func() { ts.stop() })
	return ts
}

func (s *tcpServer) req(t *testing.T, method, path, key, body string) (int, []byte, http.Header) {
	t.Helper()
	hdr := map[string]string{}
	if body != "" {
		hdr["Content-Type"] = "application/json"
	}
	if key != "" {
		hdr["Authorization"] = key
	}
	return s.send(t, method, path, body, hdr)
}

// send sends one request to the TCP listener with the headers hdr ("Host"
// sets the request's host).
func (s *tcpServer) send(t *testing.T, method, path, body string, hdr map[string]string) (int, []byte, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		if k == "Host" {
			r.Host = v
			continue
		}
		r.Header.Set(k, v)
	}
	resp, err := s.client.Do(r)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

// TestTCPBearerAuth: a missing, malformed, wrong, truncated or extended
// key is 401 unauthenticated with one message; the right key is served.
func TestTCPBearerAuth(t *testing.T) {
	s := startTCP(t, nil, func(s *Server) { s.authFailDelay = 0 })
	for _, tc := range []struct{ name, hdr string }{
		{"missing", ""},
		{"other scheme", "Basic " + keyAlice},
		{"no token", "Bearer "},
		{"wrong key", "Bearer " + strings.Repeat("0", 48)},
		{"trailing byte", "Bearer " + keyAlice + "0"},
		{"one byte short", "Bearer " + keyAlice[:47]},
		{"last byte wrong", "Bearer " + keyAlice[:47] + "0"},
		{"key name", "Bearer alice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, b, h := s.req(t, "GET", "/v1/health", tc.hdr, "")
			var e api.ErrorBody
			if err := json.Unmarshal(b, &e); err != nil || st != 401 || e.Error.Code != api.CodeUnauthenticated || e.Error.Message != unauthenticatedMsg {
				t.Fatalf("got %d %s; want 401 unauthenticated", st, b)
			}
			if h.Get("WWW-Authenticate") == "" {
				t.Error("no WWW-Authenticate header")
			}
		})
	}
	if st, b, _ := s.req(t, "GET", "/v1/health", "Bearer "+keyAlice, ""); st != 200 {
		t.Fatalf("right key: %d %s", st, b)
	}
	if st, b, _ := s.req(t, "GET", "/v1/health", "bearer "+keyBob, ""); st != 200 {
		t.Fatalf("scheme is case-insensitive: %d %s", st, b)
	}
	// The refusals are audited under the address, never with the key, and
	// their facts are typed (audit verify decodes every record strictly).
	refusals := 0
	for _, r := range s.sink.Records {
		if rb, _ := json.Marshal(r); strings.Contains(string(rb), keyAlice[:20]) {
			t.Fatalf("an audit record carries the key: %s", rb)
		}
		if _, err := r.DecodeFacts(); err != nil && !errors.Is(err, facts.ErrUntyped) {
			t.Fatalf("record %s: %v", r.Step, err)
		}
		if r.FactMap()["auth"] == "bad_key" {
			refusals++
		}
	}
	if refusals == 0 {
		t.Fatal("no auth refusal was audited")
	}
}

// TestHealthzNoAuth: /healthz answers without a key, with ok and version only.
func TestHealthzNoAuth(t *testing.T) {
	s := startTCP(t, nil)
	st, b, _ := s.req(t, "GET", "/healthz", "", "")
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || st != 200 || m["ok"] != true || m["version"] != "1.2.3" || len(m) != 2 {
		t.Fatalf("healthz: %d %s", st, b)
	}
	// And on the Unix socket too.
	if r := s.testServer.do("GET", "/healthz", ""); r.status != 200 {
		t.Fatalf("healthz on the socket: %d %s", r.status, r.body)
	}
}

// TestTCPSessionsPerKey: two keys' sessions are invisible to each other;
// an admin key sees both; the caller identity is in the audit records.
func TestTCPSessionsPerKey(t *testing.T) {
	s := startTCP(t, nil)
	create := func(key string) string {
		st, b, _ := s.req(t, "POST", "/v1/sessions", "Bearer "+key, "{}")
		var sess api.Session
		if err := json.Unmarshal(b, &sess); err != nil || st != 201 && st != 200 {
			t.Fatalf("create: %d %s", st, b)
		}
		return sess.ID
	}
	a, b := create(keyAlice), create(keyBob)
	list := func(key string) []string {
		st, body, _ := s.req(t, "GET", "/v1/sessions", "Bearer "+key, "")
		var l struct {
			Sessions []api.Session `json:"sessions"`
		}
		if err := json.Unmarshal(body, &l); err != nil || st != 200 {
			t.Fatalf("list: %d %s", st, body)
		}
		var ids []string
		for _, x := range l.Sessions {
			ids = append(ids, x.ID)
		}
		return ids
	}
	if got := list(keyAlice); !slices.Equal(got, []string{a}) {
		t.Fatalf("alice sees %v; want only %s", got, a)
	}
	if got := list(keyBob); !slices.Equal(got, []string{b}) {
		t.Fatalf("bob sees %v; want only %s", got, b)
	}
	if st, body, _ := s.req(t, "GET", "/v1/sessions/"+a, "Bearer "+keyBob, ""); st != 404 {
		t.Fatalf("bob reads alice's session: %d %s", st, body)
	}
	if st, body, _ := s.req(t, "DELETE", "/v1/sessions/"+a, "Bearer "+keyBob, ""); st != 404 {
		t.Fatalf("bob deletes alice's session: %d %s", st, body)
	}
	if got := list(strings.Repeat("a", 40)); len(got) != 2 {
		t.Fatalf("the admin key sees %v; want both", got)
	}
	found := false
	for _, r := range s.sink.Records {
		if r.Step == "session.create" && r.Caller == "key:alice" && r.CallerUID == -1 {
			found = true
		}
	}
	if !found {
		t.Fatal(`no session.create record with caller "key:alice"`)
	}
}

// TestAuthRateLimit: past authFailLimit failures one address gets 429,
// even with the right key, until the window ends.
func TestAuthRateLimit(t *testing.T) {
	s := startTCP(t, nil, func(s *Server) { s.authFailDelay = 0 })
	for i := 0; i < authFailLimit; i++ {
		if st, _, _ := s.req(t, "GET", "/v1/health", "Bearer nope", ""); st != 401 {
			t.Fatalf("failure %d: %d", i, st)
		}
	}
	st, b, h := s.req(t, "GET", "/v1/health", "Bearer "+keyAlice, "")
	if st != 429 || h.Get("Retry-After") == "" || !strings.Contains(string(b), "limit_exceeded") {
		t.Fatalf("after %d failures: %d %s", authFailLimit, st, b)
	}
}

// TestAuthFailuresBounded: the per-address table never grows past its
// bound; a new address while it is full is judged by its own failures
// only, and a flood of addresses failing once each evicts its own entries,
// not a guesser's.
func TestAuthFailuresBounded(t *testing.T) {
	a := newAuthFailures(2, time.Minute, 8)
	now := time.Now()
	a.fail("198.51.100.7", now)
	a.fail("198.51.100.7", now)
	for i := 0; i < 1000; i++ {
		a.fail(net.IPv4(10, 0, byte(i>>8), byte(i)).String(), now)
	}
	if n := a.size(); n > 8 {
		t.Fatalf("table holds %d addresses; bound 8", n)
	}
	if _, lim := a.limited("192.0.2.1", now); lim {
		t.Fatal("a new address is limited by other addresses' failures")
	}
	if _, lim := a.limited("198.51.100.7", now); !lim {
		t.Fatal("the guesser's count was evicted by a flood of single failures")
	}
	if _, lim := a.limited("198.51.100.7", now.Add(2*time.Minute)); lim {
		t.Fatal("still limited after the window")
	}
}

// TestAuthFailureTimeNoGrossLeak: with the fixed delay off, a near miss
// (the right key with its last byte changed) and a far miss (wrong from
// the first byte) take the same time within a fifth of a round trip, over
// 2,000 interleaved tries each. It catches a gross leak — work that grows
// with the matching prefix, as a per-byte check with real cost would have
// — and nothing finer: a comparison that merely stops at the first wrong
// byte saves nanoseconds against round trips of tens of microseconds, and
// passes. That rule is checked in the source instead, by package apikey's
// TestKeyComparisonsConstantTime.
func TestAuthFailureTimeNoGrossLeak(t *testing.T) {
	s := startTCP(t, nil, func(s *Server) {
		s.authFailDelay = 0
		s.authFails = newAuthFailures(1<<30, time.Minute, 16)
	})
	tr := &http.Transport{MaxIdleConnsPerHost: 1}
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	defer tr.CloseIdleConnections()
	once := func(key string) time.Duration {
		r, _ := http.NewRequest("GET", s.url+"/v1/health", nil)
		r.Header.Set("Authorization", "Bearer "+key)
		start := time.Now()
		resp, err := c.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		d := time.Since(start)
		if resp.StatusCode != 401 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		return d
	}
	near := keyAlice[:47] + "0"
	far := "X" + strings.Repeat("z", 47)
	const n = 2000
	var dn, df []time.Duration
	for i := 0; i < 50; i++ { // warm up
		once(near)
		once(far)
	}
	for i := 0; i < n; i++ {
		dn = append(dn, once(near))
		df = append(df, once(far))
	}
	mn, mf := median(dn), median(df)
	diff := mn - mf
	if diff < 0 {
		diff = -diff
	}
	t.Logf("median over %d tries: near miss %v, far miss %v, difference %v", n, mn, mf, diff)
	// Generous on purpose: the bound catches gross leaks only (see above).
	if bound := max(mn, mf) / 5; diff > bound {
		t.Fatalf("near and far misses differ by %v (bound %v)", diff, bound)
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestAuthFailDelay: a failed attempt is answered no sooner than the
// fixed delay after it arrived.
func TestAuthFailDelay(t *testing.T) {
	s := startTCP(t, nil, func(s *Server) { s.authFailDelay = 200 * time.Millisecond })
	start := time.Now()
	if st, _, _ := s.req(t, "GET", "/v1/health", "Bearer "+keyAlice+"x", ""); st != 401 {
		t.Fatalf("status %d", st)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("answered after %v; the delay is 200ms", d)
	}
}

// TestTLSClientCertAndReload: TLS with a test CA; a client certificate is
// required when a client CA is set; Reload serves a new certificate.
func TestTLSClientCertAndReload(t *testing.T) {
	dir := t.TempDir()
	ca := testca.New(t, "sandboxd test CA")
	certPath, keyPath := ca.WriteLeaf(t, dir, testca.Leaf{Name: "server", Serial: 100, DNS: []string{"localhost"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	cliCert, cliKey := ca.WriteLeaf(t, dir, testca.Leaf{Name: "client", Serial: 200, Client: true})
	caPath := ca.WriteCA(t, dir)
	certs, err := NewCertReloader(certPath, keyPath)
	if err != nil {
		t.Fatal(err)
	}
	conf, err := TLSConfig(certs, caPath)
	if err != nil {
		t.Fatal(err)
	}
	s := startTCP(t, conf)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)

	// No client certificate: the handshake fails.
	noCert := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if resp, err := noCert.Get(s.url + "/healthz"); err == nil {
		resp.Body.Close()
		t.Fatal("served without a client certificate")
	}
	pair, err := tls.LoadX509KeyPair(cliCert, cliKey)
	if err != nil {
		t.Fatal(err)
	}
	serial := func() int64 {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}, DisableKeepAlives: true}
		s.client = &http.Client{Timeout: 5 * time.Second, Transport: tr}
		r, _ := http.NewRequest("GET", s.url+"/v1/health", nil)
		r.Header.Set("Authorization", "Bearer "+keyAlice)
		resp, err := s.client.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("with client certificate and key: %d", resp.StatusCode)
		}
		return resp.TLS.PeerCertificates[0].SerialNumber.Int64()
	}
	if got := serial(); got != 100 {
		t.Fatalf("serial %d; want 100", got)
	}
	ca.WriteLeaf(t, dir, testca.Leaf{Name: "server", Serial: 101, DNS: []string{"localhost"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}}) // overwrite in place
	if err := certs.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := serial(); got != 101 {
		t.Fatalf("after reload serial %d; want 101", got)
	}
}

func TestFailKey(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.7":            "192.0.2.7",
		"2001:db8:1:2:3:4:5:6": "2001:db8:1:2::/64",
		"2001:db8:1:2::ffff":   "2001:db8:1:2::/64",
		"::1":                  "::/64",
	} {
		if got := failKey(in); got != want {
			t.Errorf("failKey(%s) = %s; want %s", in, got, want)
		}
	}
}

// TestKeyCallersArchivedByIdentity (over TCP): an API-key caller's keyed
// session is archived when it is reaped and restored when the same key
// asks for the same session key again; another key naming the same
// session key never gets it, nor does a Unix-socket uid caller.
func TestKeyCallersArchivedByIdentity(t *testing.T) {
	archives := t.TempDir()
	var st *session.Store
	now := time.Now()
	ts := startTCP(t, nil, func(s *Server) {
		var err error
		st, err = session.Open(session.Config{StateDir: t.TempDir(), MaxSessions: 8, TTLDefault: 60, TTLCap: 60,
			ArchiveDir: archives, ArchiveMaxBytes: 1 << 20, SelfUID: os.Getuid(), Sink: s.sink, Log: discardLog(),
			Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		s.SetSessions(st)
	})
	create := func(bearer string) api.Session {
		t.Helper()
		code, b, _ := ts.req(t, "POST", "/v1/sessions", bearer, `{"key":"shared-key"}`)
		var sess api.Session
		if err := json.Unmarshal(b, &sess); err != nil || code != http.StatusCreated && code != http.StatusOK {
			t.Fatalf("create: %d %s", code, b)
		}
		return sess
	}
	alice, bob := "Bearer "+keyAlice, "Bearer "+keyBob
	a := create(alice)
	if code, b, _ := ts.req(t, "PUT", "/v1/sessions/"+a.ID+"/files/secret.txt", alice, "alice's"); code/100 != 2 {
		t.Fatalf("upload: %d %s", code, b)
	}
	now = now.Add(2 * time.Minute) // past the TTL: the reaper ends it
	if n := st.ReapExpired(); n != 1 {
		t.Fatalf("reaped %d sessions, want 1", n)
	}
	if _, err := os.Stat(filepath.Join(archives, "kalice")); err != nil {
		t.Fatalf("alice's archive is not under kalice/: %v", err)
	}
	// Bob names the same session key: a fresh workspace.
	b := create(bob)
	if b.Restored {
		t.Fatal("bob's session was restored from alice's archive")
	}
	if code, body, _ := ts.req(t, "GET", "/v1/sessions/"+b.ID+"/files/secret.txt", bob, ""); code != http.StatusNotFound {
		t.Fatalf("bob reads secret.txt: %d %s", code, body)
	}
	// A uid caller (the Unix socket) naming it gets nothing either.
	u := ts.do("POST", "/v1/sessions", `{"key":"shared-key"}`)
	var us api.Session
	if err := json.Unmarshal(u.body, &us); err != nil || us.Restored {
		t.Fatalf("the uid caller's session: %s (restored from a key's archive?)", u.body)
	}
	// Alice gets her files back.
	a2 := create(alice)
	if !a2.Restored {
		t.Fatal("alice's session was not restored after its reaping")
	}
	code, body, _ := ts.req(t, "GET", "/v1/sessions/"+a2.ID+"/files/secret.txt", alice, "")
	if code != http.StatusOK || string(body) != "alice's" {
		t.Fatalf("alice reads secret.txt: %d %q", code, body)
	}
	if code, body, _ := ts.req(t, "DELETE", "/v1/sessions/"+a2.ID+"/files/secret.txt", alice, ""); code/100 != 2 {
		t.Fatalf("alice deletes secret.txt: %d %q", code, body)
	}
	if err := ts.stop(); err != nil {
		t.Fatal(err)
	}
	// Every session and file record written is typed (audit/facts).
	requireStrictFacts(t, ts.sink.Records, facts.StepSessionCreate, facts.StepSessionRestore, facts.StepSessionArchive,
		facts.StepSessionDelete, facts.StepFilePut, facts.StepFileGet, facts.StepFileDelete)
}

// TestSettingsAdminKeyOverTCP: an API key marked admin in the keys file
// (root:...:admin) may read and change the live settings over TCP; a plain
// key is 403 for both, and the refusal names the key, not a uid.
func TestSettingsAdminKeyOverTCP(t *testing.T) {
	ts := startTCP(t, nil)
	admin := "Bearer " + strings.Repeat("a", 40)
	for _, c := range []struct {
		name, key, method, body string
		want                    int
	}{
		{"admin get", admin, http.MethodGet, "", http.StatusOK},
		{"admin patch", admin, http.MethodPatch, `{"max_sessions":4}`, http.StatusOK},
		{"plain get", "Bearer " + keyAlice, http.MethodGet, "", http.StatusForbidden},
		{"plain patch", "Bearer " + keyBob, http.MethodPatch, `{"max_sessions":2}`, http.StatusForbidden},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body, _ := ts.req(t, c.method, api.AdminSettingsPath, c.key, c.body)
			if code != c.want {
				t.Fatalf("%s %s: %d %s, want %d", c.method, api.AdminSettingsPath, code, body, c.want)
			}
			if code == http.StatusForbidden && !strings.Contains(string(body), "API key") {
				t.Fatalf("403 does not name the key: %s", body)
			}
		})
	}
	if got := ts.srv.liveConfig().MaxSessions; got != 4 {
		t.Fatalf("max_sessions after the admin key's patch: %d, want 4", got)
	}
}

// TestRefusalRecordsPerCaller: refusal records are limited per caller
// identity, and a TCP request refused before it has one per remote address
// (IPv4 address, IPv6 /64): one guesser's burst must not hide another
// address's attempts, nor one key's refusals another key's.
func TestRefusalRecordsPerCaller(t *testing.T) {
	s := startTCP(t, nil, func(s *Server) { s.authFailDelay = 0 })
	from := func(ip string) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, DialContext: d.DialContext}}
	}
	for _, ip := range []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"} {
		s.client = from(ip)
		if st, b, _ := s.req(t, "GET", "/v1/health", "Bearer wrong", ""); st != 401 {
			t.Fatalf("from %s: %d %s", ip, st, b)
		}
	}
	// Two key callers refused within the same interval.
	for _, c := range []launch.Caller{{UID: -1, GID: -1, PID: -1, Key: "alice"}, {UID: -1, GID: -1, PID: -1, Key: "bob"}} {
		s.srv.auditRefusal(s.srv.record(newExecID(), audit.StepAccept, c, apiErr(api.CodeForbidden, "no"), map[string]any{"method": "GET", "path": "/x"}))
	}
	addrs, keys := map[string]bool{}, map[string]bool{}
	for _, r := range s.sink.Records {
		f := r.FactMap()
		if f["auth"] == "bad_key" {
			addrs[fmt.Sprint(f["remote_addr"])] = true
		}
		if r.Caller == "key:alice" || r.Caller == "key:bob" {
			keys[r.Caller] = true
		}
	}
	if len(addrs) != 3 || len(keys) != 2 {
		t.Fatalf("refusal records written one by one: addresses %v, keys %v; want 3 addresses and 2 keys", addrs, keys)
	}
}

// TestRefusalKey: the limiter's key of a refusal record.
func TestRefusalKey(t *testing.T) {
	for _, tc := range []struct {
		rec    audit.Record
		remote string
		want   string
	}{
		{audit.Record{CallerUID: 1000, Caller: "uid:1000"}, "", "uid:1000"},
		{audit.Record{CallerUID: -1, Caller: "key:alice"}, "", "key:alice"},
		{audit.Record{CallerUID: -1}, "", "uid:-1"},
		{audit.Record{CallerUID: -1}, "192.0.2.7", "addr:192.0.2.7"},
		{audit.Record{CallerUID: -1}, "2001:db8::1", "addr:2001:db8::/64"},
		{audit.Record{CallerUID: -1}, "2001:db8::2", "addr:2001:db8::/64"},
	} {
		if got := refusalKey(tc.rec, tc.remote); got != tc.want {
			t.Errorf("refusalKey(%+v, %q) = %q, want %q", tc.rec, tc.remote, got, tc.want)
		}
	}
}
