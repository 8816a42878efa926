package main

import (
	"strings"
	"testing"
)

// set puts v at path in o, making the maps on the way (an int step picks
// a list element, which must exist).
func set(t *testing.T, o any, v any, path ...any) {
	t.Helper()
	for i, p := range path {
		last := i == len(path)-1
		switch k := p.(type) {
		case string:
			m, ok := o.(map[string]any)
			if !ok {
				t.Fatalf("%v: not a map at %v", path, p)
			}
			if last {
				m[k] = v
				return
			}
			if m[k] == nil {
				m[k] = map[string]any{}
			}
			o = m[k]
		case int:
			l, ok := o.([]any)
			if !ok || k >= len(l) {
				t.Fatalf("%v: no element %d", path, k)
			}
			if last {
				l[k] = v
				return
			}
			o = l[k]
		}
	}
}

// supIndex is the index of the sandboxd container in the Deployment.
func supIndex(t *testing.T, objs map[string]obj) int {
	for i, c := range get(objs["Deployment/sandboxd"], "spec", "template", "spec", "containers").([]any) {
		if get(c, "name") == "sandboxd" {
			return i
		}
	}
	t.Fatal("no sandboxd container")
	return -1
}

// TestUnconfinedRefused feeds the checker the shipped manifests with
// seccomp or AppArmor turned off in each place Kubernetes reads it (the
// container's and the pod's securityContext of both workloads, and the
// older annotations): each must be refused, the shipped ones accepted.
func TestUnconfinedRefused(t *testing.T) {
	pod := []any{"spec", "template", "spec"}
	at := func(p ...any) []any { return append(append([]any{}, pod...), p...) }
	for _, c := range []struct {
		name   string
		object string
		path   func(sup int) []any
		value  any
	}{
		{"shipped", "", nil, nil},
		{"container seccomp Unconfined", "Deployment/sandboxd", func(s int) []any { return at("containers", s, "securityContext", "seccompProfile", "type") }, "Unconfined"},
		{"container seccomp unconfined", "Deployment/sandboxd", func(s int) []any { return at("containers", s, "securityContext", "seccompProfile", "type") }, "unconfined"},
		{"container apparmor Unconfined", "Deployment/sandboxd", func(s int) []any { return at("containers", s, "securityContext", "appArmorProfile", "type") }, "Unconfined"},
		{"container apparmor removed", "Deployment/sandboxd", func(s int) []any { return at("containers", s, "securityContext", "appArmorProfile") }, nil},
		{"pod seccomp Unconfined", "Deployment/sandboxd", func(int) []any { return at("securityContext", "seccompProfile") }, map[string]any{"type": "Unconfined"}},
		{"pod apparmor Unconfined", "Deployment/sandboxd", func(int) []any { return at("securityContext", "appArmorProfile") }, map[string]any{"type": "Unconfined"}},
		{"init container seccomp Unconfined", "Deployment/sandboxd", func(int) []any { return at("initContainers", 0, "securityContext", "seccompProfile") }, map[string]any{"type": "Unconfined"}},
		{"apparmor annotation", "Deployment/sandboxd", func(int) []any {
			return []any{"spec", "template", "metadata", "annotations", "container.apparmor.security.beta.kubernetes.io/sandboxd"}
		}, "unconfined"},
		{"seccomp annotation", "Deployment/sandboxd", func(int) []any {
			return []any{"spec", "template", "metadata", "annotations", "seccomp.security.alpha.kubernetes.io/pod"}
		}, "unconfined"},
		{"installer seccomp Unconfined", "DaemonSet/sandboxd-seccomp-installer", func(int) []any { return at("containers", 0, "securityContext", "seccompProfile", "type") }, "Unconfined"},
		{"installer apparmor Unconfined", "DaemonSet/sandboxd-seccomp-installer", func(int) []any { return at("initContainers", 1, "securityContext", "appArmorProfile") }, map[string]any{"type": "Unconfined"}},
		{"installer pod seccomp Unconfined", "DaemonSet/sandboxd-seccomp-installer", func(int) []any { return at("securityContext", "seccompProfile") }, map[string]any{"type": "Unconfined"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			objs, err := load("../../kubernetes")
			if err != nil {
				t.Fatal(err)
			}
			if c.object == "" {
				if bad := check(objs); len(bad) != 0 {
					t.Fatalf("the shipped manifests are refused: %v", bad)
				}
				return
			}
			o, ok := objs[c.object]
			if !ok {
				t.Fatalf("no %s", c.object)
			}
			path := c.path(supIndex(t, objs))
			if c.value == nil {
				parent := get(o, path[:len(path)-1]...).(map[string]any)
				delete(parent, path[len(path)-1].(string))
			} else {
				set(t, o, c.value, path...)
			}
			bad := check(objs)
			if len(bad) == 0 {
				t.Fatalf("accepted with %v = %v", path, c.value)
			}
			if c.value != nil && !strings.Contains(strings.ToLower(strings.Join(bad, "\n")), "unconfined") {
				t.Fatalf("refused, but not for being unconfined: %v", bad)
			}
		})
	}
}
