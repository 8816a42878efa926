package integration

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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

// TestEnvironmentBuild builds a pinned environment from a local wheelhouse
// inside a sandbox (no network, the payload's uid), twice (same digest),
// refuses a wrong hash, and runs an exec in the result.
func TestEnvironmentBuild(t *testing.T) {
	s, _ := envInstallation(t)
	in := s.in
	cfgPath := in.path("etc/nsinit-envs.json")
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
		out, err := exec.Command(in.path("bin/sandboxctl"), "admin", "env-build", "--name", "pinned", "--language", "python",
			"--requirements", reqs, "--find-links", house, "--socket", s.socket, "--helper-config", cfgPath,
			"--lib", in.path("lib/sandboxd/env")).CombinedOutput()
		return string(out), err
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

	// The supervisor reads environments at start.
	s.stop()
	s2 := in.startSupervisor(t, supervisorOpts{helper: "nsinit-envs", extra: []string{"--helper-config", cfgPath}})
	req := py("import alpha, beta, sys; print(alpha.__version__, beta.__version__, alpha.__file__)")
	req["environment"] = "pinned"
	r := s2.exec(req)
	if !strings.HasPrefix(r.Stdout, "1.0 2.0 /opt/sandboxd/env/pinned/alpha/") || r.Policy.Environment == nil || r.Policy.Environment.Digest != d1[1] {
		t.Fatalf("exec in pinned: %+v", r)
	}
}
