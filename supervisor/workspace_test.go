package supervisor

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// wsRequireRoot skips a test that needs root, or fails it under CI=true,
// where a skipped privileged test would hide a gap.
func wsRequireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("this test needs root (euid %d) and CI=true forbids skipping it", os.Geteuid())
	}
	t.Skipf("needs root to run a process under another uid (euid %d)", os.Geteuid())
}

// emptyDir returns a fresh directory outside the workspace and checks, at
// the end of the test, that nothing was created in it.
func emptyDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	t.Cleanup(func() {
		entries, err := os.ReadDir(d)
		if err != nil {
			t.Errorf("outside dir: %v", err)
			return
		}
		if len(entries) != 0 {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Errorf("a write escaped the workspace into %s: %v", d, names)
		}
	})
	return d
}

// treeOf lists every path below dir with its type, for before/after checks.
func treeOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = d.Type().String()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestStageFilesNested(t *testing.T) {
	ws := t.TempDir()
	files := []StagedFile{
		{Path: "main.py", Content: []byte("print(1)\n")},
		{Path: "pkg/__init__.py", Content: nil},
		{Path: "pkg/sub/mod.py", Content: []byte("X = 2\n")},
		{Path: "./data/./in.csv", Content: []byte("a,b\n1,2\n")},
		{Path: "pkg/../other.txt", Content: []byte("cleaned inside")},
		{Path: "deep/a/b/c/d/e/f.bin", Content: bytes.Repeat([]byte{0xff}, 1<<16)},
	}
	n, err := StageFiles(ws, files)
	if err != nil {
		t.Fatalf("StageFiles: %v", err)
	}
	var want int64
	for _, f := range files {
		want += int64(len(f.Content))
	}
	if n != want {
		t.Fatalf("StageFiles wrote %d bytes, want %d", n, want)
	}
	for rel, content := range map[string][]byte{
		"main.py":              files[0].Content,
		"pkg/__init__.py":      {},
		"pkg/sub/mod.py":       files[2].Content,
		"data/in.csv":          files[3].Content,
		"other.txt":            files[4].Content,
		"deep/a/b/c/d/e/f.bin": files[5].Content,
	} {
		p := filepath.Join(ws, rel)
		got, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		if !bytes.Equal(got, content) {
			t.Errorf("%s holds %q, want %q", rel, got, content)
		}
		fi, _ := os.Lstat(p)
		if fi.Mode() != 0o600 {
			t.Errorf("%s has mode %v, want -rw-------", rel, fi.Mode())
		}
	}
	for _, d := range []string{"pkg", "pkg/sub", "data", "deep/a/b/c/d/e"} {
		fi, err := os.Lstat(filepath.Join(ws, d))
		if err != nil || !fi.IsDir() {
			t.Errorf("%s is not a directory: %v", d, err)
			continue
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %v: readable by others", d, fi.Mode())
		}
	}
	if _, err := os.Lstat(filepath.Join(ws, "pkg", "..", "pkg", "other.txt")); err == nil {
		t.Error("pkg/../other.txt was not cleaned")
	}
}

func TestStageFilesOverwritesAndTruncates(t *testing.T) {
	ws := t.TempDir()
	if _, err := StageFiles(ws, []StagedFile{{Path: "f.txt", Content: []byte("a long first version")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := StageFiles(ws, []StagedFile{{Path: "f.txt", Content: []byte("short")}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "f.txt")); string(got) != "short" {
		t.Fatalf("f.txt = %q, want %q", got, "short")
	}
}

func TestStageFilesNothingToDo(t *testing.T) {
	// No files: nothing is opened, not even a missing workspace.
	n, err := StageFiles(filepath.Join(t.TempDir(), "missing"), nil)
	if n != 0 || err != nil {
		t.Fatalf("StageFiles(nil) = %d, %v", n, err)
	}
	if _, err := StageFiles(filepath.Join(t.TempDir(), "missing"), []StagedFile{{Path: "a"}}); err == nil {
		t.Fatal("staging into a missing workspace succeeded")
	}
}

func TestStageFilesRefusesEscapes(t *testing.T) {
	tests := []struct {
		name       string
		path       string
		wantEscape bool // the error is ErrWorkspaceEscape itself
	}{
		{"absolute", "/etc/sandboxd-escape", true},
		{"absolute into outside", "", true}, // path filled in below
		{"empty", "", true},
		{"dot", ".", true},
		{"dot slash", "./", true},
		{"dotdot", "..", false},
		{"dotdot file", "../escape.txt", false},
		{"dotdot nested", "a/../../escape.txt", false},
		{"dotdot deep", "a/b/../../../escape.txt", false},
		{"dotdot into outside", "", false}, // path filled in below
		{"dotdot dir", "../escape-dir/x.txt", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			ws := filepath.Join(parent, "ws")
			if err := os.Mkdir(ws, 0o700); err != nil {
				t.Fatal(err)
			}
			outside := emptyDir(t)
			p := tc.path
			switch tc.name {
			case "absolute into outside":
				p = filepath.Join(outside, "x.txt")
			case "dotdot into outside":
				rel, err := filepath.Rel(ws, filepath.Join(outside, "x.txt"))
				if err != nil {
					t.Fatal(err)
				}
				p = rel
			}
			n, err := StageFiles(ws, []StagedFile{{Path: p, Content: []byte("escaped")}})
			if err == nil {
				t.Fatalf("StageFiles(%q) succeeded", p)
			}
			if n != 0 {
				t.Fatalf("StageFiles(%q) reports %d bytes written", p, n)
			}
			if tc.wantEscape && !errors.Is(err, ErrWorkspaceEscape) {
				t.Fatalf("err = %v, want ErrWorkspaceEscape", err)
			}
			// Nothing was written anywhere: not in the workspace, not beside it.
			if tree := treeOf(t, parent); len(tree) != 2 { // "." and "ws"
				t.Fatalf("files appeared: %v", tree)
			}
			if _, err := os.Lstat("/etc/sandboxd-escape"); err == nil {
				t.Fatal("/etc/sandboxd-escape was created")
			}
		})
	}
}

func TestStageFilesRefusesPlantedSymlinks(t *testing.T) {
	tests := []struct {
		name string
		// plant creates symlinks in ws pointing into outside (an existing
		// directory holding outside/victim.txt) and returns the staged path.
		plant func(t *testing.T, ws, outside string) string
	}{
		{"dir symlink, file below it", func(t *testing.T, ws, outside string) string {
			mustSymlink(t, outside, filepath.Join(ws, "link"))
			return "link/x"
		}},
		{"dir symlink, nested dirs below it", func(t *testing.T, ws, outside string) string {
			mustSymlink(t, outside, filepath.Join(ws, "link"))
			return "link/new/dir/x"
		}},
		{"relative dir symlink", func(t *testing.T, ws, outside string) string {
			rel, err := filepath.Rel(ws, outside)
			if err != nil {
				t.Fatal(err)
			}
			mustSymlink(t, rel, filepath.Join(ws, "rel"))
			return "rel/x"
		}},
		{"symlink deeper in the tree", func(t *testing.T, ws, outside string) string {
			if err := os.MkdirAll(filepath.Join(ws, "a", "b"), 0o700); err != nil {
				t.Fatal(err)
			}
			mustSymlink(t, outside, filepath.Join(ws, "a", "b", "c"))
			return "a/b/c/x"
		}},
		{"symlink to root", func(t *testing.T, ws, outside string) string {
			mustSymlink(t, "/", filepath.Join(ws, "root"))
			return "root/" + strings.TrimPrefix(outside, "/") + "/x"
		}},
		{"file symlink to an outside file", func(t *testing.T, ws, outside string) string {
			mustSymlink(t, filepath.Join(outside, "victim.txt"), filepath.Join(ws, "main.py"))
			return "main.py"
		}},
		{"file symlink to a new outside file", func(t *testing.T, ws, outside string) string {
			mustSymlink(t, filepath.Join(outside, "new.txt"), filepath.Join(ws, "main.py"))
			return "main.py"
		}},
		{"chain of symlinks", func(t *testing.T, ws, outside string) string {
			mustSymlink(t, outside, filepath.Join(ws, "hop2"))
			mustSymlink(t, "hop2", filepath.Join(ws, "hop1"))
			return "hop1/x"
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			outside := t.TempDir()
			victim := filepath.Join(outside, "victim.txt")
			if err := os.WriteFile(victim, []byte("original"), 0o600); err != nil {
				t.Fatal(err)
			}
			before := treeOf(t, outside)
			p := tc.plant(t, ws, outside)

			_, err := StageFiles(ws, []StagedFile{{Path: p, Content: []byte("escaped")}})
			if err == nil {
				t.Fatalf("StageFiles(%q) through a planted symlink succeeded", p)
			}
			if after := treeOf(t, outside); len(after) != len(before) {
				t.Fatalf("outside dir changed: before %v, after %v", before, after)
			}
			if got, _ := os.ReadFile(victim); string(got) != "original" {
				t.Fatalf("outside file rewritten to %q", got)
			}
		})
	}
}

// The brief's case exactly: ws/link -> a directory outside; staging
// "link/x" must leave that directory empty.
func TestStageFilesPlantedSymlinkLeavesOutsideEmpty(t *testing.T) {
	ws := t.TempDir()
	outside, err := os.MkdirTemp("/tmp", "sandboxd-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	mustSymlink(t, outside, filepath.Join(ws, "link"))
	if _, err := StageFiles(ws, []StagedFile{{Path: "link/x", Content: []byte("x")}}); err == nil {
		t.Fatal("staging link/x succeeded")
	}
	entries, err := os.ReadDir(outside)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("%s is not empty: %v", outside, entries)
	}
}

func TestStageFilesStopsAtFirstError(t *testing.T) {
	ws := t.TempDir()
	n, err := StageFiles(ws, []StagedFile{
		{Path: "ok.txt", Content: []byte("12345")},
		{Path: "../bad.txt", Content: []byte("x")},
		{Path: "never.txt", Content: []byte("y")},
	})
	if err == nil {
		t.Fatal("no error")
	}
	if n != 5 {
		t.Fatalf("reported %d bytes, want the 5 written before the error", n)
	}
	if _, err := os.Lstat(filepath.Join(ws, "never.txt")); err == nil {
		t.Fatal("files after the failing one were written")
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// lockedTree builds, under ws, what a payload may leave behind: directories
// without write or search permission, read-only files, and symlinks to
// directories outside (whose target must survive).
func lockedTree(t *testing.T, ws, outside string) {
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

func checkOutsideIntact(t *testing.T, outside string) {
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
	if err := RemoveWorkspace(ws); err != nil {
		t.Fatalf("RemoveWorkspace: %v", err)
	}
	if _, err := os.Lstat(ws); !os.IsNotExist(err) {
		t.Fatalf("workspace still there: %v", err)
	}
	checkOutsideIntact(t, outside)
}

func TestRemoveWorkspaceMissingAndEmpty(t *testing.T) {
	if err := RemoveWorkspace(filepath.Join(t.TempDir(), "never-created")); err != nil {
		t.Fatalf("missing workspace: %v", err)
	}
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o000); err != nil {
		t.Fatal(err)
	}
	if err := RemoveWorkspace(ws); err != nil {
		t.Fatalf("empty 0000 workspace: %v", err)
	}
}

// A workspace path that is itself a symlink: the link goes, the target stays.
func TestRemoveWorkspaceThatIsASymlink(t *testing.T) {
	parent := t.TempDir()
	outside := outsideDir(t, parent)
	ws := filepath.Join(parent, "ws")
	mustSymlink(t, outside, ws)
	if err := RemoveWorkspace(ws); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(ws); !os.IsNotExist(err) {
		t.Fatalf("link still there: %v", err)
	}
	checkOutsideIntact(t, outside)
}

const rmwsHelperEnv = "SANDBOXD_TEST_REMOVE_WORKSPACE"

// TestRemoveWorkspaceHelper is not a test: it is the unprivileged half of
// TestRemoveWorkspaceUnprivileged, run in a child process as another uid,
// where permission bits apply (root ignores them). It builds the locked
// tree and removes it.
func TestRemoveWorkspaceHelper(t *testing.T) {
	parent := os.Getenv(rmwsHelperEnv)
	if parent == "" {
		t.Skip("helper process only")
	}
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
	if err := RemoveWorkspace(ws); err != nil {
		t.Fatalf("RemoveWorkspace: %v", err)
	}
	if _, err := os.Lstat(ws); !os.IsNotExist(err) {
		t.Fatalf("workspace still there: %v", err)
	}
	checkOutsideIntact(t, outside)
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
			if err := RemoveWorkspace(ws); err != nil {
				t.Fatalf("RemoveWorkspace: %v", err)
			}
			checkOutsideIntact(t, outside)
		})
		return
	}
	wsRequireRoot(t)
	const nobody = 65534
	top, err := os.MkdirTemp("/tmp", "sandboxd-rmws-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	if err := os.Chmod(top, 0o755); err != nil {
		t.Fatal(err)
	}
	// The test binary's own directory is private to root; run a copy.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(top, "rmws.test")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
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
	cmd := exec.CommandContext(ctx, bin, "-test.run=^TestRemoveWorkspaceHelper$", "-test.count=1", "-test.v")
	cmd.Env = []string{rmwsHelperEnv + "=" + parent, "PATH=/usr/bin:/bin", "HOME=/"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper as uid %d: %v\n%s", nobody, err, out)
	}
	if !strings.Contains(string(out), "--- PASS: TestRemoveWorkspaceHelper") {
		t.Fatalf("helper did not run:\n%s", out)
	}
	checkOutsideIntact(t, outside)
	if _, err := os.Lstat(filepath.Join(parent, "ws")); !os.IsNotExist(err) {
		t.Fatalf("workspace still there: %v", err)
	}
}

// Regression: a FIFO planted in a (session) workspace must not hang staging.
func TestStageFilesPlantedFIFO(t *testing.T) {
	ws := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(ws, "main.py"), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := StageFiles(ws, []StagedFile{{Path: "main.py", Content: []byte("x")}})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("staging over a FIFO succeeded")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("StageFiles blocked for 2 s opening a FIFO planted in the workspace")
	}
}
