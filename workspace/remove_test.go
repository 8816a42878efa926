package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRemove: locked directories (mode 0), symlinks to a directory outside
// (its mode and content untouched), a deep chain, and a workspace that is
// itself a symlink (the link goes, the target stays) or does not exist.
func TestRemove(t *testing.T) {
	parent := t.TempDir()
	outside := filepath.Join(parent, "outside")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(outside, 0o755))
	must(os.WriteFile(filepath.Join(outside, "keep.txt"), []byte("keep"), 0o644))
	must(os.Chmod(outside, 0o555))
	t.Cleanup(func() { _ = os.Chmod(outside, 0o755) })

	ws := filepath.Join(parent, "ws")
	deep := filepath.Join(ws, strings.Repeat("d/", 64))
	must(os.MkdirAll(deep, 0o755))
	must(os.WriteFile(filepath.Join(deep, "f"), []byte("x"), 0o644))
	must(os.Symlink(outside, filepath.Join(ws, "d", "out")))
	must(os.MkdirAll(filepath.Join(ws, "locked", "inner"), 0o755))
	must(os.WriteFile(filepath.Join(ws, "locked", "inner", "f"), nil, 0o644))
	must(os.Chmod(filepath.Join(ws, "locked", "inner"), 0))
	must(os.Chmod(filepath.Join(ws, "locked"), 0))
	must(os.Chmod(ws, 0o500))

	must(Remove(ws))
	if _, err := os.Lstat(ws); !os.IsNotExist(err) {
		t.Fatalf("workspace still there: %v", err)
	}
	if st, err := os.Stat(outside); err != nil || st.Mode().Perm() != 0o555 {
		t.Fatalf("outside directory changed: %v %v", st, err)
	}
	if b, err := os.ReadFile(filepath.Join(outside, "keep.txt")); err != nil || string(b) != "keep" {
		t.Fatalf("outside file lost: %q %v", b, err)
	}

	link := filepath.Join(parent, "link")
	must(os.Symlink(outside, link))
	must(Remove(link))
	if _, err := os.Lstat(link); !os.IsNotExist(err) {
		t.Fatalf("link still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "keep.txt")); err != nil {
		t.Fatalf("the link's target lost a file: %v", err)
	}
	must(Remove(filepath.Join(parent, "never-created")))
	must(Remove(filepath.Join(parent, "no-parent", "ws")))
}
