package workspace

import (
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

func writeArchive(t *testing.T, path string, size int, age time.Duration, now time.Time) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, make([]byte, size), 0o600); err != nil {
		t.Fatal(err)
	}
	when := now.Add(-age)
	if err := os.Chtimes(path, when, when); err != nil {
		t.Fatal(err)
	}
}

func names(root string, rs []RemovedArchive) []string {
	var out []string
	for _, r := range rs {
		rel, _ := filepath.Rel(root, r.Path)
		out = append(out, rel)
	}
	sort.Strings(out)
	return out
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

// TestExpireArchives: archives older than the retention go, in the root
// and in every per-caller directory; newer ones, other files and symlinks
// stay.
func TestExpireArchives(t *testing.T) {
	now := time.Now()
	root := t.TempDir()
	day := 24 * time.Hour
	writeArchive(t, filepath.Join(root, "legacy-old.tar"), 10, 40*day, now)
	writeArchive(t, filepath.Join(root, "legacy-new.tar"), 10, day, now)
	writeArchive(t, filepath.Join(root, "u1000", "old.tar"), 10, 31*day, now)
	writeArchive(t, filepath.Join(root, "u1000", "crash.tar.tmp"), 10, 31*day, now)
	writeArchive(t, filepath.Join(root, "u1000", "new.tar"), 10, 29*day, now)
	writeArchive(t, filepath.Join(root, "notes.txt"), 10, 400*day, now)
	writeArchive(t, filepath.Join(root, "other", "old.tar"), 10, 400*day, now) // not a caller dir
	target := filepath.Join(t.TempDir(), "victim.tar")
	writeArchive(t, target, 10, 400*day, now)
	if err := os.Symlink(target, filepath.Join(root, "link.tar")); err != nil {
		t.Fatal(err)
	}

	removed, err := ExpireArchives(root, 30*day, now)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"legacy-old.tar", "u1000/crash.tar.tmp", "u1000/old.tar"}
	if got := names(root, removed); len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("removed %v; want %v", got, want)
	}
	for _, keep := range []string{"legacy-new.tar", "u1000/new.tar", "notes.txt", "other/old.tar", "link.tar"} {
		if !exists(filepath.Join(root, keep)) {
			t.Errorf("%s was removed", keep)
		}
	}
	if !exists(target) {
		t.Error("a symlink's target was removed")
	}
	if removed, _ := ExpireArchives(root, 0, now); len(removed) != 0 {
		t.Errorf("retention 0 removed %d archives", len(removed))
	}
}

// TestTrimArchives: a caller's archives stay within its budget, oldest
// removed first; one archive larger than the whole budget is not kept.
func TestTrimArchives(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name    string
		sizes   map[string]int // name -> size; age is its index order below
		order   []string       // oldest first
		budget  int64
		removed []string
	}{
		{"within budget", map[string]int{"a.tar": 10, "b.tar": 10}, []string{"a.tar", "b.tar"}, 20, nil},
		{"oldest first", map[string]int{"a.tar": 10, "b.tar": 10, "c.tar": 10}, []string{"a.tar", "b.tar", "c.tar"}, 20, []string{"a.tar"}},
		{"as many as needed", map[string]int{"a.tar": 5, "b.tar": 5, "c.tar": 25}, []string{"a.tar", "b.tar", "c.tar"}, 29, []string{"a.tar", "b.tar"}},
		{"one over the whole budget", map[string]int{"a.tar": 5, "big.tar": 50}, []string{"a.tar", "big.tar"}, 30, []string{"a.tar", "big.tar"}},
		{"temporary files are not counted", map[string]int{"a.tar": 10, "w.tar.tmp": 100}, []string{"w.tar.tmp", "a.tar"}, 10, nil},
		{"no budget", map[string]int{"a.tar": 10, "b.tar": 10}, []string{"a.tar", "b.tar"}, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for i, n := range tc.order {
				writeArchive(t, filepath.Join(dir, n), tc.sizes[n], time.Duration(len(tc.order)-i)*time.Hour, now)
			}
			removed, err := TrimArchives(dir, tc.budget)
			if err != nil {
				t.Fatal(err)
			}
			got := names(dir, removed)
			if len(got) != len(tc.removed) {
				t.Fatalf("removed %v; want %v", got, tc.removed)
			}
			for i := range got {
				if got[i] != tc.removed[i] {
					t.Fatalf("removed %v; want %v", got, tc.removed)
				}
			}
		})
	}
}
