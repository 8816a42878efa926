package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnconfinedRefused feeds the checker copies of the shipped compose
// file with seccomp or AppArmor turned off in every way Docker accepts:
// each one must be refused, and the shipped file accepted.
func TestUnconfinedRefused(t *testing.T) {
	orig, err := os.ReadFile("../../compose/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	profile, err := filepath.Abs("../../../profiles/kubernetes-worker.json")
	if err != nil {
		t.Fatal(err)
	}
	const neighbour = "\n  neighbour:\n    image: busybox\n    network_mode: none\n    security_opt:\n      - %s\n"
	for _, c := range []struct{ name, old, new string }{
		{"shipped", "", ""},
		{"seccomp=unconfined", "      - seccomp=./kubernetes-worker.json", "      - seccomp=unconfined"},
		{"seccomp:unconfined", "      - seccomp=./kubernetes-worker.json", "      - seccomp:unconfined"},
		{"seccomp=Unconfined", "      - seccomp=./kubernetes-worker.json", "      - seccomp=Unconfined"},
		{"apparmor=unconfined", "      - apparmor=sandboxd", "      - apparmor=unconfined"},
		{"apparmor:unconfined", "      - apparmor=sandboxd", "      - apparmor:unconfined"},
		{"apparmor=Unconfined", "      - apparmor=sandboxd", "      - apparmor=Unconfined"},
		{"apparmor added unconfined", "      - apparmor=sandboxd\n", "      - apparmor=sandboxd\n      - apparmor:unconfined\n"},
		{"seccomp added unconfined", "      - apparmor=sandboxd\n", "      - apparmor=sandboxd\n      - seccomp=unconfined\n"},
		{"apparmor missing", "      - apparmor=sandboxd\n", ""},
		{"privileged", "    read_only: true\n", "    read_only: true\n    privileged: true\n"},
		{"neighbour seccomp", "\nvolumes:\n", strings.Replace(neighbour, "%s", "seccomp=unconfined", 1) + "\nvolumes:\n"},
		{"neighbour apparmor", "\nvolumes:\n", strings.Replace(neighbour, "%s", "apparmor:unconfined", 1) + "\nvolumes:\n"},
		{"neighbour privileged", "\nvolumes:\n", strings.Replace(neighbour, "      - %s\n", "      - no-new-privileges:true\n    privileged: true\n", 1) + "\nvolumes:\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			text := string(orig)
			if c.old != "" {
				if !strings.Contains(text, c.old) {
					t.Fatalf("compose.yaml no longer holds %q: update the test", c.old)
				}
				text = strings.Replace(text, c.old, c.new, 1)
			}
			file := filepath.Join(dir, "compose.yaml")
			for name, body := range map[string]string{"compose.yaml": text} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			b, err := os.ReadFile(profile)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "kubernetes-worker.json"), b, 0o600); err != nil {
				t.Fatal(err)
			}
			bad, err := check(file, profile, "sandboxd")
			if c.name == "shipped" {
				if err != nil || len(bad) != 0 {
					t.Fatalf("the shipped file is refused: %v %v", err, bad)
				}
				return
			}
			if err == nil && len(bad) == 0 {
				t.Fatalf("accepted:\n%s", text)
			}
			t.Logf("refused: %v %v", err, bad)
		})
	}
}
