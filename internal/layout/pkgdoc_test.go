package layout

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// repoRoot is the module root, two levels above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s: %v", root, err)
	}
	return root
}

// goDirs returns every directory of the main module holding .go files,
// relative to root, skipping testdata, hidden directories and nested
// modules (deploy/tools has its own go.mod).
func goDirs(t *testing.T, root string) []string {
	t.Helper()
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (name == "testdata" || strings.HasPrefix(name, ".") || name == "bin") {
				return filepath.SkipDir
			}
			if path != root {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") {
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			seen[rel] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	dirs := make([]string, 0, len(seen))
	for d := range seen {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	return dirs
}

// docFiles returns the files in dir whose package clause carries a doc
// comment; test files count only in a package that has no other files.
func docFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var src, tests []string
	for _, e := range entries {
		name := e.Name()
		switch {
		case e.IsDir() || !strings.HasSuffix(name, ".go"):
		case strings.HasSuffix(name, "_test.go"):
			tests = append(tests, name)
		default:
			src = append(src, name)
		}
	}
	if len(src) == 0 {
		src = tests
	}
	var withDoc []string
	fset := token.NewFileSet()
	for _, name := range src {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "" {
			withDoc = append(withDoc, name)
		}
	}
	return withDoc
}

// TestPackageDocs: every package says, in exactly one doc comment, what it
// owns and what it must never do. Two comments drift apart; none leaves a
// reader guessing where a change belongs.
func TestPackageDocs(t *testing.T) {
	root := repoRoot(t)
	dirs := goDirs(t, root)
	if len(dirs) < 10 {
		t.Fatalf("found only %d package directories under %s: the walk is broken", len(dirs), root)
	}
	for _, dir := range dirs {
		got := docFiles(t, filepath.Join(root, dir))
		switch len(got) {
		case 1:
		case 0:
			t.Errorf("%s: no package doc comment; add one (in doc.go or the main file) saying what the package owns and must never do", dir)
		default:
			t.Errorf("%s: %d package doc comments (%s); keep exactly one", dir, len(got), strings.Join(got, ", "))
		}
	}
}
