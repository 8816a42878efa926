package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/policy"
)

// TestConfigDocUpToDate fails when docs/CONFIG.md is not what the code
// generates: a setting, default, range or helper config field changed
// without the reference.
func TestConfigDocUpToDate(t *testing.T) {
	want, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "docs", "CONFIG.md")
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v; run `go generate ./policy/`", path, err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) || i < len(wl); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("docs/CONFIG.md is stale; run `go generate ./policy/`.\nfirst difference, line %d:\n have: %s\n want: %s", i+1, g, w)
			}
		}
	}
}

// TestEverySettingDocumented checks the generator's coverage: every flag
// and variable of the settings table appears, with its default.
func TestEverySettingDocumented(t *testing.T) {
	doc, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range policy.SettingDocs() {
		for _, s := range []string{"`--" + d.Flag + "`", "`" + d.Env + "`"} {
			if !bytes.Contains(doc, []byte(s)) {
				t.Errorf("%s missing from the reference", s)
			}
		}
	}
}

// TestPhrase pins how Validate's messages become the "accepted" column.
func TestPhrase(t *testing.T) {
	for _, c := range []struct{ flag, msg, want string }{
		{"pids", "--pids: -1 is out of range 1..4194304", "1..4194304"},
		{"exec-timeout", "--exec-timeout: -1 ms is out of range 1..60000 (--exec-timeout-max)", "1..60000 (--exec-timeout-max)"},
		{"tmp-size", "--tmp-size: 0 bytes is below 1 MiB", "at least 1 MiB"},
		{"max-sessions", "--max-sessions: -1 is negative (0 disables sessions)", "not negative (0 disables sessions)"},
		{"socket", `--socket: "relative/path" is not an absolute path`, "an absolute path"},
		{"socket", "--socket: must be set", "required"},
		{"cpus", "--cpus: -1 is out of range (0, 1024]", "(0, 1024]"},
		{"x", "--y: something else", "refused as: --y: something else"},
		{"x", "--x: an unforeseen sentence", "an unforeseen sentence"},
	} {
		if got := phrase(c.flag, c.msg); got != c.want {
			t.Errorf("phrase(%q, %q) = %q, want %q", c.flag, c.msg, got, c.want)
		}
	}
}
