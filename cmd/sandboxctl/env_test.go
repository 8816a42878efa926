package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/doctor"
	"github.com/sandboxd/sandboxd/nsinit/config"
	"github.com/sandboxd/sandboxd/nsinit/envtree"
)

func envRun(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"env"}, args...), stdio{in: strings.NewReader(""), out: &out, err: &errb},
		func(string) (string, bool) { return "", false })
	return out.String(), errb.String(), code
}

// env ls, show and rm work on the helper config; rm refuses a default and
// a name that is not there; bad usage is exit 2 before anything is read.
func TestEnvCommands(t *testing.T) {
	cfgPath := filepath.Join(t.TempDir(), "nsinit.json")
	c := config.Default("/var/lib/sandboxd/workspaces", "/usr/local/libexec/sandboxd/sandboxd-exec", "/etc/sandboxd/profiles/payload.json")
	c.Environments = []config.Environment{
		{Name: "minimal", Language: "python", Digest: envtree.EmptyDigest, Default: true},
		{Name: "extra", Language: "python", Digest: envtree.EmptyDigest, Packages: []config.Package{{Name: "alpha", Version: "1.0"}}},
	}
	b, _ := json.Marshal(c)
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _, code := envRun(t, "ls", "--helper-config", cfgPath); code != exitOK || !strings.Contains(out, "extra") || !strings.Contains(out, "minimal") {
		t.Fatalf("ls: %d %s", code, out)
	}
	if out, _, code := envRun(t, "show", "extra", "--helper-config", cfgPath); code != exitOK || !strings.Contains(out, "package   alpha 1.0") {
		t.Fatalf("show: %d %s", code, out)
	}
	if _, errOut, code := envRun(t, "rm", "minimal", "--helper-config", cfgPath); code != exitNotReady || !strings.Contains(errOut, "is the default of python") {
		t.Fatalf("rm default: %d %s", code, errOut)
	}
	if _, errOut, code := envRun(t, "rm", "nope", "--helper-config", cfgPath); code != exitNotReady || !strings.Contains(errOut, `no environment "nope"`) {
		t.Fatalf("rm unknown: %d %s", code, errOut)
	}
	if _, _, code := envRun(t, "rm", "extra", "--helper-config", cfgPath); code != exitOK {
		t.Fatalf("rm: %d", code)
	}
	if out, _, _ := envRun(t, "ls", "--helper-config", cfgPath); strings.Contains(out, "extra") {
		t.Fatalf("still listed: %s", out)
	}
	for _, args := range [][]string{
		{}, {"bogus"}, {"show"}, {"build"}, {"build", "x", "--language", "python", "--requirements", "r.txt"},
		{"build", "x", "--language", "python", "--requirements", "r.txt", "--index", "https://i/", "--find-links", "d"},
		{"build", "x", "--language", "javascript", "--lockfile", "l.json", "--index", "https://i/"},
		{"build", "x", "--language", "ruby", "--lockfile", "l.json"},
	} {
		if _, _, code := envRun(t, args...); code != exitUsage {
			t.Errorf("%q: exit %d, want %d", args, code, exitUsage)
		}
	}
	// A lock that is not exact pins is refused before any request.
	reqs := filepath.Join(t.TempDir(), "r.txt")
	_ = os.WriteFile(reqs, []byte("alpha>=1\n"), 0o644)
	if _, errOut, code := envRun(t, "build", "x", "--language", "python", "--requirements", reqs, "--index", "https://pypi.org/simple/", "--socket", "/nonexistent"); code != exitUsage || !strings.Contains(errOut, "exact pins") {
		t.Fatalf("bad lock: %d %s", code, errOut)
	}
}

// On a host without the data-science stack and the CJK fonts, `sandboxctl
// doctor` says so and prints the command that installs them.
func TestDoctorNamesMissingStack(t *testing.T) {
	old := doctorHost
	doctorHost = func() doctor.Host { return &bareHost{} }
	t.Cleanup(func() { doctorHost = old })
	var out, errb bytes.Buffer
	run(context.Background(), []string{"doctor"}, stdio{in: strings.NewReader(""), out: &out, err: &errb}, func(string) (string, bool) { return "", false })
	for _, want := range []string{
		"environment.datascience-stack", "apt-get install --no-install-recommends python3-numpy python3-pandas",
		"fonts.cjk", "apt-get install fonts-noto-cjk",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out.String())
		}
	}
}
