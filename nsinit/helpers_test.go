package nsinit

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
)

// chownExec changes the owner of path (not following a symlink) through the
// chown(1) program.
func chownExec(t *testing.T, path string, uid, gid int) {
	t.Helper()
	out, err := exec.Command("chown", "-h", strconv.Itoa(uid)+":"+strconv.Itoa(gid), path).CombinedOutput()
	if err != nil {
		t.Fatalf("chown %d:%d %s: %v: %s", uid, gid, path, err, out)
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	if int(st.Uid) != uid || int(st.Gid) != gid {
		t.Fatalf("chown %s: owner is %d:%d, want %d:%d", path, st.Uid, st.Gid, uid, gid)
	}
}

// rootDir makes a fresh 0755 directory directly under /tmp (root-owned and
// sticky on Debian), whatever TMPDIR says, so that CheckRootOwned can pass
// on every directory above it.
func rootDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "sandboxd-nsinit-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}
