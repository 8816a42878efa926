package supervisor

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/egress"
	"github.com/sandboxd/sandboxd/launch"
	"github.com/sandboxd/sandboxd/nsinit/config"
	"github.com/sandboxd/sandboxd/session"
)

// egressServer is a supervisor whose fake launcher plays the relay: it
// sends one plain-HTTP request per URL through the exec's proxy socket.
func egressServer(t *testing.T, uids []int, urls ...string) (*testServer, string) {
	t.Helper()
	backend, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	go http.Serve(backend, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hi") }))
	t.Cleanup(func() { backend.Close() })
	_, port, _ := net.SplitHostPort(backend.Addr().String())

	cfg := testConfig()
	cfg.EgressAllow, cfg.EgressAllowUIDs = "pypi.test:"+port, uids
	allow, err := egress.ParseAllowlist(cfg.EgressAllow)
	if err != nil {
		t.Fatal(err)
	}
	p, err := egress.New(egress.Config{Allow: allow, TestOnly: &egress.TestOnly{
		Resolve:        map[string][][]netip.Addr{"pypi.test": {{netip.MustParseAddr("127.0.0.2")}}, "off.test": {{netip.MustParseAddr("127.0.0.2")}}},
		PublicLoopback: []netip.Addr{netip.MustParseAddr("127.0.0.2")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	fl := &fakeLauncher{fn: func(ctx context.Context, req launch.Request) (*launch.ExecResult, error) {
		sock := filepath.Join(dir, req.Egress, config.EgressSocket)
		for _, u := range urls {
			u = strings.ReplaceAll(u, "PORT", port)
			c, err := net.Dial("unix", sock)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", u)
			if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
				resp.Body.Close()
			}
			c.Close()
		}
		return okResult(req), nil
	}}
	ts := startServer(t, cfg, fl, readyChecks(), func(s *Server) { s.SetEgress(p, dir) })
	return ts, port
}

func TestEgressExec(t *testing.T) {
	ts, port := egressServer(t, []int{os.Getuid()}, "http://pypi.test:PORT/simple/", "http://off.test:PORT/")
	r := ts.do("POST", "/v1/exec", `{"language":"python","code":"1","network":"egress"}`)
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var res api.ExecResult
	if err := json.Unmarshal(r.body, &res); err != nil {
		t.Fatal(err)
	}
	if res.Network == nil || res.Network.Mode != "egress" || len(res.Network.Connections) != 2 {
		t.Fatalf("network: %+v", res.Network)
	}
	byHost := map[string]api.Connection{}
	for _, c := range res.Network.Connections {
		byHost[c.Host] = c
	}
	if c := byHost["pypi.test"]; !c.Allowed || c.BytesIn == 0 || fmt.Sprint(c.Port) != port {
		t.Errorf("allowed connection: %+v", c)
	}
	if c := byHost["off.test"]; c.Allowed || !strings.Contains(c.Reason, "allowlist") {
		t.Errorf("refused connection: %+v", c)
	}
	var egressRecs int
	for _, rec := range ts.sink.ForExec(res.ID) {
		if rec.Step != audit.StepEgress {
			continue
		}
		egressRecs++
		f, ok := rec.Facts.(*facts.Egress)
		if !ok || f.Host == "" || f.Allowed != rec.OK || (!rec.OK && rec.Error == "") {
			t.Errorf("egress record: %+v %+v", rec, rec.Facts)
		}
	}
	if egressRecs != 2 {
		t.Errorf("%d egress audit records, want 2", egressRecs)
	}
	if req := ts.launcher.calls()[0]; req.Network != "egress" || req.Egress != res.ID {
		t.Errorf("launch request network %q egress %q", req.Network, req.Egress)
	}
}

func TestEgressForbiddenForOtherCallers(t *testing.T) {
	ts, _ := egressServer(t, []int{os.Getuid() + 1})
	r := ts.do("POST", "/v1/exec", `{"language":"python","code":"1","network":"egress"}`)
	if code, msg := apiError(t, r); r.status != 403 || code != api.CodeForbidden || !strings.Contains(msg, "egress") {
		t.Fatalf("status %d code %s: %s", r.status, code, msg)
	}
	if n := len(ts.launcher.calls()); n != 0 {
		t.Errorf("%d launches for a refused request", n)
	}
}

func TestNetworkNoneResultUnchanged(t *testing.T) {
	ts, _ := egressServer(t, []int{os.Getuid()})
	r := ts.do("POST", "/v1/exec", `{"language":"python","code":"1"}`)
	if r.status != 200 || strings.Contains(string(r.body), `"network"`) {
		t.Fatalf("network none result: %d %s", r.status, r.body)
	}
	if req := ts.launcher.calls()[0]; req.Network != "none" || req.Egress != "" {
		t.Errorf("launch request network %q egress %q", req.Network, req.Egress)
	}
}

func TestEgressSession(t *testing.T) {
	cfg := testConfig()
	cfg.EgressAllow, cfg.EgressAllowUIDs = "pypi.test", []int{os.Getuid()}
	allow, _ := egress.ParseAllowlist(cfg.EgressAllow)
	p, err := egress.New(egress.Config{Allow: allow})
	if err != nil {
		t.Fatal(err)
	}
	st, err := session.Open(session.Config{StateDir: t.TempDir(), MaxSessions: 4, TTLDefault: 3600, TTLCap: 3600, SelfUID: os.Getuid(), QuotaBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, cfg, nil, readyChecks(), func(s *Server) { s.SetSessions(st); s.SetEgress(p, t.TempDir()) })
	r := ts.do("POST", "/v1/sessions", `{"network":"egress"}`)
	var sess api.Session
	if err := json.Unmarshal(r.body, &sess); r.status != 201 || err != nil || sess.Network != "egress" {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if r := ts.do("POST", "/v1/sessions/"+sess.ID+"/exec", `{"language":"python","code":"1"}`); r.status != 200 || !strings.Contains(string(r.body), `"mode":"egress"`) {
		t.Fatalf("session exec: %d %s", r.status, r.body)
	}
	if req := ts.launcher.calls()[0]; req.Network != "egress" {
		t.Errorf("a session exec ran with network %q", req.Network)
	}
	r = ts.do("POST", "/v1/sessions/"+sess.ID+"/exec", `{"language":"python","code":"1","network":"none"}`)
	if code, msg := apiError(t, r); r.status != 400 || !strings.Contains(msg, `the session's network is "egress"`) {
		t.Errorf("conflicting exec network: %d %s %s", r.status, code, msg)
	}
	// A plain session is unchanged: no network field.
	r = ts.do("POST", "/v1/sessions", `{}`)
	if r.status != 201 || strings.Contains(string(r.body), "network") {
		t.Errorf("plain session: %d %s", r.status, r.body)
	}
}

func TestEgressSessionForbidden(t *testing.T) {
	cfg := testConfig()
	cfg.EgressAllow, cfg.EgressAllowUIDs = "pypi.test", []int{os.Getuid() + 1}
	st, err := session.Open(session.Config{StateDir: t.TempDir(), MaxSessions: 4, TTLDefault: 3600, TTLCap: 3600, SelfUID: os.Getuid(), QuotaBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, cfg, nil, readyChecks(), func(s *Server) { s.SetSessions(st) })
	r := ts.do("POST", "/v1/sessions", `{"network":"egress"}`)
	if code, _ := apiError(t, r); r.status != 403 || code != api.CodeForbidden {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if n := len(st.List(launch.Caller{UID: os.Getuid()})); n != 0 {
		t.Errorf("%d sessions after a refused create", n)
	}
}

// TestEgressNodeFetchImport: a javascript egress exec gets the NODE_OPTIONS
// import that sends fetch through the relay, after its own NODE_OPTIONS; a
// python egress exec and a javascript "none" exec do not.
func TestEgressNodeFetchImport(t *testing.T) {
	ts, _ := egressServer(t, []int{os.Getuid()})
	for _, tc := range []struct{ body, want string }{
		{`{"language":"javascript","code":"1","network":"egress","env":{"NODE_OPTIONS":"--max-old-space-size=64"}}`, "--max-old-space-size=64 " + egress.NodeOptionsImport()},
		{`{"language":"javascript","code":"1","network":"egress"}`, egress.NodeOptionsImport()},
		{`{"language":"python","code":"1","network":"egress"}`, ""},
		{`{"language":"javascript","code":"1","env":{"NODE_OPTIONS":"--max-old-space-size=64"}}`, "--max-old-space-size=64"},
		{`{"language":"javascript","code":"1"}`, ""},
	} {
		before := len(ts.launcher.calls())
		if r := ts.do("POST", "/v1/exec", tc.body); r.status != 200 {
			t.Fatalf("%s: %d %s", tc.body, r.status, r.body)
		}
		req := ts.launcher.calls()[before]
		if got := req.Env["NODE_OPTIONS"]; got != tc.want {
			t.Errorf("%s: NODE_OPTIONS %.80q, want %.80q", tc.body, got, tc.want)
		}
	}
}
