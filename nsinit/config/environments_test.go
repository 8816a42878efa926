package config

import (
	"strings"
	"testing"
)

func TestValidateEnvironments(t *testing.T) {
	d := "sha256:" + strings.Repeat("a", 64)
	good := Environment{Name: "python-datascience", Language: "python", Root: "/opt/envs/ds", Mount: "/opt/sandboxd/env/ds", Manifest: "/opt/envs/ds.manifest.json", Digest: d}
	cases := []struct {
		name   string
		mutate func(e *Environment)
		want   string
	}{
		{"good", func(e *Environment) {}, ""},
		{"minimal has no tree", func(e *Environment) { e.Root, e.Mount, e.Manifest = "", "", "" }, ""},
		{"bad name", func(e *Environment) { e.Name = "../x" }, "environment name"},
		{"unknown language", func(e *Environment) { e.Language = "ruby" }, "not a configured runtime"},
		{"bad digest", func(e *Environment) { e.Digest = "md5:00" }, "digest"},
		{"mount over /usr", func(e *Environment) { e.Mount = "/usr/lib/python3" }, "must be below /opt/sandboxd/env/"},
		{"mount is the prefix", func(e *Environment) { e.Mount = "/opt/sandboxd/env" }, "must be below"},
		{"relative root", func(e *Environment) { e.Root = "envs/ds" }, "clean absolute"},
		{"manifest inside the tree", func(e *Environment) { e.Manifest = "/opt/envs/ds/manifest.json" }, "outside the tree"},
		{"LD_ env", func(e *Environment) { e.Env = []string{"LD_PRELOAD=/x.so"} }, "LD_ names are refused"},
		{"mount without root", func(e *Environment) { e.Root = "" }, "need a root"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Default("/var/lib/sandboxd/workspaces", "/x/shim", "/x/p.json")
			e := good
			tc.mutate(&e)
			c.Environments = []Environment{e}
			err := c.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
	c := Default("/w", "/x/shim", "/x/p.json")
	a, b := good, good
	b.Name = "other"
	a.Default, b.Default = true, true
	c.Environments = []Environment{a, b}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "both the default") {
		t.Fatalf("two defaults: %v", err)
	}
	c.Environments = []Environment{a, a}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "declared twice") {
		t.Fatalf("duplicate: %v", err)
	}
}

// TestEnvironmentDigestCoversVariables: the environment digest changes
// with the tree's digest and with any variable's name or value, not with
// the variables' order, and is not the tree digest itself.
func TestEnvironmentDigestCoversVariables(t *testing.T) {
	base := Environment{Digest: "sha256:" + strings.Repeat("a", 64), Env: []string{"A=1", "B=2"}}
	d := base.EnvironmentDigest()
	if d == base.Digest || !strings.HasPrefix(d, "sha256:") || len(d) != len("sha256:")+64 {
		t.Fatalf("digest %q", d)
	}
	for _, tc := range []struct {
		name string
		e    Environment
		same bool
	}{
		{"reordered", Environment{Digest: base.Digest, Env: []string{"B=2", "A=1"}}, true},
		{"a value", Environment{Digest: base.Digest, Env: []string{"A=1", "B=3"}}, false},
		{"a name", Environment{Digest: base.Digest, Env: []string{"A=1", "C=2"}}, false},
		{"one more", Environment{Digest: base.Digest, Env: []string{"A=1", "B=2", "C=3"}}, false},
		{"none", Environment{Digest: base.Digest}, false},
		{"entries joined differently", Environment{Digest: base.Digest, Env: []string{"A=1\nB=2"}}, false},
		{"the tree", Environment{Digest: "sha256:" + strings.Repeat("b", 64), Env: base.Env}, false},
	} {
		if got := tc.e.EnvironmentDigest(); (got == d) != tc.same {
			t.Errorf("%s: digest %s, base %s, want same=%v", tc.name, got, d, tc.same)
		}
	}
}
