package layout

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// layoutTiers are the groups of docs/DESIGN.md's Layout, in their order.
var layoutTiers = []string{"Contract", "Supervisor", "Helper closure", "In the sandbox", "Tooling"}

// layoutMap reads docs/DESIGN.md's Layout section: each path it names (a
// nested line is below the line above it) and the tier it is listed under.
func layoutMap(t *testing.T, root string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "docs", "DESIGN.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n## Layout\n")
	if !ok {
		t.Fatal("docs/DESIGN.md has no Layout section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	paths := map[string]string{}
	tier, seen := "", 0
	type level struct {
		indent int
		path   string
	}
	var stack []level
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "**") {
			name, _, _ := strings.Cut(strings.TrimPrefix(line, "**"), "**")
			if seen >= len(layoutTiers) || name != layoutTiers[seen] {
				t.Fatalf("Layout: tier %q where %q was expected (tiers: %s, in that order)", name, layoutTiers[min(seen, len(layoutTiers)-1)], strings.Join(layoutTiers, ", "))
			}
			tier, seen, stack = name, seen+1, nil
			continue
		}
		indent := len(line) - len(strings.TrimLeft(line, " "))
		fields := strings.Fields(line)
		// A map line is indented 4 (a path from the root) or a little more
		// (a package below the line above); deeper lines continue a
		// description.
		if len(fields) == 0 || indent < 4 || indent >= 12 {
			continue
		}
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		p := strings.TrimSuffix(fields[0], "/")
		if len(stack) > 0 {
			p = stack[len(stack)-1].path + "/" + p
		}
		stack = append(stack, level{indent, p})
		if tier == "" {
			t.Fatalf("Layout: %s is listed before any tier", p)
		}
		paths[p] = tier
	}
	if seen != len(layoutTiers) {
		t.Fatalf("Layout: %d of the tiers %s", seen, strings.Join(layoutTiers, ", "))
	}
	return paths
}

// TestLayoutMapNamesEveryPackage: a newcomer reads the tiers from
// docs/DESIGN.md's Layout, so every package directory must be named there,
// under its tier, and every path it names must exist. The helper's tier is
// exactly what the helper links (the golden list of TestHelperDeps).
func TestLayoutMapNamesEveryPackage(t *testing.T) {
	root := repoRoot(t)
	listed := layoutMap(t, root)
	for _, dir := range goDirs(t, root) {
		if _, ok := listed[dir]; !ok {
			t.Errorf("package %s is not in docs/DESIGN.md's Layout; add it under its tier", dir)
		}
	}
	for p := range listed {
		if st, err := os.Stat(filepath.Join(root, p)); err != nil || !st.IsDir() {
			t.Errorf("docs/DESIGN.md's Layout names %s, which is not a directory here", p)
		}
	}
	golden, err := os.ReadFile(filepath.Join("testdata", "nsinit-deps.txt"))
	if err != nil {
		t.Fatal(err)
	}
	const module = "github.com/sandboxd/sandboxd/"
	linked := map[string]bool{}
	for _, line := range strings.Split(string(golden), "\n") {
		if p, ok := strings.CutPrefix(line, module); ok {
			linked[p] = true
			if listed[p] != "Helper closure" {
				t.Errorf("the helper links %s, which the Layout lists under %q, not the helper closure", p, listed[p])
			}
		}
	}
	for p, tier := range listed {
		if tier == "Helper closure" && !linked[p] {
			t.Errorf("the Layout lists %s in the helper closure, but the helper does not link it", p)
		}
	}
}
