package secretfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/errdefs"
)

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	if err := os.WriteFile(good, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Open(good, "test file", os.Getuid())
	if err != nil {
		t.Fatalf("a 0600 file of ours: %v", err)
	}
	f.Close()
	for _, mode := range []os.FileMode{0o400} {
		os.Chmod(good, mode)
		if f, err := Open(good, "test file", os.Getuid()); err != nil {
			t.Errorf("mode %04o: %v", mode, err)
		} else {
			f.Close()
		}
	}
	link := filepath.Join(dir, "link")
	os.Symlink(good, link)
	for _, tc := range []struct {
		name string
		prep func() string
		uid  int
		want string
	}{
		{"group readable", func() string { os.Chmod(good, 0o640); return good }, os.Getuid(), "has mode 0640"},
		{"other readable", func() string { os.Chmod(good, 0o604); return good }, os.Getuid(), "has mode 0604"},
		{"someone else's", func() string { os.Chmod(good, 0o600); return good }, os.Getuid() + 1, "owned by uid"},
		{"symlink", func() string { return link }, os.Getuid(), "test file"},
		{"directory", func() string { return dir }, os.Getuid(), "not a regular file"},
		{"missing", func() string { return filepath.Join(dir, "none") }, os.Getuid(), "no such file"},
	} {
		p := tc.prep()
		if tc.name == "someone else's" && os.Getuid() == 0 {
			// Root owns the file: root is always accepted. Make it
			// another uid's instead.
			os.Chown(good, 4242, 4242)
		}
		_, err := Open(p, "test file", tc.uid)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
		if err != nil && tc.name != "missing" && !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("%s: %v is not ErrInvalid", tc.name, err)
		}
	}
}
