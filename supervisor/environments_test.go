package supervisor

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/launch"
	"github.com/sandboxd/sandboxd/nsinit/config"
	"github.com/sandboxd/sandboxd/nsinit/envtree"
	"github.com/sandboxd/sandboxd/session"
)

// registeredTree makes a tree with its manifest, as registration does.
func registeredTree(t *testing.T) config.Environment {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "tree")
	if err := os.MkdirAll(filepath.Join(root, "mpl"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "mpl", "matplotlibrc"), []byte("font.family: sans-serif\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := envtree.Build(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := envtree.WriteManifest(filepath.Join(dir, "manifest.json"), m); err != nil {
		t.Fatal(err)
	}
	return config.Environment{Name: "python-datascience", Language: "python", Root: root, Mount: "/opt/sandboxd/env/python-datascience",
		Manifest: filepath.Join(dir, "manifest.json"), Digest: m.Digest, Default: true,
		Packages: []config.Package{{Name: "python3-pandas", Version: "1.5.3"}}}
}

func TestEnvironmentsEndpointAndDecide(t *testing.T) {
	tree := registeredTree(t)
	minimal := config.Environment{Name: "minimal", Language: "python", Digest: envtree.EmptyDigest}
	cfg := testConfig()
	cfg.Environments = Catalog([]config.Environment{tree, minimal})
	ts := startServer(t, cfg, nil, launch.HealthChecks{})
	ts.srv.WatchEnvironments(context.Background(), []config.Environment{tree, minimal}, time.Hour)

	r := ts.do("GET", "/v1/environments", "")
	var list api.EnvironmentList
	if err := json.Unmarshal(r.body, &list); err != nil || r.status != 200 {
		t.Fatalf("%d %s %v", r.status, r.body, err)
	}
	if len(list.Environments) != 2 || list.Environments[0].Name != "minimal" || list.Environments[0].Packages == nil ||
		!list.Environments[1].Default || list.Environments[1].TreeDigest != tree.Digest || list.Environments[1].Digest != tree.EnvironmentDigest() ||
		list.Environments[1].Packages[0].Name != "python3-pandas" {
		t.Fatalf("list %+v", list)
	}

	// Default, then by name, then unknown (400), then a session default.
	r = ts.do("POST", "/v1/exec", `{"language":"python","code":"1"}`)
	if r.status != 200 || ts.launcher.reqs[0].Environment != "python-datascience" {
		t.Fatalf("default: %d %s %+v", r.status, r.body, ts.launcher.reqs)
	}
	r = ts.do("POST", "/v1/exec", `{"language":"python","code":"1","environment":"minimal"}`)
	if r.status != 200 || ts.launcher.reqs[1].Environment != "minimal" {
		t.Fatalf("named: %d %s", r.status, r.body)
	}
	r = ts.do("POST", "/v1/exec", `{"language":"python","code":"1","environment":"/usr/lib/python3"}`)
	if r.status != 400 || !strings.Contains(string(r.body), "is not configured") {
		t.Fatalf("unknown: %d %s", r.status, r.body)
	}
	decides := 0
	ts.sink.ForExec("") // lock
	for _, rec := range ts.sink.Records {
		f := rec.FactMap()
		if rec.Step == "decide" && rec.OK && f["environment"] == "python-datascience" && f["environment_digest"] == tree.EnvironmentDigest() {
			decides++
		}
	}
	if decides != 1 {
		t.Fatalf("decide records with the environment: %d", decides)
	}

	// The tree changes after registration: the next full check marks it,
	// and its execs are refused with 503 and the reason.
	if err := os.WriteFile(filepath.Join(tree.Root, "mpl", "matplotlibrc"), []byte("font.family: serif!!\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ts.srv.envs.recheck(ts.srv.log)
	r = ts.do("POST", "/v1/exec", `{"language":"python","code":"1"}`)
	if r.status != 503 || !strings.Contains(string(r.body), "modified after registration") || !strings.Contains(string(r.body), "mpl/matplotlibrc") {
		t.Fatalf("modified tree: %d %s", r.status, r.body)
	}
	r = ts.do("POST", "/v1/exec", `{"language":"python","code":"1","environment":"minimal"}`)
	if r.status != 200 {
		t.Fatalf("an intact environment is refused too: %d %s", r.status, r.body)
	}
}

// TestSessionDefaultEnvironment: POST /v1/sessions names a default; an
// unknown one is 400; the session's execs run in it unless they name another.
func TestSessionDefaultEnvironment(t *testing.T) {
	cfg := testConfig()
	cfg.Environments = Catalog([]config.Environment{
		{Name: "python-datascience", Language: "python", Digest: envtree.EmptyDigest, Default: true},
		{Name: "minimal", Language: "python", Digest: envtree.EmptyDigest},
	})
	st, err := session.Open(session.Config{StateDir: t.TempDir(), MaxSessions: 4, TTLDefault: 3600, TTLCap: 3600, SelfUID: os.Getuid(), QuotaBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, cfg, nil, readyChecks(), func(s *Server) { s.SetSessions(st) })
	if r := ts.do("POST", "/v1/sessions", `{"environment":"nope"}`); r.status != 400 || !strings.Contains(string(r.body), `nope\" is not configured`) {
		t.Fatalf("unknown: %d %s", r.status, r.body)
	}
	r := ts.do("POST", "/v1/sessions", `{"environment":"minimal"}`)
	var sess api.Session
	if err := json.Unmarshal(r.body, &sess); r.status != 201 || err != nil || sess.Environment != "minimal" {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if r := ts.do("POST", "/v1/sessions/"+sess.ID+"/exec", `{"language":"python","code":"1"}`); r.status != 200 {
		t.Fatalf("exec: %d %s", r.status, r.body)
	}
	if r := ts.do("POST", "/v1/sessions/"+sess.ID+"/exec", `{"language":"python","code":"1","environment":"python-datascience"}`); r.status != 200 {
		t.Fatalf("exec: %d %s", r.status, r.body)
	}
	if got := []string{ts.launcher.reqs[0].Environment, ts.launcher.reqs[1].Environment}; got[0] != "minimal" || got[1] != "python-datascience" {
		t.Fatalf("environments %v", got)
	}
}

// A session's default environment is in its persisted metadata from the
// moment it is created: a supervisor killed before the session's first
// exec recovers it with the environment (reopening the store from the
// state directory is what a restarted supervisor does).
func TestSessionEnvironmentPersisted(t *testing.T) {
	cfg := testConfig()
	cfg.Environments = Catalog([]config.Environment{{Name: "minimal", Language: "python", Digest: envtree.EmptyDigest}})
	dir := t.TempDir()
	open := func() *session.Store {
		st, err := session.Open(session.Config{StateDir: dir, MaxSessions: 4, TTLDefault: 3600, TTLCap: 3600, SelfUID: os.Getuid(), QuotaBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	ts := startServer(t, cfg, nil, readyChecks(), func(s *Server) { s.SetSessions(open()) })
	r := ts.do("POST", "/v1/sessions", `{"environment":"minimal"}`)
	var sess api.Session
	if err := json.Unmarshal(r.body, &sess); r.status != 201 || err != nil {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	again, err := open().Get(sess.ID, launch.Caller{UID: os.Getuid(), GID: os.Getgid()})
	if err != nil || again.Environment != "minimal" {
		t.Fatalf("recovered session: %+v (%v), want environment minimal", again, err)
	}
}
