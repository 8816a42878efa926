package envtree

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func tree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(root, "mpl"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "mpl", "matplotlibrc"), []byte("font.family: sans-serif\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "a.py"), []byte("x = 1\n"), 0o644))
	must(t, os.Symlink("a.py", filepath.Join(root, "b.py")))
	return root
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestSameContentSameDigest(t *testing.T) {
	a, b := tree(t), tree(t)
	ma, err := Build(a)
	must(t, err)
	mb, err := Build(b)
	must(t, err)
	if ma.Digest != mb.Digest {
		t.Fatalf("same content, digests %s and %s", ma.Digest, mb.Digest)
	}
	must(t, Quick(a, ma))
	must(t, Full(a, ma))
	if err := Quick(b, ma); !IsModified(err) {
		t.Fatalf("another copy (other inodes) passes Quick: %v", err)
	}
	must(t, Full(b, ma)) // same content
}

func TestModificationsDetected(t *testing.T) {
	cases := []struct {
		name   string
		change func(root string) error
	}{
		{"content same size", func(r string) error {
			return os.WriteFile(filepath.Join(r, "a.py"), []byte("x = 2\n"), 0o644)
		}},
		{"content, mtime put back", func(r string) error {
			p := filepath.Join(r, "a.py")
			st, _ := os.Stat(p)
			if err := os.WriteFile(p, []byte("x = 3\n"), 0o644); err != nil {
				return err
			}
			return os.Chtimes(p, st.ModTime(), st.ModTime())
		}},
		{"added", func(r string) error { return os.WriteFile(filepath.Join(r, "evil.pth"), []byte("import os"), 0o644) }},
		{"removed", func(r string) error { return os.Remove(filepath.Join(r, "mpl", "matplotlibrc")) }},
		{"mode", func(r string) error { return os.Chmod(filepath.Join(r, "a.py"), 0o666) }},
		{"symlink retargeted", func(r string) error {
			if err := os.Remove(filepath.Join(r, "b.py")); err != nil {
				return err
			}
			return os.Symlink("/etc/shadow", filepath.Join(r, "b.py"))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := tree(t)
			m, err := Build(root)
			must(t, err)
			time.Sleep(10 * time.Millisecond) // distinct ctime on coarse clocks
			must(t, tc.change(root))
			if err := Quick(root, m); !IsModified(err) {
				t.Errorf("Quick: %v, want a modification", err)
			}
			if err := Full(root, m); !IsModified(err) {
				t.Errorf("Full: %v, want a modification", err)
			}
		})
	}
}

func TestManifestRoundTripAndTamper(t *testing.T) {
	root := tree(t)
	m, err := Build(root)
	must(t, err)
	p := filepath.Join(t.TempDir(), "m.json")
	must(t, WriteManifest(p, m))
	back, err := ReadManifest(p)
	must(t, err)
	must(t, Quick(root, back))
	back.Entries[0].SHA256 = "00"
	if err := Quick(root, back); !IsModified(err) {
		t.Fatalf("a manifest whose entries do not hash to its digest passed: %v", err)
	}
}

func TestRefusesDevices(t *testing.T) {
	root := t.TempDir()
	must(t, os.Symlink("/dev/null", filepath.Join(root, "null"))) // a symlink is fine
	if _, err := Build(root); err != nil {
		t.Fatal(err)
	}
	if EmptyDigest != Digest([]Entry{}) {
		t.Fatal("empty digest unstable")
	}
}

// BenchmarkQuick is the per-launch cost of the helper's check.
func BenchmarkQuick(b *testing.B) {
	for _, n := range []int{4, 2000} {
		root := b.TempDir()
		for i := 0; i < n; i++ {
			if err := os.WriteFile(filepath.Join(root, "f"+strconv.Itoa(i)), []byte("x"), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		m, err := Build(root)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(strconv.Itoa(n)+"files", func(b *testing.B) {
			for range b.N {
				if err := Quick(root, m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
