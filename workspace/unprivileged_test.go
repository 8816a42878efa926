package workspace

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/internal/testutil"
)

// The hostile-payload tests run as an unprivileged uid. As root the kernel
// bypasses every permission check (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH,
// CAP_FOWNER), so a trap built from permissions — a directory of mode 000,
// a file the supervisor may not read — would never fire, and a test could
// pass while the supervisor's real, unprivileged behaviour is broken. The
// supervisor never runs as root (it refuses to), so neither do these tests.

const (
	// envUnprivileged marks the child test binary that unprivileged
	// started.
	envUnprivileged = "WORKSPACE_TEST_UNPRIVILEGED"
	// envDevNode names a character device node (/dev/zero's numbers) that
	// the root parent made and gave to unprivUID: the child cannot mknod,
	// but it may hard-link a node it owns into a workspace.
	envDevNode = "WORKSPACE_TEST_DEVNODE"
	// unprivUID is nobody, which exists on every Debian system.
	unprivUID = 65534
)

// unprivileged reports whether the calling test's body should run in this
// process. Run by a non-root user (or in the child), it returns true. Run
// as root, it runs the same top-level test again in a copy of this test
// binary as uid and gid 65534 with no supplementary groups, fails the test
// if that run fails or did not run it, and returns false: the body never
// runs as root. Call it first, from a top-level test.
func unprivileged(t *testing.T) bool {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv(envUnprivileged) != "" && os.Geteuid() != unprivUID {
			t.Fatalf("child runs as uid %d, want %d", os.Geteuid(), unprivUID)
		}
		return true
	}
	c := prepareChild(t)
	cmd := exec.Command(c.bin, "-test.run", "^"+regexp.QuoteMeta(t.Name())+"$", "-test.count=1", "-test.v")
	cmd.Env = []string{envUnprivileged + "=1", envDevNode + "=" + c.dev, "TMPDIR=" + c.tmp,
		"PATH=/usr/bin:/bin", "CI=" + os.Getenv("CI")}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: unprivUID, Gid: unprivUID, Groups: []uint32{}}}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		t.Fatalf("%s as uid %d: %v\n%s", t.Name(), unprivUID, err, out.String())
	}
	if !strings.Contains(out.String(), "--- PASS: "+t.Name()+" ") {
		t.Fatalf("%s as uid %d did not pass (ran nothing?):\n%s", t.Name(), unprivUID, out.String())
	}
	if testing.Verbose() {
		t.Logf("ran as uid %d:\n%s", unprivUID, out.String())
	} else {
		t.Logf("ran as uid %d: %d subtests passed", unprivUID, strings.Count(out.String(), "--- PASS:")-1)
	}
	return false
}

// child is the copy of this test binary the unprivileged runs use, made
// once per test process and removed by TestMain.
type childBinary struct {
	once     sync.Once
	dir, bin string
	tmp, dev string // the child's TMPDIR and device node
	err      error
}

var child childBinary

// TestMain removes the child's copy after the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if child.dir != "" {
		_ = os.RemoveAll(child.dir)
	}
	os.Exit(code)
}

// prepareChild copies the running test binary into a fresh 0755 directory
// under /tmp (the binary's own directory is private to root), with a
// TMPDIR owned by unprivUID and a character device node it owns.
func prepareChild(t *testing.T) *childBinary {
	t.Helper()
	child.once.Do(func() { child.err = makeChild() })
	if child.err != nil {
		t.Fatalf("prepare the unprivileged child: %v", child.err)
	}
	return &child
}

func makeChild() error {
	dir, err := os.MkdirTemp("/tmp", "workspace-unpriv-")
	if err != nil {
		return err
	}
	child.dir = dir
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	data, err := os.ReadFile(self)
	if err != nil {
		return err
	}
	child.bin = filepath.Join(dir, "workspace.test")
	if err := os.WriteFile(child.bin, data, 0o755); err != nil {
		return err
	}
	child.tmp = filepath.Join(dir, "tmp")
	if err := os.Mkdir(child.tmp, 0o700); err != nil {
		return err
	}
	if err := os.Chown(child.tmp, unprivUID, unprivUID); err != nil {
		return err
	}
	// /dev/zero's numbers: reading it would never end.
	child.dev = filepath.Join(dir, "zero")
	if err := unix.Mknod(child.dev, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 5))); err != nil {
		return fmt.Errorf("mknod %s: %w", child.dev, err)
	}
	return os.Chown(child.dev, unprivUID, unprivUID)
}

// plantDevice puts a character device node (/dev/zero's numbers: reading
// it never ends) at p: a hard link to the node the root parent prepared,
// or mknod where the test runs as root some other way.
func plantDevice(t *testing.T, p string) {
	t.Helper()
	if dev := os.Getenv(envDevNode); dev != "" {
		if err := os.Link(dev, p); err != nil {
			t.Fatalf("link the prepared device node: %v", err)
		}
		return
	}
	if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 5))); err != nil {
		testutil.RequireRoot(t, "make a device node")
		t.Fatalf("mknod: %v", err)
	}
}
