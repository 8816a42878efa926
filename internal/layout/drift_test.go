package layout

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// walkTracked calls fn for every regular file of the checkout that a reader
// of the clone sees as code or documentation: no VCS metadata, no build
// output, no installed node modules, no fixtures.
func walkTracked(t *testing.T, root string, fn func(rel string, raw []byte)) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin" || name == "node_modules" || name == "dist") {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fn(rel, raw)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// trackerRef matches a reference to the project's private tracker ("issue
// 14, item 1"): a clone has no tracker, so such a reference explains
// nothing to its reader. Say what the change does instead.
var trackerRef = regexp.MustCompile(`(?i)\bissues? #?[0-9]+`)

// trackerChecked says which files a tracker reference may not appear in:
// non-test code, scripts, build files and documents. Tests may name the
// finding they reproduce.
func trackerChecked(rel string) bool {
	base := filepath.Base(rel)
	if strings.HasSuffix(base, "_test.go") || strings.HasSuffix(base, ".test.mjs") || strings.HasSuffix(base, ".test.ts") || strings.HasPrefix(base, "test_") {
		return false
	}
	switch filepath.Ext(base) {
	case ".go", ".md", ".c", ".h", ".py", ".js", ".mjs", ".ts", ".sh", ".yaml", ".yml", ".json", ".service", ".toml":
		return true
	}
	return base == "Makefile" || base == "Dockerfile" || strings.HasPrefix(base, "run") && filepath.Dir(rel) == ".ci"
}

// TestNoTrackerNumbers: no code comment or document cites a tracker issue
// by number.
func TestNoTrackerNumbers(t *testing.T) {
	root := repoRoot(t)
	checked := 0
	walkTracked(t, root, func(rel string, raw []byte) {
		if !trackerChecked(rel) {
			return
		}
		checked++
		sc := bufio.NewScanner(strings.NewReader(string(raw)))
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		for n := 1; sc.Scan(); n++ {
			if m := trackerRef.FindString(sc.Text()); m != "" {
				t.Errorf("%s:%d cites the tracker (%q): say what the change does instead", rel, n, m)
			}
		}
	})
	if checked < 50 {
		t.Fatalf("only %d files checked: the walk is broken", checked)
	}
}

var (
	// designInvariant matches an invariant's definition in DESIGN.md:
	// "- **I4 — The payload's environment ...".
	designInvariant = regexp.MustCompile(`(?m)^- \*\*I([0-9]+) — `)
	// securityRow matches a row of SECURITY.md's invariant table.
	securityRow = regexp.MustCompile(`(?m)^\| \*\*I([0-9]+)\*\* `)
	// invariantTest matches a test named for an invariant.
	invariantTest = regexp.MustCompile(`(?m)^func (TestI([0-9]+)[A-Z][A-Za-z0-9_]*)\(`)
)

func numbers(t *testing.T, re *regexp.Regexp, text string) []int {
	t.Helper()
	var out []int
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		n, err := strconv.Atoi(m[1])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

// TestInvariantsDefinedAndListed: DESIGN.md defines I1…In in order,
// SECURITY.md's table lists exactly those, in the same order, and every
// test named TestI<n>… names one of them.
func TestInvariantsDefinedAndListed(t *testing.T) {
	root := repoRoot(t)
	read := func(rel string) string {
		raw, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	defined := numbers(t, designInvariant, read("docs/DESIGN.md"))
	if len(defined) < 12 {
		t.Fatalf("DESIGN.md defines %d invariants; the pattern is broken", len(defined))
	}
	for i, n := range defined {
		if n != i+1 {
			t.Fatalf("DESIGN.md defines the invariants as %v: want I1…I%d in order", defined, len(defined))
		}
	}
	listed := numbers(t, securityRow, read("SECURITY.md"))
	if len(listed) != len(defined) || !sort.IntsAreSorted(listed) {
		t.Errorf("SECURITY.md's invariant table lists %v: want every one of DESIGN.md's I1…I%d once, in order", listed, len(defined))
	}
	for i := range listed {
		if i < len(defined) && listed[i] != defined[i] {
			t.Errorf("SECURITY.md's table row %d is I%d, want I%d", i+1, listed[i], defined[i])
		}
	}
	found := 0
	walkTracked(t, root, func(rel string, raw []byte) {
		if !strings.HasSuffix(rel, "_test.go") {
			return
		}
		for _, m := range invariantTest.FindAllStringSubmatch(string(raw), -1) {
			found++
			n, _ := strconv.Atoi(m[2])
			if n < 1 || n > len(defined) {
				t.Errorf("%s: %s names I%d, which DESIGN.md does not define", rel, m[1], n)
			}
		}
	})
	if found == 0 {
		t.Fatal("no TestI<n> found: the walk is broken")
	}
}

var (
	fuzzFunc    = regexp.MustCompile(`(?m)^func (Fuzz[A-Za-z0-9_]+)\(f \*testing\.F\)`)
	fuzzTargets = regexp.MustCompile(`(?m)^FUZZ_TARGETS := (.*)$`)
)

// TestFuzzTargetsInMake: every fuzz target of the repository is in the
// Makefile's FUZZ_TARGETS, so `make fuzz` runs them all (go test runs only
// their seed corpora).
func TestFuzzTargetsInMake(t *testing.T) {
	root := repoRoot(t)
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := fuzzTargets.FindSubmatch(mk)
	if m == nil {
		t.Fatal("Makefile has no FUZZ_TARGETS line")
	}
	listed := map[string]bool{}
	for _, f := range strings.Fields(string(m[1])) {
		listed[f] = true
	}
	var have []string
	walkTracked(t, root, func(rel string, raw []byte) {
		if !strings.HasSuffix(rel, "_test.go") || strings.HasPrefix(rel, "deploy/") {
			return
		}
		for _, fm := range fuzzFunc.FindAllStringSubmatch(string(raw), -1) {
			target := filepath.ToSlash(filepath.Dir(rel)) + ":" + fm[1]
			have = append(have, target)
			if !listed[target] {
				t.Errorf("%s is not in the Makefile's FUZZ_TARGETS", target)
			}
			delete(listed, target)
		}
	})
	for target := range listed {
		t.Errorf("FUZZ_TARGETS lists %s, which does not exist", target)
	}
	if len(have) == 0 {
		t.Fatal("no fuzz target found: the walk is broken")
	}
}

// measured matches a measured figure: a duration or a ratio to a bare run.
var measured = regexp.MustCompile(`[0-9](\.[0-9]+)? ?(ms|µs)\b|[0-9]\.[0-9]+×`)

// TestFiguresLiveInOnePlace: the README, the front door, carries no
// measured figure. Figures change with every run of `make bench`; they live
// in docs/PERFORMANCE.md, so the front door never disagrees with it.
func TestFiguresLiveInOnePlace(t *testing.T) {
	root := repoRoot(t)
	for _, rel := range []string{"README.md"} {
		raw, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range strings.Split(string(raw), "\n") {
			if m := measured.FindString(line); m != "" {
				t.Errorf("%s:%d has a measured figure (%q): put it in docs/PERFORMANCE.md and link there", rel, n+1, m)
			}
		}
	}
}
