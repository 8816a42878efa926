package integration

import (
	"encoding/json"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/nsinit/config"
)

// TestPayloadEnvironmentIsExact: a payload's environment is exactly the
// helper's base, plus the variables of the environment its result attests
// (as GET /v1/environments lists them, covered by the digest), plus the
// request's env, which wins. Read from /proc/self/environ in the payload.
func TestPayloadEnvironmentIsExact(t *testing.T) {
	s, _ := envInstallation(t)
	raw, err := os.ReadFile(s.in.path("etc/nsinit-envs.json"))
	if err != nil {
		t.Fatal(err)
	}
	var hc config.Config
	if err := json.Unmarshal(raw, &hc); err != nil {
		t.Fatal(err)
	}
	envs := environments(t, s)
	req := py("import sys\nsys.stdout.write(open('/proc/self/environ', 'rb').read().decode().replace('\\0', '\\n'))")
	req["env"] = map[string]string{"GREETING": "hi", "MPLCONFIGDIR": "/tmp/mine"}
	r := s.exec(req)
	if !exitIs(r, 0) || r.Policy.Environment == nil {
		t.Fatalf("exec: %+v", r)
	}
	attested, ok := envs[r.Policy.Environment.Name]
	if !ok || attested.Digest != r.Policy.Environment.Digest || len(attested.Env) == 0 {
		t.Fatalf("the attested environment %+v is not listed with its variables: %+v", r.Policy.Environment, envs)
	}
	want := map[string]string{}
	for _, kv := range hc.BaseEnv {
		name, value, _ := strings.Cut(kv, "=")
		want[name] = value
	}
	maps.Copy(want, attested.Env)
	maps.Copy(want, req["env"].(map[string]string))
	got := map[string]string{}
	for _, kv := range strings.Split(strings.TrimSuffix(r.Stdout, "\n"), "\n") {
		name, value, _ := strings.Cut(kv, "=")
		got[name] = value
	}
	if !maps.Equal(got, want) {
		t.Fatalf("the payload's environment:\n%v\nwant base + %s's variables + the request's:\n%v", sorted(got), attested.Name, sorted(want))
	}
}

func sorted(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// attestsTree reports whether an exec's attested environment is the one
// GET /v1/environments lists under its name (its environment digest) and
// that environment's tree is treeDigest, as registration printed it.
func attestsTree(t *testing.T, s *supervisor, ref *api.EnvironmentRef, treeDigest string) bool {
	t.Helper()
	if ref == nil {
		return false
	}
	e, ok := environments(t, s)[ref.Name]
	return ok && e.Digest == ref.Digest && e.TreeDigest == treeDigest
}
