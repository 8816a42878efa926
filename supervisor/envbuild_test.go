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
	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/egress"
	"github.com/sandboxd/sandboxd/launch"
	"github.com/sandboxd/sandboxd/nsinit/config"
	"github.com/sandboxd/sandboxd/nsinit/envtree"
)

const buildLock = "demo==1.0 --hash=sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" + "\n"

// buildServer is a supervisor whose operator allows egress to pypi.test
// and other.test (on one loopback port) for this test's uid. Its fake
// launcher plays the build's sandbox: it asks the exec's proxy for
// http://pypi.test and http://other.test.
func buildServer(t *testing.T) (*testServer, string) {
	t.Helper()
	backend, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	go http.Serve(backend, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hi") }))
	t.Cleanup(func() { backend.Close() })
	_, port, _ := net.SplitHostPort(backend.Addr().String())
	cfg := testConfig()
	cfg.EgressAllow, cfg.EgressAllowUIDs = "pypi.test:"+port+",other.test:"+port, []int{os.Getuid()}
	cfg.Environments = Catalog([]config.Environment{{Name: "minimal", Language: "python", Digest: envtree.EmptyDigest}})
	allow, _ := egress.ParseAllowlist(cfg.EgressAllow)
	lo := netip.MustParseAddr("127.0.0.2")
	p, err := egress.New(egress.Config{Allow: allow, TestOnly: &egress.TestOnly{
		Resolve: map[string][][]netip.Addr{"pypi.test": {{lo}}, "other.test": {{lo}}}, PublicLoopback: []netip.Addr{lo}}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	fl := &fakeLauncher{fn: func(ctx context.Context, req launch.Request) (*launch.ExecResult, error) {
		if req.Egress != "" {
			for _, host := range []string{"pypi.test", "other.test"} {
				c, err := net.Dial("unix", filepath.Join(dir, req.Egress, config.EgressSocket))
				if err != nil {
					return nil, err
				}
				fmt.Fprintf(c, "GET http://%s:%s/ HTTP/1.1\r\nHost: %s:%s\r\n\r\n", host, port, host, port)
				if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
					resp.Body.Close()
				}
				c.Close()
			}
		}
		return okResult(req), nil
	}}
	return startServer(t, cfg, fl, readyChecks(), func(s *Server) { s.SetEgress(p, dir) }), port
}

// A build from an index: the env_build record comes first under the
// build's exec id, with the lock's hash and packages; the exec runs the
// build script with the lock staged, in minimal, with network egress whose
// proxy reaches the index's host:port and nothing else the operator allows.
func TestEnvironmentBuildEndpoint(t *testing.T) {
	ts, port := buildServer(t)
	body, _ := json.Marshal(api.EnvironmentBuildRequest{Name: "pinned", Language: "python", Lock: buildLock, Index: "https://pypi.test:" + port + "/simple/"})
	r := ts.do("POST", EnvironmentBuildPath, string(body))
	var res api.ExecResult
	if err := json.Unmarshal(r.body, &res); r.status != 200 || err != nil {
		t.Fatalf("%d %s", r.status, r.body)
	}
	recs := ts.sink.ForExec(res.ID)
	if len(recs) < 3 || recs[0].Step != facts.StepEnvBuild || recs[1].Step != "accept" || recs[2].Step != "decide" {
		t.Fatalf("records of the build: %+v", recs)
	}
	f := recs[0].Facts.(*facts.EnvBuild)
	if f.LockSHA256 != sha256Hex([]byte(buildLock)) || len(f.Packages) != 1 || f.Packages[0] != (facts.Package{Name: "demo", Version: "1.0"}) ||
		len(f.Egress) != 1 || f.Egress[0] != "pypi.test:"+port {
		t.Fatalf("env_build facts %+v", f)
	}
	req := ts.launcher.calls()[0]
	if req.Network != api.NetworkEgress || req.Environment != "minimal" || len(req.Artifacts) != 1 || req.Artifacts[0] != "env.tar" {
		t.Fatalf("launch %+v", req)
	}
	staged := map[string]string{}
	for _, f := range req.Files {
		staged[f.Path] = string(f.Content)
	}
	if staged["lock/requirements.txt"] != buildLock || !strings.Contains(staged["build.json"], `"index":"https://pypi.test:`+port+`/simple/"`) {
		t.Fatalf("staged %v", staged)
	}
	if res.Network == nil || len(res.Network.Connections) != 2 {
		t.Fatalf("network %+v", res.Network)
	}
	for _, c := range res.Network.Connections {
		if c.Allowed != (c.Host == "pypi.test") {
			t.Errorf("the narrowed proxy: %+v", c)
		}
		if c.Host == "other.test" && !strings.Contains(c.Reason, "not on the operator's egress allowlist") {
			t.Errorf("refusal reason %q", c.Reason)
		}
	}

	// An ordinary egress exec still has the operator's whole list.
	r = ts.do("POST", "/v1/exec", `{"language":"python","code":"1","network":"egress"}`)
	var plain api.ExecResult
	if err := json.Unmarshal(r.body, &plain); err != nil || plain.Network == nil || len(plain.Network.Connections) != 2 ||
		!plain.Network.Connections[0].Allowed || !plain.Network.Connections[1].Allowed {
		t.Fatalf("a plain egress exec: %d %s", r.status, r.body)
	}
}

func TestEnvironmentBuildRefusals(t *testing.T) {
	ts, port := buildServer(t)
	noEgress := startServer(t, testConfig(), nil, readyChecks())
	for _, tc := range []struct {
		ts     *testServer
		req    api.EnvironmentBuildRequest
		status int
		msg    string
	}{
		{ts, api.EnvironmentBuildRequest{Name: "p", Language: "python", Lock: "demo>=1\n", Index: "https://pypi.test:" + port + "/"}, 400, "exact pins"},
		{ts, api.EnvironmentBuildRequest{Name: "p", Language: "python", Lock: buildLock, Index: "https://evil.test:" + port + "/"}, 403, "not on the operator's egress allowlist"},
		{ts, api.EnvironmentBuildRequest{Name: "p", Language: "python", Lock: buildLock, Files: []api.ExecFile{{Path: "../x.whl"}}}, 400, "wheel's file name"},
		{noEgress, api.EnvironmentBuildRequest{Name: "p", Language: "python", Lock: buildLock, Index: "https://pypi.org/simple/"}, 403, "runs no egress proxy"},
	} {
		body, _ := json.Marshal(tc.req)
		r := tc.ts.do("POST", EnvironmentBuildPath, string(body))
		if r.status != tc.status || !strings.Contains(string(r.body), tc.msg) {
			t.Errorf("%+v: %d %s", tc.req, r.status, r.body)
		}
	}
	if n := len(ts.launcher.calls()); n != 0 {
		t.Fatalf("%d launches for refused builds", n)
	}
	if r := ts.do("GET", EnvironmentBuildPath, ""); r.status != 405 {
		t.Fatalf("GET: %d", r.status)
	}
}
