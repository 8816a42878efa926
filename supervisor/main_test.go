package supervisor

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain runs the child halves of tests that need a second process with
// other credentials, chosen by environment variable, before any test: so
// they are never listed (or skipped) as tests themselves.
func TestMain(m *testing.M) {
	if sock := os.Getenv(peerHelperEnv); sock != "" {
		peerChild(sock)
		os.Exit(0)
	}
	if parent := os.Getenv(rmwsHelperEnv); parent != "" {
		removeWorkspaceChild(parent)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// selfCopy copies the running test binary into a fresh 0755 directory under
// /tmp and returns the directory and the copy. The binary's own directory is
// private to root, so a child run under another uid needs a copy it can reach.
func selfCopy(t *testing.T, prefix string) (dir, bin string) {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(dir, "child.test")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, bin
}
