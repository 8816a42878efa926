package supervisor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/internal/testutil"
	"github.com/sandboxd/sandboxd/launch"
)

func mustSymlink(t fataler, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// lockedTree builds, under ws, what a payload may leave behind: directories
// without write or search permission, read-only files, and symlinks to
// directories outside (whose target must survive).
func lockedTree(t fataler, ws, outside string) {
	t.Helper()
	mk := func(p string) {
		if err := os.MkdirAll(filepath.Join(ws, p), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(ws, p), []byte("data"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(ws, p), mode); err != nil {
			t.Fatal(err)
		}
	}
	mk("locked/inner/deeper")
	mk("readonly/sub")
	mk("noexec")
	write("locked/f", 0o400)
	write("locked/inner/f", 0o000)
	write("locked/inner/deeper/f", 0o444)
	write("readonly/f", 0o400)
	write("readonly/sub/f", 0o000)
	write("noexec/f", 0o200)
	write("top-readonly", 0o400)
	mustSymlink(t, outside, filepath.Join(ws, "out-link"))
	mustSymlink(t, outside, filepath.Join(ws, "locked", "inner", "out-link"))
	mustSymlink(t, filepath.Join(outside, "keep.txt"), filepath.Join(ws, "readonly", "file-link"))
	// In a readable but unwritable directory, a walk sees these links while
	// they still exist: a chmod that followed them would reach outside.
	mustSymlink(t, outside, filepath.Join(ws, "readonly", "out-link"))
	mustSymlink(t, outside, filepath.Join(ws, "readonly", "sub", "out-link"))
	mustSymlink(t, "/nonexistent/target", filepath.Join(ws, "dangling"))
	// Lock from the leaves up.
	for _, c := range []struct {
		p    string
		mode os.FileMode
	}{
		{"locked/inner/deeper", 0o000},
		{"locked/inner", 0o000},
		{"locked", 0o000},
		{"readonly/sub", 0o500},
		{"readonly", 0o500},
		{"noexec", 0o600},
	} {
		if err := os.Chmod(filepath.Join(ws, c.p), c.mode); err != nil {
			t.Fatal(err)
		}
	}
}

// outsideDir makes a directory the workspace links to, read-only to catch a
// chmod that follows a symlink, with one file that must survive.
func outsideDir(t *testing.T, parent string) string {
	t.Helper()
	d := filepath.Join(parent, "outside")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "keep.txt"), []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(d, 0o700) })
	return d
}

func checkOutsideIntact(t fataler, outside string) {
	t.Helper()
	fi, err := os.Lstat(outside)
	if err != nil {
		t.Fatalf("outside target removed: %v", err)
	}
	if fi.Mode().Perm() != 0o555 {
		t.Errorf("outside target's mode changed to %v: a chmod followed a symlink", fi.Mode())
	}
	if b, err := os.ReadFile(filepath.Join(outside, "keep.txt")); err != nil || string(b) != "keep" {
		t.Errorf("outside file lost: %q, %v", b, err)
	}
}

func TestRemoveWorkspace(t *testing.T) {
	parent := t.TempDir()
	outside := outsideDir(t, parent)
	ws := filepath.Join(parent, "ws")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	lockedTree(t, ws, outside)
	if err := launch.RemoveWorkspace(ws); err != nil {
		t.Fatalf("RemoveWorkspace: %v", err)
	}
	if _, err := os.Lstat(ws); !os.IsNotExist(err) {
		t.Fatalf("workspace still there: %v", err)
	}
	checkOutsideIntact(t, outside)
}

func TestRemoveWorkspaceMissingAndEmpty(t *testing.T) {
	if err := launch.RemoveWorkspace(filepath.Join(t.TempDir(), "never-created")); err != nil {
		t.Fatalf("missing workspace: %v", err)
	}
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o000); err != nil {
		t.Fatal(err)
	}
	if err := launch.RemoveWorkspace(ws); err != nil {
		t.Fatalf("empty 0000 workspace: %v", err)
	}
}

// A workspace path that is itself a symlink: the link goes, the target stays.
func TestRemoveWorkspaceThatIsASymlink(t *testing.T) {
	parent := t.TempDir()
	outside := outsideDir(t, parent)
	ws := filepath.Join(parent, "ws")
	mustSymlink(t, outside, ws)
	if err := launch.RemoveWorkspace(ws); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(ws); !os.IsNotExist(err) {
		t.Fatalf("link still there: %v", err)
	}
	checkOutsideIntact(t, outside)
}

const rmwsHelperEnv = "SANDBOXD_TEST_REMOVE_WORKSPACE"

// fataler is what the tree helpers need of a test; the child process of
// TestRemoveWorkspaceUnprivileged provides it without a testing.T.
type fataler interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
}

// childT fails the child process on the first error.
type childT struct{}

func (childT) Helper()                           {}
func (childT) Fatal(args ...any)                 { fmt.Println(args...); os.Exit(1) }
func (childT) Fatalf(format string, args ...any) { fmt.Printf(format+"\n", args...); os.Exit(1) }
func (childT) Errorf(format string, args ...any) { fmt.Printf(format+"\n", args...); os.Exit(1) }

// removeWorkspaceChild is the unprivileged half of
// TestRemoveWorkspaceUnprivileged, run by TestMain in a child process as
// another uid, where permission bits apply (root ignores them). It builds
// the locked tree and removes it, and prints HELPER-OK.
func removeWorkspaceChild(parent string) {
	t := childT{}
	if os.Geteuid() == 0 {
		t.Fatal("helper runs as root: permission bits would be ignored")
	}
	outside := filepath.Join(parent, "outside")
	ws := filepath.Join(parent, "ws")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	lockedTree(t, ws, outside)
	// Root-less os.RemoveAll alone fails on this tree: that is the point.
	if err := os.RemoveAll(ws); err == nil {
		t.Fatal("os.RemoveAll removed the locked tree; the test proves nothing")
	}
	if err := launch.RemoveWorkspace(ws); err != nil {
		t.Fatalf("RemoveWorkspace: %v", err)
	}
	if _, err := os.Lstat(ws); !os.IsNotExist(err) {
		t.Fatalf("workspace still there: %v", err)
	}
	checkOutsideIntact(t, outside)
	fmt.Println("HELPER-OK")
}

func TestRemoveWorkspaceUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		// Already unprivileged: permission bits apply to this process.
		t.Run("in process", func(t *testing.T) {
			parent := t.TempDir()
			outside := outsideDir(t, parent)
			ws := filepath.Join(parent, "ws")
			if err := os.Mkdir(ws, 0o700); err != nil {
				t.Fatal(err)
			}
			lockedTree(t, ws, outside)
			if err := launch.RemoveWorkspace(ws); err != nil {
				t.Fatalf("RemoveWorkspace: %v", err)
			}
			checkOutsideIntact(t, outside)
		})
		return
	}
	testutil.RequireRoot(t, "run a process under another uid")
	const nobody = 65534
	top, bin := selfCopy(t, "sandboxd-rmws-")
	parent := filepath.Join(top, "parent")
	if err := os.Mkdir(parent, 0o700); err != nil {
		t.Fatal(err)
	}
	outside := outsideDir(t, parent)
	for _, p := range []string{parent, outside, filepath.Join(outside, "keep.txt")} {
		if err := os.Lchown(p, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = []string{rmwsHelperEnv + "=" + parent, "PATH=/usr/bin:/bin", "HOME=/"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper as uid %d: %v\n%s", nobody, err, out)
	}
	if !strings.Contains(string(out), "HELPER-OK") {
		t.Fatalf("helper did not run:\n%s", out)
	}
	checkOutsideIntact(t, outside)
	if _, err := os.Lstat(filepath.Join(parent, "ws")); !os.IsNotExist(err) {
		t.Fatalf("workspace still there: %v", err)
	}
}
