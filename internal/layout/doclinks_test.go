package layout

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// mdLink matches an inline Markdown link's target: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocsStandAlone: a clone of the repository is all a reader has. Every
// relative link in a Markdown file must name a file inside the repository
// that exists, and no document may point outside it.
func TestDocsStandAlone(t *testing.T) {
	root := repoRoot(t)
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "bin" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".md") {
			return nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if strings.Contains(string(raw), outsideSpecDir) {
			t.Errorf("%s cites %s, which a clone does not have", rel, outsideSpecDir)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(raw), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			abs := filepath.Join(filepath.Dir(path), target)
			if r, err := filepath.Rel(root, abs); err != nil || strings.HasPrefix(r, "..") {
				t.Errorf("%s links %s, outside the repository", rel, m[1])
				continue
			}
			if _, err := os.Stat(abs); err != nil {
				t.Errorf("%s links %s, which does not exist", rel, m[1])
			}
			checked++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no relative link checked: the walk is broken")
	}
}

// outsideSpecDir is the sibling directory of the checkout where the
// project's working notes once lived. It is spelled in two pieces so that
// this test, which forbids citing it, does not itself cite it.
var outsideSpecDir = ".." + "/shared/"
