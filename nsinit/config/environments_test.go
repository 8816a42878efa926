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
