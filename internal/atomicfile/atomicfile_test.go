package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestWriteFile(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	for _, content := range []string{"first", "second, longer", ""} {
		if err := WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Fatalf("read back %q, %v; want %q", got, err, content)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644 whatever the umask", fi.Mode().Perm())
	}
	if _, err := os.Lstat(path + TempSuffix); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the temporary file survived: %v", err)
	}
}

// A symlink planted at the temporary name is replaced, never written
// through (the old bpfcache code followed it with os.WriteFile).
func TestPlantedSymlinkIsNotFollowed(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "f")
	if err := os.Symlink(victim, path+TempSuffix); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(victim); string(got) != "keep" {
		t.Errorf("the symlink's target was written: %q", got)
	}
	if got, _ := os.ReadFile(path); string(got) != "new" {
		t.Errorf("path holds %q", got)
	}
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&fs.ModeSymlink != 0 {
		t.Errorf("path is a symlink or missing: %v", err)
	}
}

// A stale temporary file (a crash mid-write, or a hard link to a file
// someone else cares about) is unlinked, not truncated.
func TestStaleTempIsReplacedNotTruncated(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	other := filepath.Join(dir, "other")
	if err := os.WriteFile(other, []byte("other's data"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(other, path+TempSuffix); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(other); string(got) != "other's data" {
		t.Errorf("a hard link at the temporary name was written through: %q", got)
	}
}

// A failing fill leaves the old file and no temporary file, and its error
// comes back unchanged.
func TestFillErrorKeepsOldContent(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	errBoom := errors.New("boom")
	err := Write(path, 0o600, func(f *os.File) error {
		_, _ = f.WriteString("partial")
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("err = %v, want errBoom", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "old" {
		t.Errorf("path holds %q after a failed write", got)
	}
	if _, err := os.Lstat(path + TempSuffix); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the temporary file survived a failed write: %v", err)
	}
}

func TestMissingDirectory(t *testing.T) {
	err := WriteFile(filepath.Join(t.TempDir(), "no", "f"), nil, 0o600)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("err = %v, want ErrNotExist", err)
	}
}
