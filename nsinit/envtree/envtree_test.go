package envtree

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/internal/testutil"
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

// TestRefusesNonRootEntries: an inner entry owned by another uid, writable
// by group or others, or setuid/setgid is refused by Build (registration)
// and by Quick (every launch) -- Quick even against a manifest that
// records the entry as it is (one registered before the check existed).
func TestRefusesNonRootEntries(t *testing.T) {
	testutil.RequireRoot(t, "chown tree entries to another uid")
	for _, tc := range []struct {
		name   string
		tamper func(root string) error
		entry  string
	}{
		{"file of another uid", func(r string) error { return os.Lchown(filepath.Join(r, "a.py"), 65534, 65534) }, "a.py"},
		{"directory of another uid", func(r string) error { return os.Lchown(filepath.Join(r, "mpl"), 65534, 0) }, "mpl"},
		{"symlink of another uid", func(r string) error { return os.Lchown(filepath.Join(r, "b.py"), 65534, 0) }, "b.py"},
		{"directory mode 0777", func(r string) error { return os.Chmod(filepath.Join(r, "mpl"), 0o777) }, "mpl"},
		{"group-writable file", func(r string) error { return os.Chmod(filepath.Join(r, "mpl", "matplotlibrc"), 0o664) }, "mpl/matplotlibrc"},
		{"root group-writable", func(r string) error { return os.Chmod(r, 0o775) }, "."},
		{"setuid file", func(r string) error { return syscall.Chmod(filepath.Join(r, "a.py"), 0o4755) }, "a.py"},
		{"setgid directory", func(r string) error { return syscall.Chmod(filepath.Join(r, "mpl"), 0o2755) }, "mpl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := tree(t)
			must(t, os.Chmod(root, 0o755))
			must(t, tc.tamper(root))
			if _, err := Build(root); !errors.Is(err, ErrNotRootOnly) || !strings.Contains(err.Error(), tc.entry+" ") {
				t.Fatalf("Build: %v, want ErrNotRootOnly naming %s", err, tc.entry)
			}
			m := recordAsIs(t, root)
			if err := Quick(root, m); !errors.Is(err, ErrNotRootOnly) || !strings.Contains(err.Error(), tc.entry+" ") {
				t.Fatalf("Quick: %v, want ErrNotRootOnly naming %s", err, tc.entry)
			}
			if err := Full(root, m); !errors.Is(err, ErrNotRootOnly) {
				t.Fatalf("Full: %v, want ErrNotRootOnly", err)
			}
		})
	}
}

// recordAsIs is the manifest an unchecked registration would have written
// for root as it is now.
func recordAsIs(t *testing.T, root string) *Manifest {
	t.Helper()
	var entries []Entry
	must(t, walk(root, func(rel string, st *syscall.Stat_t, abs string) error {
		e, err := entryOf(rel, abs, st, true)
		entries = append(entries, e)
		return err
	}))
	return &Manifest{Version: ManifestVersion, Digest: Digest(entries), Entries: entries}
}
