package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/api"
)

func TestDecideEnvironment(t *testing.T) {
	ds := api.Environment{Name: "python-datascience", Language: "python", Digest: "sha256:aa", Default: true}
	minimal := api.Environment{Name: "minimal", Language: "python", Digest: "sha256:bb"}
	node := api.Environment{Name: "node-min", Language: "javascript", Digest: "sha256:cc"}
	cases := []struct {
		name, lang, requested, session string
		envs                           Environments
		want, wantErr                  string
	}{
		{"language default", "python", "", "", Environments{ds, minimal}, "python-datascience", ""},
		{"no default for javascript", "javascript", "", "", Environments{ds}, "", ""},
		{"requested", "python", "minimal", "", Environments{ds, minimal}, "minimal", ""},
		{"session default", "python", "", "minimal", Environments{ds, minimal}, "minimal", ""},
		{"request beats session", "python", "python-datascience", "minimal", Environments{ds, minimal}, "python-datascience", ""},
		{"unknown", "python", "numpy-2", "", Environments{ds, minimal}, "", `environment "numpy-2" is not configured (configured for python: minimal, python-datascience`},
		{"a path is just an unknown name", "python", "/usr/lib/python3", "", Environments{ds}, "", "is not configured"},
		{"other language", "python", "node-min", "", Environments{ds, node}, "", `environment "node-min" is for javascript, not python`},
		{"unknown session default", "python", "", "gone", Environments{ds}, "", `environment "gone" is not configured`},
		{"none configured", "python", "x", "", nil, "", "none are configured for python"},
		// A session's default is for execs of its language; the session's
		// javascript execs get javascript's default.
		{"session default of another language", "javascript", "", "minimal", Environments{ds, minimal, node}, "", ""},
		{"session default of another language, a javascript default", "javascript", "", "minimal", Environments{ds, minimal, {Name: "node-min", Language: "javascript", Digest: "sha256:cc", Default: true}}, "node-min", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Defaults()
			cfg.Environments = tc.envs
			req := Request{Exec: api.ExecRequest{Language: tc.lang, Code: "1", Environment: tc.requested}, SessionEnvironment: tc.session}
			d, err := Decide(req, Caller{}, cfg)
			if tc.wantErr != "" {
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want invalid containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Environment.Name != tc.want {
				t.Fatalf("environment %q, want %q", d.Environment.Name, tc.want)
			}
			if tc.want != "" && (d.Facts.Environment != tc.want || d.Facts.EnvironmentDigest != d.Environment.Digest) {
				t.Fatalf("facts %v", d.Facts)
			}
		})
	}
}
