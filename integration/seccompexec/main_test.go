package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/internal/testutil"
)

// envHelper switches the test binary into a helper that reports its own
// credentials; a copy of it gets file capabilities.
const envHelper = "SECCOMPEXEC_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(envHelper) != "" {
		os.Exit(helper())
	}
	os.Exit(m.Run())
}

// helper prints the status lines that matter and whether a raw socket (which
// needs CAP_NET_RAW) can be opened.
func helper() int {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	for _, l := range strings.Split(string(status), "\n") {
		for _, k := range []string{"Uid:", "Gid:", "Groups:", "CapInh:", "CapPrm:", "CapEff:", "CapAmb:", "NoNewPrivs:", "Seccomp:"} {
			if strings.HasPrefix(l, k) {
				fmt.Println(strings.Join(strings.Fields(l), " "))
			}
		}
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP)
	if err != nil {
		fmt.Println("raw socket:", err)
	} else {
		unix.Close(fd)
		fmt.Println("raw socket: ok")
	}
	return 0
}

// world makes a directory that uid 65534 can enter (t.TempDir is 0700).
func world(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "seccompexec-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func build(t *testing.T, dir string) string {
	t.Helper()
	// go test puts its own toolchain first on PATH.
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go tool is not on PATH: %v", err)
	}
	out := filepath.Join(dir, "seccompexec")
	cmd := exec.Command(goTool, "build", "-o", out, ".")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

func copyExe(t *testing.T, dst string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

var workerProfile = filepath.Join("..", "..", "profiles", "kubernetes-worker.json")

func runTool(t *testing.T, tool string, uid int, argv ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(tool, append([]string{"-profile", workerProfile, "-uid", fmt.Sprint(uid), "-gid", fmt.Sprint(uid), "--"}, argv...)...)
	cmd.Env = append(os.Environ(), envHelper+"=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func TestSeccompexec(t *testing.T) {
	testutil.RequireRoot(t, "install seccomp filters without no_new_privs")
	dir := world(t)
	tool := build(t, dir)

	bwrap := "/usr/bin/bwrap"
	if _, err := os.Stat(bwrap); err != nil {
		testutil.SkipOrFail(t, "bubblewrap not installed")
	}
	root := []string{"--ro-bind", "/usr", "/usr", "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/lib", "/lib",
		"--symlink", "usr/bin", "/bin", "--proc", "/proc", "--", "/bin/true"}
	t.Run("bwrap as 65534", func(t *testing.T) {
		for _, extra := range [][]string{{"--unshare-all"}, {"--unshare-all", "--unshare-user", "--uid", "1000"}} {
			out, err := runTool(t, tool, 65534, append(append([]string{bwrap}, extra...), root...)...)
			if err != nil {
				t.Errorf("bwrap %v under the worker profile as uid 65534: %v\n%s", extra, err, out)
			}
		}
	})

	// The supervisor execs sandboxd-nsinit, which carries file
	// capabilities: they must still work under the worker profile, i.e.
	// the filter was installed without no_new_privs.
	capped := filepath.Join(dir, "capped")
	plain := filepath.Join(dir, "plain")
	copyExe(t, capped)
	copyExe(t, plain)
	if out, err := exec.Command("setcap", "cap_net_raw+ep", capped).CombinedOutput(); err != nil {
		testutil.SkipOrFail(t, fmt.Sprintf("setcap: %v %s", err, out))
	}
	t.Run("file capabilities survive the filter", func(t *testing.T) {
		out, err := runTool(t, tool, 65534, capped)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		for _, want := range []string{
			"Uid: 65534 65534 65534 65534", "Gid: 65534 65534 65534 65534", "Groups:\n", // setgroups([])
			"CapPrm: 0000000000002000", "CapEff: 0000000000002000", // CAP_NET_RAW, from the file
			"NoNewPrivs: 0", "Seccomp: 2", "raw socket: ok",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("missing %q in:\n%s", want, out)
			}
		}
	})
	t.Run("without file capabilities nothing is left", func(t *testing.T) {
		out, err := runTool(t, tool, 65534, plain)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		for _, want := range []string{"CapPrm: 0000000000000000", "CapEff: 0000000000000000", "Seccomp: 2",
			"raw socket: operation not permitted"} {
			if !strings.Contains(out, want) {
				t.Errorf("missing %q in:\n%s", want, out)
			}
		}
	})
	t.Run("refuses to run unprivileged", func(t *testing.T) {
		cmd := exec.Command(tool, "-profile", workerProfile, "-uid", "65534", "-gid", "65534", "--", "/bin/true")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 125 || !strings.Contains(string(out), "must run as root") {
			t.Errorf("got %v: %s", err, out)
		}
	})
	t.Run("refuses a bad profile", func(t *testing.T) {
		bad := filepath.Join(dir, "bad.json")
		if err := os.WriteFile(bad, []byte(`{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[],"extra":1}`), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(tool, "-profile", bad, "-uid", "65534", "-gid", "65534", "--", "/bin/true").CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 125 || !strings.Contains(string(out), "unknown field") {
			t.Errorf("got %v: %s", err, out)
		}
	})
}
