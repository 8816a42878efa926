package integration

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/sandboxd/sandboxd/api"
)

// TestEnvironmentBuildIndex builds a python environment from a PEP 503
// index over HTTPS (the loopback stand-in of egress_test.go): the build's
// sandbox reaches the index through the egress proxy narrowed to the
// index's host:port, the lock's hashes are checked, and an index host off
// the operator's allowlist is refused before anything runs.
func TestEnvironmentBuildIndex(t *testing.T) {
	in := setup(t)
	n := startInternet(t)
	s, _ := envInstallationWith(t, supervisorOpts{bin: testonlySupervisor(t, in),
		extra: []string{"--egress-allow", fmt.Sprintf("pypi.test:%d,other.test:%d", n.httpsPort, n.httpsPort), "--egress-allow-uid", "0"},
		env:   []string{"TESTONLY_EGRESS_RESOLVE=pypi.test=127.0.0.2,other.test=127.0.0.2,evil.test=127.0.0.2", "TESTONLY_EGRESS_PUBLIC_LOOPBACK=127.0.0.2"}})
	dir := t.TempDir()
	sum := sha256.Sum256(n.wheel)
	reqs, ca := filepath.Join(dir, "requirements.txt"), filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(reqs, []byte("demo==1.0 --hash=sha256:"+hex.EncodeToString(sum[:])+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ca, n.caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	index := func(host string) string { return fmt.Sprintf("https://%s:%d/simple/", host, n.httpsPort) }
	out, err := envctl(s, "build", "idx", "--language", "python", "--requirements", reqs, "--index", index("pypi.test"), "--ca-file", ca)
	if err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	d := builtRe.FindStringSubmatch(out)
	id := regexp.MustCompile(`\(exec ([0-9a-f]{32}),`).FindStringSubmatch(out)
	if d == nil || id == nil || n.hits.Load() == 0 {
		t.Fatalf("build output %s, index hits %d", out, n.hits.Load())
	}
	recs := auditExec(auditRead(t, s.audit), id[1])
	if f, _ := json.Marshal(auditStep(recs, "env_build").Facts); !strings.Contains(string(f), fmt.Sprintf(`"egress":["pypi.test:%d"]`, n.httpsPort)) ||
		!strings.Contains(string(f), `"packages":[{"name":"demo","version":"1.0"}]`) || !strings.Contains(string(f), `"source":"`+index("pypi.test")+`"`) {
		t.Fatalf("env_build record %s", f)
	}
	for _, r := range recs {
		if b, _ := json.Marshal(r.Facts); r.Step == "egress" && !strings.Contains(string(b), `"host":"pypi.test"`) {
			t.Errorf("a build connection not to the index: %s", b)
		}
	}
	if out, err := envctl(s, "build", "idx2", "--language", "python", "--requirements", reqs, "--index", index("evil.test"), "--ca-file", ca); err == nil ||
		!strings.Contains(out, "forbidden") || !strings.Contains(out, "not on the operator's egress allowlist") {
		t.Fatalf("an index off the allowlist: %v\n%s", err, out)
	}
	bad := strings.Replace(string(mustRead(t, reqs)), hex.EncodeToString(sum[:]), strings.Repeat("0", 64), 1)
	if err := os.WriteFile(reqs, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := envctl(s, "build", "idx", "--language", "python", "--requirements", reqs, "--index", index("pypi.test"), "--ca-file", ca); err == nil || !strings.Contains(out, "HASHES") {
		t.Fatalf("a wrong hash from the index: %v\n%s", err, out)
	}

	s.stop()
	s2 := in.startSupervisor(t, supervisorOpts{helper: "nsinit-envs", extra: []string{"--helper-config", in.path("etc/nsinit-envs.json")}})
	req := py("import demo; print(demo.X, demo.__file__)")
	req["environment"] = "idx"
	if r := s2.exec(req); r.Stdout != "1 /opt/sandboxd/env/idx/demo/__init__.py\n" || !attestsTree(t, s2, r.Policy.Environment, d[1]) {
		t.Fatalf("exec in idx: %+v", r)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRuntimeInstallsInSession: in a session with network "egress", `pip
// install --user` (from the loopback index, through the proxy) and `npm
// install` (from the real registry, through the relay of
// TestEnvironmentBuildJavaScript) write below /workspace (HOME), the
// packages are there for the session's next exec, and the workspace's
// usage (what the quota counts) grows by them.
func TestRuntimeInstallsInSession(t *testing.T) {
	in := setup(t)
	n := startInternet(t)
	registryRelay(t, "127.0.0.23:443", "registry.npmjs.org:443")
	s := in.startSupervisor(t, supervisorOpts{bin: testonlySupervisor(t, in),
		extra: []string{"--egress-allow", fmt.Sprintf("pypi.test:%d,registry.npmjs.org", n.httpsPort), "--egress-allow-uid", "0"},
		env:   []string{"TESTONLY_EGRESS_RESOLVE=pypi.test=127.0.0.2,registry.npmjs.org=127.0.0.23", "TESTONLY_EGRESS_PUBLIC_LOOPBACK=127.0.0.2,127.0.0.23"}})
	sess := s.createSession(t, map[string]any{"network": "egress"})
	t.Cleanup(func() { s.do("DELETE", "/v1/sessions/"+sess.ID, nil) })
	usage := func() int64 {
		_, b := s.do("GET", "/v1/sessions/"+sess.ID, nil)
		var o api.Session
		_ = json.Unmarshal(b, &o)
		return o.DiskBytes
	}
	before := usage()
	ok := func(r execResult) execResult {
		t.Helper()
		if r.ExitCode == nil || *r.ExitCode != 0 {
			t.Fatalf("exit %v\nstdout %s\nstderr %s", r.ExitCode, r.Stdout, r.Stderr)
		}
		return r
	}
	// Process mode: each exec a fresh interpreter, which is what shows the
	// install persists in the workspace rather than in a kernel's memory.
	ok(s.sessionExec(t, sess.ID, map[string]any{"language": "python", "timeout_ms": 60000, "mode": "process",
		"files": []map[string]any{{"path": "ca.pem", "content_base64": base64.StdEncoding.EncodeToString(n.caPEM)}},
		"code": fmt.Sprintf(`import subprocess, sys
sys.exit(subprocess.run([sys.executable, "-m", "pip", "install", "--user", "--break-system-packages", "--no-cache-dir",
    "--disable-pip-version-check", "--index-url", "https://pypi.test:%d/simple/", "--cert", "/workspace/ca.pem", "demo"]).returncode)`, n.httpsPort)}))
	r := ok(s.sessionExec(t, sess.ID, map[string]any{"language": "python", "mode": "process",
		"code": "import demo, os; print(demo.X, demo.__file__, os.environ['HOME'])"}))
	if !regexp.MustCompile(`^1 /workspace/\.local/lib/python3\.[0-9]+/site-packages/demo/__init__\.py /workspace\n$`).MatchString(r.Stdout) {
		t.Fatalf("the user install is not used: %q", r.Stdout)
	}
	ok(s.sessionExec(t, sess.ID, map[string]any{"language": "shell", "timeout_ms": 60000, "mode": "process",
		"code": "npm install --no-audit --no-fund --fetch-retries=0 --cache /tmp/npm-cache is-number@7.0.0"}))
	// The program runs from /run/sandboxd, so require() looks there: the
	// workspace's node_modules is named by NODE_PATH (docs/ENVIRONMENTS.md).
	r = ok(s.sessionExec(t, sess.ID, map[string]any{"language": "javascript", "mode": "process", "env": map[string]string{"NODE_PATH": "/workspace/node_modules"},
		"code": `console.log(require("is-number/package.json").version, require.resolve("is-number"))`}))
	if r.Stdout != "7.0.0 /workspace/node_modules/is-number/index.js\n" {
		t.Fatalf("the npm install is not used: %q", r.Stdout)
	}
	if after := usage(); after < before+2000 {
		t.Fatalf("workspace usage %d -> %d: the installs are not counted", before, after)
	}
}

// TestSessionEnvironmentSurvivesRestart: a session's default environment
// is recovered by a supervisor restarted after SIGKILL, before the
// session ran anything.
func TestSessionEnvironmentSurvivesRestart(t *testing.T) {
	s, _ := envInstallation(t)
	in := s.in
	sess := s.createSession(t, map[string]any{"environment": "minimal"})
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	s2 := in.startSupervisor(t, supervisorOpts{helper: "nsinit-envs", extra: []string{"--helper-config", in.path("etc/nsinit-envs.json")}})
	t.Cleanup(func() { s2.do("DELETE", "/v1/sessions/"+sess.ID, nil) })
	_, b := s2.do("GET", "/v1/sessions/"+sess.ID, nil)
	var o api.Session
	if err := json.Unmarshal(b, &o); err != nil || o.Environment != "minimal" {
		t.Fatalf("recovered session: %s", b)
	}
	req := py("print(1)")
	req["mode"] = "process" // a kernel exec's result does not carry policy.environment
	r := s2.sessionExec(t, sess.ID, req)
	if r.Policy.Environment == nil || r.Policy.Environment.Name != "minimal" {
		t.Fatalf("the session's exec ran in %+v, not minimal (the python default is python-datascience)", r.Policy.Environment)
	}
}

// TestSessionKernelEnvironment: a session's kernel runs in the session's
// environment and its results attest it; an exec asking the running
// kernel for another environment is refused (409), not run in the wrong
// one; a restarted kernel starts in the session's environment again; the
// session's python default does not refuse its javascript execs.
func TestSessionKernelEnvironment(t *testing.T) {
	s, _ := envInstallation(t)
	sess := s.createSession(t, map[string]any{"environment": "minimal"})
	t.Cleanup(func() { s.do("DELETE", "/v1/sessions/"+sess.ID, nil) })
	probe := "import os; print(os.environ.get('MPLCONFIGDIR'))"
	inKernel := func(want string) {
		t.Helper()
		r := s.sessionExec(t, sess.ID, py(probe))
		if r.Kernel == nil || r.Stdout != "None\n" || r.Policy.Environment == nil || r.Policy.Environment.Name != want {
			t.Fatalf("kernel exec: kernel %+v, stdout %q, environment %+v", r.Kernel, r.Stdout, r.Policy.Environment)
		}
	}
	inKernel("minimal")
	req := py(probe)
	req["environment"] = "python-datascience"
	if status, body := s.do("POST", "/v1/sessions/"+sess.ID+"/exec", req); status != 409 || !strings.Contains(string(body), `kernel runs in environment \"minimal\"`) {
		t.Fatalf("another environment in the running kernel: %d %s", status, body)
	}
	req["mode"] = "process"
	if r := s.sessionExec(t, sess.ID, req); r.Stdout != "/tmp/matplotlib\n" || r.Policy.Environment == nil || r.Policy.Environment.Name != "python-datascience" {
		t.Fatalf("process exec in python-datascience: %q %+v", r.Stdout, r.Policy.Environment)
	}
	if status, body := s.do("POST", "/v1/sessions/"+sess.ID+"/kernels/python/restart", nil); status != 200 {
		t.Fatalf("restart: %d %s", status, body)
	}
	inKernel("minimal")
	if r := s.sessionExec(t, sess.ID, map[string]any{"language": "javascript", "code": "console.log(1)"}); r.Stdout != "1\n" || r.Policy.Environment != nil {
		t.Fatalf("javascript in a session with a python default: %+v", r)
	}
}
