package integration

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// wheel writes a minimal pure-Python wheel of name==version into dir and
// returns its sha256 (hex).
func wheel(t *testing.T, dir, name, version string) string {
	t.Helper()
	files := map[string]string{
		name + "/__init__.py":                        fmt.Sprintf("__version__ = %q\n", version),
		name + "-" + version + ".dist-info/METADATA": fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\n", name, version),
		name + "-" + version + ".dist-info/WHEEL":    "Wheel-Version: 1.0\nGenerator: sandboxd-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
	}
	var record strings.Builder
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, p := range []string{name + "/__init__.py", name + "-" + version + ".dist-info/METADATA", name + "-" + version + ".dist-info/WHEEL"} {
		w, err := zw.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write([]byte(files[p]))
		sum := sha256.Sum256([]byte(files[p]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", p, base64.RawURLEncoding.EncodeToString(sum[:]), len(files[p]))
	}
	rec := name + "-" + version + ".dist-info/RECORD"
	fmt.Fprintf(&record, "%s,,\n", rec)
	w, err := zw.Create(rec)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write([]byte(record.String()))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+"-"+version+"-py3-none-any.whl"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(sum[:])
}

var builtRe = regexp.MustCompile(`digest (sha256:[0-9a-f]{64})`)

// envctl runs the real sandboxctl env command against s and the
// environments' helper config.
func envctl(s *supervisor, args ...string) (string, error) {
	in := s.in
	if len(args) > 0 && args[0] == "build" {
		args = append(args, "--socket", s.socket)
	}
	if len(args) > 0 && (args[0] == "build" || args[0] == "rm") {
		args = append(args, "--lib", in.path("lib/sandboxd/env"))
	}
	args = append(append([]string{"env"}, args...), "--helper-config", in.path("etc/nsinit-envs.json"))
	out, err := exec.Command(in.path("bin/sandboxctl"), args...).CombinedOutput()
	return string(out), err
}

// TestEnvironmentBuild builds a pinned environment from a local wheelhouse
// inside a sandbox (no network, the payload's uid), twice (same digest),
// refuses a wrong hash, runs an exec in the result, and lists, shows and
// removes it (a default cannot be removed).
func TestEnvironmentBuild(t *testing.T) {
	s, _ := envInstallation(t)
	in := s.in
	house := t.TempDir()
	ha, hb := wheel(t, house, "alpha", "1.0"), wheel(t, house, "beta", "2.0")
	reqs := filepath.Join(t.TempDir(), "requirements.txt")
	writeReqs := func(hashA string) {
		t.Helper()
		body := fmt.Sprintf("alpha==1.0 \\\n    --hash=sha256:%s\nbeta==2.0 --hash=sha256:%s\n", hashA, hb)
		if err := os.WriteFile(reqs, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	build := func() (string, error) {
		return envctl(s, "build", "pinned", "--language", "python", "--requirements", reqs, "--find-links", house)
	}
	writeReqs(ha)
	out1, err := build()
	if err != nil {
		t.Fatalf("build: %v\n%s", err, out1)
	}
	out2, err := build()
	if err != nil {
		t.Fatalf("second build: %v\n%s", err, out2)
	}
	d1, d2 := builtRe.FindStringSubmatch(out1), builtRe.FindStringSubmatch(out2)
	if d1 == nil || d2 == nil || d1[1] != d2[1] {
		t.Fatalf("same lock, digests differ:\n%s\n%s", out1, out2)
	}

	writeReqs(strings.Repeat("0", 64))
	if out, err := build(); err == nil || !strings.Contains(out, "HASHES") {
		t.Fatalf("a wrong hash was not refused: %v\n%s", err, out)
	}
	if out, err := envctl(s, "ls"); err != nil || !regexp.MustCompile(`(?m)^pinned +python +false +2 +sha256:`).MatchString(out) {
		t.Fatalf("env ls: %v\n%s", err, out)
	}
	if out, err := envctl(s, "show", "pinned"); err != nil || !strings.Contains(out, "package   alpha 1.0") || !strings.Contains(out, d1[1]) {
		t.Fatalf("env show: %v\n%s", err, out)
	}

	// The supervisor reads environments at start.
	s.stop()
	s2 := in.startSupervisor(t, supervisorOpts{helper: "nsinit-envs", extra: []string{"--helper-config", in.path("etc/nsinit-envs.json")}})
	req := py("import alpha, beta, sys; print(alpha.__version__, beta.__version__, alpha.__file__)")
	req["environment"] = "pinned"
	r := s2.exec(req)
	if !strings.HasPrefix(r.Stdout, "1.0 2.0 /opt/sandboxd/env/pinned/alpha/") || !attestsTree(t, s2, r.Policy.Environment, d1[1]) {
		t.Fatalf("exec in pinned: %+v", r)
	}
	if out, err := envctl(s2, "rm", "python-datascience"); err == nil || !strings.Contains(out, "is the default of python") {
		t.Fatalf("rm of the default: %v\n%s", err, out)
	}
	root := in.path("lib/sandboxd/env", "pinned-"+strings.TrimPrefix(d1[1], "sha256:")[:16])
	if out, err := envctl(s2, "rm", "pinned"); err != nil {
		t.Fatalf("rm: %v\n%s", err, out)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Fatalf("the tree %s is still there: %v", root, err)
	}
	if out, _ := envctl(s2, "ls"); strings.Contains(out, "pinned") {
		t.Fatalf("still listed:\n%s", out)
	}
}

// isNumberLock is a real lockfile of is-number@7.0.0 from the npm
// registry; integrity is that of the published tarball.
func isNumberLock(integrity string) string {
	return `{
  "name": "jsenv",
  "lockfileVersion": 3,
  "requires": true,
  "packages": {
    "": {"name": "jsenv", "dependencies": {"is-number": "7.0.0"}},
    "node_modules/is-number": {
      "version": "7.0.0",
      "resolved": "https://registry.npmjs.org/is-number/-/is-number-7.0.0.tgz",
      "integrity": "` + integrity + `",
      "engines": {"node": ">=0.12.0"}
    }
  }
}
`
}

const isNumberIntegrity = "sha512-41Cifkg6e8TylSpdtTpeLVMqvSBEVzTttHvERD741+pnZ8ANv0004MRL43QKPDlK9cGvNp6NZWZUBlbGXYxxng=="

// TestEnvironmentBuildJavaScript builds a JavaScript environment from a
// lockfile through the real npm registry: npm ci runs in a sandbox whose
// only way out is the egress proxy narrowed to registry.npmjs.org:443. The
// build is audited (lock hash, packages; every connection to the
// registry), gives the same digest twice, a wrong integrity fails it, a
// registry off the operator's allowlist is refused, and an exec in the
// environment requires the pinned version.
//
// On this build host registry.npmjs.org resolves to 203.0.113.80, a
// TEST-NET-3 address that the proxy rightly refuses as not public. So the
// test-only resolver maps the name to 127.0.0.23 (a TESTONLY public
// loopback), where a plain TCP relay forwards to the address the host's
// own resolver gives: npm still talks TLS end to end with the real
// registry, and every byte still passes the proxy's allowlist and SNI
// check.
func TestEnvironmentBuildJavaScript(t *testing.T) {
	in := setup(t)
	relay := registryRelay(t, "127.0.0.23:443", "registry.npmjs.org:443")
	s, _ := envInstallationWith(t, supervisorOpts{bin: testonlySupervisor(t, in),
		extra: []string{"--egress-allow", "registry.npmjs.org,example.org", "--egress-allow-uid", "0"},
		env:   []string{"TESTONLY_EGRESS_RESOLVE=registry.npmjs.org=127.0.0.23,example.org=127.0.0.23", "TESTONLY_EGRESS_PUBLIC_LOOPBACK=127.0.0.23"}})
	lock := filepath.Join(t.TempDir(), "package-lock.json")
	write := func(integrity string) {
		if err := os.WriteFile(lock, []byte(isNumberLock(integrity)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	build := func(extra ...string) (string, error) {
		return envctl(s, append([]string{"build", "jsenv", "--language", "javascript", "--lockfile", lock, "--timeout-ms", "60000"}, extra...)...)
	}
	write(isNumberIntegrity)
	out1, err := build()
	if err != nil {
		t.Fatalf("build: %v\n%s", err, out1)
	}
	out2, err := build()
	d1, d2 := builtRe.FindStringSubmatch(out1), builtRe.FindStringSubmatch(out2)
	if err != nil || d1 == nil || d2 == nil || d1[1] != d2[1] {
		t.Fatalf("same lock, digests differ (%v):\n%s\n%s", err, out1, out2)
	}

	// The audit trail: the env_build record under the build exec's id, and
	// every connection the build made went to the registry.
	id := regexp.MustCompile(`\(exec ([0-9a-f]{32}),`).FindStringSubmatch(out1)
	if id == nil {
		t.Fatalf("no exec id in %s", out1)
	}
	recs := auditExec(auditRead(t, s.audit), id[1])
	eb := auditStep(recs, "env_build")
	lockBytes, _ := os.ReadFile(lock)
	sum := sha256.Sum256(lockBytes)
	f, _ := json.Marshal(eb.Facts)
	if !strings.Contains(string(f), `"lock_sha256":"`+hex.EncodeToString(sum[:])+`"`) ||
		!strings.Contains(string(f), `"packages":[{"name":"is-number","version":"7.0.0"}]`) ||
		!strings.Contains(string(f), `"egress":["registry.npmjs.org:443"]`) {
		t.Fatalf("env_build record: %s (steps %s)", f, auditSteps(recs))
	}
	egress := 0
	for _, r := range recs {
		if r.Step == "egress" {
			egress++
			if b, _ := json.Marshal(r.Facts); !strings.Contains(string(b), `"host":"registry.npmjs.org"`) || !strings.Contains(string(b), `"allowed":true`) {
				t.Errorf("a build connection not to the registry: %s", b)
			}
		}
	}
	if egress == 0 {
		t.Fatalf("no egress record for the build (steps %s)", auditSteps(recs))
	}

	write("sha512-" + base64.StdEncoding.EncodeToString(make([]byte, 64)))
	if out, err := build(); err == nil || !strings.Contains(out, "EINTEGRITY") {
		t.Fatalf("a wrong integrity was not refused: %v\n%s", err, out)
	}
	write(isNumberIntegrity)
	if out, err := build("--registry", "https://registry.yarnpkg.com/"); err == nil || !strings.Contains(out, "not on the operator's egress allowlist") {
		t.Fatalf("a registry off the allowlist: %v\n%s", err, out)
	}

	if relay.Load() == 0 {
		t.Fatal("the build never went through the relay")
	}
	s.stop()
	s2 := in.startSupervisor(t, supervisorOpts{helper: "nsinit-envs", extra: []string{"--helper-config", in.path("etc/nsinit-envs.json")}})
	r := s2.exec(map[string]any{"language": "javascript", "environment": "jsenv",
		"code": `console.log(require("is-number/package.json").version, require("is-number")(5), require.resolve("is-number"))`})
	if !strings.HasPrefix(r.Stdout, "7.0.0 true /opt/sandboxd/env/jsenv/node_modules/is-number/") || !attestsTree(t, s2, r.Policy.Environment, d1[1]) {
		t.Fatalf("exec in jsenv: %+v", r)
	}
}

// testonlySupervisor builds the supervisor with the sandboxd_testonly tag
// (the only build that honours the TESTONLY switches) once and returns its
// path below the prefix.
func testonlySupervisor(t *testing.T, in *installation) string {
	t.Helper()
	const rel = "bin/sandboxd-testonly"
	if _, err := os.Stat(in.path(rel)); err != nil {
		cmd := exec.Command("go", "build", "-tags", "sandboxd_testonly", "-o", in.path(rel), "./cmd/sandboxd")
		cmd.Dir = in.repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build the test-only supervisor: %v\n%s", err, out)
		}
	}
	return rel
}

// registryRelay listens on addr and copies every connection, unread, to
// target (dialled by name, with the host's resolver). It counts the
// connections.
func registryRelay(t *testing.T, addr, target string) *atomic.Int64 {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			go func() {
				defer c.Close()
				u, err := net.DialTimeout("tcp", target, 10*time.Second)
				if err != nil {
					return
				}
				defer u.Close()
				go func() { _, _ = io.Copy(u, c); u.(*net.TCPConn).CloseWrite() }()
				_, _ = io.Copy(c, u)
			}()
		}
	}()
	return &n
}
