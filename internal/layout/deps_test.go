package layout

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/nsinit-deps.txt from the current tree")

// nsinitBuild is how the Makefile builds the helper: cgo (the prelude,
// libseccomp) with these tags. The dependency list depends on both.
var nsinitBuild = []string{"-tags", "netgo,osusergo"}

// deps lists the non-standard packages pkgs link, one a line, sorted.
func deps(t *testing.T, root string, args ...string) []string {
	t.Helper()
	cmdArgs := append([]string{"list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}"}, args...)
	cmd := exec.Command("go", cmdArgs...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(cmdArgs, " "), err, stderr.String())
	}
	var list []string
	for _, line := range strings.Split(string(out), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			list = append(list, line)
		}
	}
	sort.Strings(list)
	return list
}

// TestHelperDeps: the helper runs with file capabilities, so every package
// it links is part of the privileged binary. The list is committed; a new
// dependency shows up as a diff to review, never by accident.
// Regenerate with: go test ./internal/layout -run TestHelperDeps -update
func TestHelperDeps(t *testing.T) {
	root := repoRoot(t)
	args := append(append([]string{}, nsinitBuild...), "./cmd/sandboxd-nsinit")
	got := strings.Join(deps(t, root, args...), "\n") + "\n"
	golden := filepath.Join("testdata", "nsinit-deps.txt")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("the helper's dependencies changed; review the difference, then run\n\tgo test ./internal/layout -run TestHelperDeps -update\n%s", lineDiff(string(want), got))
	}
}

// TestUnprivilegedBinariesStayOutOfThePrelude: the supervisor and the CLI
// must never link the C prelude (its constructor would run in them), nor
// the helper's heavy privileged-side dependencies.
func TestUnprivilegedBinariesStayOutOfThePrelude(t *testing.T) {
	root := repoRoot(t)
	forbidden := []string{
		"github.com/sandboxd/sandboxd/nsinit/prelude",
		"github.com/seccomp/libseccomp-golang",
		"github.com/vishvananda/netlink",
	}
	for _, bin := range []string{"./cmd/sandboxd", "./cmd/sandboxctl"} {
		for _, p := range deps(t, root, bin) {
			for _, f := range forbidden {
				if p == f || strings.HasPrefix(p, f+"/") {
					t.Errorf("%s links %s: it must never (see docs/DESIGN.md, Layout)", bin, p)
				}
			}
		}
	}
}

// lineDiff names the lines only in want (-) and only in got (+).
func lineDiff(want, got string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	w, g := in(want), in(got)
	var b strings.Builder
	for _, l := range strings.Split(want, "\n") {
		if l != "" && !g[l] {
			b.WriteString("-" + l + "\n")
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if l != "" && !w[l] {
			b.WriteString("+" + l + "\n")
		}
	}
	return b.String()
}
