package profiles

// The re-exec child: behavioural tests run the test binary again with
// PROFILES_TEST_CHILD set, so that installing a filter (which cannot be
// undone) only ever affects a throwaway process.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/internal/testutil"
)

const (
	envChild   = "PROFILES_TEST_CHILD"   // "probe" or "exec"
	envProfile = "PROFILES_TEST_PROFILE" // embedded name, or a path if it contains '/'
	envLoader  = "PROFILES_TEST_LOADER"  // "install" (default) or "bpf": load BPF() bytes as bwrap would
	envUID     = "PROFILES_TEST_UID"     // exec mode: switch to this uid/gid after installing
	envGID     = "PROFILES_TEST_GID"
	envNoAdmin = "PROFILES_TEST_DROP_CAP_SYS_ADMIN" // probe mode: drop CAP_SYS_ADMIN from the effective set first
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(envChild); mode != "" {
		if err := childMain(mode); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(125)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// requireExecutable returns path if it is an executable file, else skips
// (fails under CI=true).
func requireExecutable(t testing.TB, path string) string {
	t.Helper()
	if st, err := os.Stat(path); err != nil || st.Mode()&0o111 == 0 {
		testutil.SkipOrFail(t, fmt.Sprintf("%s not available", path))
	}
	return path
}

// Minimal assertions (the module does not require testify).

func noErr(t testing.TB, err error, msgAndArgs ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v%s", err, msg(msgAndArgs))
	}
}

func isErr(t testing.TB, err error, msgAndArgs ...any) {
	t.Helper()
	if err == nil {
		t.Fatalf("expected an error%s", msg(msgAndArgs))
	}
}

func isErrSoft(t testing.TB, err error, msgAndArgs ...any) {
	t.Helper()
	if err == nil {
		t.Errorf("expected an error%s", msg(msgAndArgs))
	}
}

func mustEqual[T comparable](t testing.TB, want, got T, msgAndArgs ...any) {
	t.Helper()
	if want != got {
		t.Fatalf("want %v, got %v%s", want, got, msg(msgAndArgs))
	}
}

func equal[T comparable](t testing.TB, want, got T, msgAndArgs ...any) {
	t.Helper()
	if want != got {
		t.Errorf("want %v, got %v%s", want, got, msg(msgAndArgs))
	}
}

func notEqual[T comparable](t testing.TB, a, b T, msgAndArgs ...any) {
	t.Helper()
	if a == b {
		t.Errorf("did not want %v%s", a, msg(msgAndArgs))
	}
}

func contains(t testing.TB, s, sub string, msgAndArgs ...any) {
	t.Helper()
	if !strings.Contains(s, sub) {
		t.Errorf("%q does not contain %q%s", s, sub, msg(msgAndArgs))
	}
}

func isTrue(t testing.TB, cond bool, msgAndArgs ...any) {
	t.Helper()
	if !cond {
		t.Errorf("condition false%s", msg(msgAndArgs))
	}
}

func msg(msgAndArgs []any) string {
	if len(msgAndArgs) == 0 {
		return ""
	}
	if f, ok := msgAndArgs[0].(string); ok {
		return ": " + fmt.Sprintf(f, msgAndArgs[1:]...)
	}
	return ": " + fmt.Sprint(msgAndArgs...)
}

// childCmd builds a command that re-executes the test binary as a child in
// the given mode with the given profile; args are the command to exec in
// "exec" mode.
func childCmd(t testing.TB, mode, profile string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), envChild+"="+mode, envProfile+"="+profile)
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

func childMain(mode string) error {
	runtime.LockOSThread() // keep the loading thread for the whole child
	name := os.Getenv(envProfile)
	var p *Profile
	var err error
	if filepath.Base(name) != name {
		p, err = Load(name)
	} else {
		p, err = LoadEmbedded(name)
	}
	if err != nil {
		return err
	}
	switch mode {
	case "probe":
		before := runProbes(false)
		if os.Getenv(envNoAdmin) == "1" {
			// This (locked) thread is the one Install checks and loads on.
			hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
			var data [2]unix.CapUserData
			if err := unix.Capget(&hdr, &data[0]); err != nil {
				return err
			}
			data[0].Effective &^= 1 << unix.CAP_SYS_ADMIN
			if err := unix.Capset(&hdr, &data[0]); err != nil {
				return err
			}
		}
		if err := load(p, os.Getenv(envLoader)); err != nil {
			return err
		}
		after := runProbes(true)
		nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
		if err != nil {
			return err
		}
		return json.NewEncoder(os.Stdout).Encode(probeReport{Before: before, After: after, NoNewPrivs: nnp})
	case "exec":
		if err := load(p, os.Getenv(envLoader)); err != nil {
			return err
		}
		if s := os.Getenv(envUID); s != "" {
			uid, err1 := strconv.Atoi(s)
			gid, err2 := strconv.Atoi(os.Getenv(envGID))
			if err := errors.Join(err1, err2); err != nil {
				return err
			}
			if err := syscall.Setgroups([]int{}); err != nil {
				return fmt.Errorf("setgroups: %w", err)
			}
			if err := syscall.Setresgid(gid, gid, gid); err != nil {
				return fmt.Errorf("setresgid: %w", err)
			}
			if err := syscall.Setresuid(uid, uid, uid); err != nil {
				return fmt.Errorf("setresuid: %w", err)
			}
		}
		args := os.Args[1:]
		if len(args) == 0 {
			return errors.New("exec: no command")
		}
		return syscall.Exec(args[0], args, os.Environ())
	}
	return fmt.Errorf("unknown child mode %q", mode)
}

// load installs p with Install, or like bubblewrap: no_new_privs, then the
// exported BPF program loaded with seccomp(2) (here with TSYNC, since Go is
// multithreaded; bwrap is not).
func load(p *Profile, loader string) error {
	switch loader {
	case "", "install":
		return p.Install()
	case "bpf":
		prog, err := p.BPF()
		if err != nil {
			return err
		}
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("no_new_privs: %w", err)
		}
		fprog := unix.SockFprog{Len: uint16(len(prog) / 8), Filter: (*unix.SockFilter)(unsafe.Pointer(&prog[0]))}
		if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog))); e != 0 {
			return fmt.Errorf("seccomp(SET_MODE_FILTER): %w", e)
		}
		runtime.KeepAlive(prog)
		return nil
	}
	return fmt.Errorf("unknown loader %q", loader)
}

type probeReport struct {
	Before map[string]int `json:"before"` // probe -> errno (0: success), only baseline-safe probes
	After  map[string]int `json:"after"`
	// NoNewPrivs after loading.
	NoNewPrivs int `json:"noNewPrivs"`
}

// probe is one raw syscall by name (resolved with libseccomp for this
// architecture). Arguments are chosen so that, once seccomp lets the call
// through, the kernel rejects it without side effects (bad pointer, bad fd,
// invalid flag combination), so the unfiltered baseline is safe to run and
// any EPERM/ENOSYS afterwards comes from the filter.
type probe struct {
	key      string
	name     string
	args     [6]uintptr
	baseline bool // safe to run without a filter, as root
	closeFD  bool // a success returns an fd to close
}

const (
	bad      = ^uintptr(0) // -1: invalid fd, invalid command
	noSuchID = 0x7ffffff0  // a pid that does not exist

	addrNoRandomize = 0x0040000 // personality(2) ADDR_NO_RANDOMIZE
)

// pairFDs receives socketpair's two fds (a probe child never closes them).
var pairFDs [2]int32

func probes() []probe {
	pid := uintptr(os.Getpid())
	cloneNS := func(flag uintptr, key string) probe {
		// CLONE_THREAD without CLONE_SIGHAND is rejected with EINVAL
		// before anything is created.
		return probe{key: key, name: "clone", args: [6]uintptr{flag | unix.CLONE_THREAD}, baseline: true}
	}
	return []probe{
		{key: "unshare(CLONE_NEWUSER)", name: "unshare", args: [6]uintptr{unix.CLONE_NEWUSER}, baseline: true},                 // EINVAL: Go is multithreaded
		{key: "unshare(CLONE_NEWNS)", name: "unshare", args: [6]uintptr{unix.CLONE_NEWNS | unix.CLONE_THREAD}, baseline: true}, // EINVAL: multithreaded
		{key: "setns", name: "setns", args: [6]uintptr{bad, 0}, baseline: true},
		{key: "mount", name: "mount", baseline: true},
		{key: "umount2", name: "umount2", baseline: true},
		{key: "pivot_root", name: "pivot_root", baseline: true},
		{key: "open_tree", name: "open_tree", args: [6]uintptr{bad}, baseline: true},
		{key: "move_mount", name: "move_mount", args: [6]uintptr{bad, 0, bad}, baseline: true},
		{key: "fsopen", name: "fsopen", baseline: true},
		{key: "fsmount", name: "fsmount", args: [6]uintptr{bad}, baseline: true},
		{key: "fspick", name: "fspick", args: [6]uintptr{bad}, baseline: true},
		{key: "fsconfig", name: "fsconfig", args: [6]uintptr{bad}, baseline: true},
		{key: "mount_setattr", name: "mount_setattr", args: [6]uintptr{bad}, baseline: true},
		{key: "ptrace", name: "ptrace", args: [6]uintptr{unix.PTRACE_ATTACH, noSuchID}, baseline: true},
		{key: "process_vm_readv", name: "process_vm_readv", args: [6]uintptr{pid}, baseline: true},
		{key: "process_vm_writev", name: "process_vm_writev", args: [6]uintptr{pid}, baseline: true},
		{key: "bpf", name: "bpf", args: [6]uintptr{bad}, baseline: true},
		{key: "keyctl", name: "keyctl", args: [6]uintptr{bad}, baseline: true},
		{key: "add_key", name: "add_key", baseline: true},
		{key: "request_key", name: "request_key", baseline: true},
		{key: "perf_event_open", name: "perf_event_open", args: [6]uintptr{0, 0, bad, bad}, baseline: true},
		{key: "userfaultfd", name: "userfaultfd", args: [6]uintptr{bad}, baseline: true},
		{key: "io_uring_setup", name: "io_uring_setup", baseline: true},
		{key: "io_uring_enter", name: "io_uring_enter", args: [6]uintptr{bad}, baseline: true},
		{key: "io_uring_register", name: "io_uring_register", args: [6]uintptr{bad}, baseline: true},
		{key: "open_by_handle_at", name: "open_by_handle_at", args: [6]uintptr{bad}, baseline: true},
		{key: "name_to_handle_at", name: "name_to_handle_at", args: [6]uintptr{bad}, baseline: true},
		{key: "chroot", name: "chroot", baseline: true},
		{key: "swapon", name: "swapon", baseline: true},
		{key: "swapoff", name: "swapoff", baseline: true},
		{key: "reboot", name: "reboot", baseline: true},             // bad magic: EINVAL
		{key: "settimeofday", name: "settimeofday", baseline: true}, // (NULL, NULL) is a no-op
		{key: "clock_settime", name: "clock_settime", args: [6]uintptr{bad}, baseline: true},
		{key: "adjtimex", name: "adjtimex", baseline: true},
		{key: "syslog", name: "syslog", args: [6]uintptr{bad}, baseline: true},
		{key: "kexec_load", name: "kexec_load", args: [6]uintptr{0, 0, 0, bad}},
		{key: "init_module", name: "init_module"},
		{key: "finit_module", name: "finit_module", args: [6]uintptr{bad}},
		{key: "delete_module", name: "delete_module"},
		{key: "acct", name: "acct"},
		{key: "personality(ADDR_NO_RANDOMIZE)", name: "personality", args: [6]uintptr{addrNoRandomize}},
		{key: "personality(query)", name: "personality", args: [6]uintptr{0xffffffff}, baseline: true},
		{key: "socket(AF_VSOCK)", name: "socket", args: [6]uintptr{unix.AF_VSOCK, unix.SOCK_STREAM}, baseline: true, closeFD: true},
		{key: "socket(AF_ALG)", name: "socket", args: [6]uintptr{unix.AF_ALG, unix.SOCK_SEQPACKET}, baseline: true, closeFD: true},
		{key: "socket(AF_INET)", name: "socket", args: [6]uintptr{unix.AF_INET, unix.SOCK_STREAM}, baseline: true, closeFD: true},
		{key: "socket(AF_UNIX)", name: "socket", args: [6]uintptr{unix.AF_UNIX, unix.SOCK_STREAM}, baseline: true, closeFD: true},
		{key: "socket(AF_PACKET)", name: "socket", args: [6]uintptr{unix.AF_PACKET, unix.SOCK_DGRAM}, baseline: true, closeFD: true},
		{key: "socket(AF_INET6, UDP)", name: "socket", args: [6]uintptr{unix.AF_INET6, unix.SOCK_DGRAM, unix.IPPROTO_UDP}, baseline: true, closeFD: true},
		{key: "socket(AF_NETLINK, ROUTE)", name: "socket", args: [6]uintptr{unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE}, baseline: true, closeFD: true},
		{key: "socket(AF_INET, SCTP)", name: "socket", args: [6]uintptr{unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_SCTP}, baseline: true, closeFD: true},
		{key: "socket(AF_NETLINK, SOCK_DIAG)", name: "socket", args: [6]uintptr{unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_SOCK_DIAG}, baseline: true, closeFD: true},
		// socketpair reaches the family's create function (and module
		// autoload) too; the pair's fds are not closed (a probe child).
		{key: "socketpair(AF_UNIX)", name: "socketpair", args: [6]uintptr{unix.AF_UNIX, unix.SOCK_STREAM, 0, uintptr(unsafe.Pointer(&pairFDs[0]))}, baseline: true},
		{key: "socketpair(AF_VSOCK)", name: "socketpair", args: [6]uintptr{unix.AF_VSOCK, unix.SOCK_STREAM, 0, uintptr(unsafe.Pointer(&pairFDs[0]))}, baseline: true},
		cloneNS(unix.CLONE_NEWNS, "clone(CLONE_NEWNS)"),
		cloneNS(unix.CLONE_NEWUSER, "clone(CLONE_NEWUSER)"),
		cloneNS(unix.CLONE_NEWPID, "clone(CLONE_NEWPID)"),
		cloneNS(unix.CLONE_NEWNET, "clone(CLONE_NEWNET)"),
		cloneNS(unix.CLONE_NEWIPC, "clone(CLONE_NEWIPC)"),
		cloneNS(unix.CLONE_NEWUTS, "clone(CLONE_NEWUTS)"),
		cloneNS(unix.CLONE_NEWCGROUP, "clone(CLONE_NEWCGROUP)"),
		cloneNS(0, "clone(no namespace)"),
		{key: "clone3", name: "clone3", baseline: true}, // NULL, size 0: EINVAL
		{key: "getpid", name: "getpid", baseline: true},
		// Real syscalls absent from the profile (not even in Docker's).
		{key: "ustat", name: "ustat", baseline: true},
		{key: "sysfs", name: "sysfs", args: [6]uintptr{bad}, baseline: true},
		{key: "move_pages", name: "move_pages", baseline: true},
	}
}

// unassignedSyscall is far above any syscall number of any architecture.
const unassignedSyscall = 1000

func runProbes(filtered bool) map[string]int {
	out := map[string]int{}
	for _, pr := range probes() {
		if !filtered && !pr.baseline {
			continue
		}
		nr, err := libseccomp.GetSyscallFromName(pr.name)
		if err != nil || nr < 0 {
			continue // no such syscall on this architecture
		}
		r, _, e := unix.Syscall6(uintptr(nr), pr.args[0], pr.args[1], pr.args[2], pr.args[3], pr.args[4], pr.args[5])
		if e == 0 && pr.closeFD {
			unix.Close(int(r))
		}
		out[pr.key] = int(e)
	}
	_, _, e := unix.Syscall(unassignedSyscall, 0, 0, 0)
	out["unassigned"] = int(e)

	// fork (Go's os/exec: clone(CLONE_VFORK|CLONE_VM|CLONE_PIDFD)) and exec.
	if err := exec.Command("/bin/true").Run(); err != nil {
		out["fork+exec"] = errnoOf(err)
	} else {
		out["fork+exec"] = 0
	}
	// Threads: hold 8 goroutines on 8 OS threads at once.
	out["threads"] = 0
	if n := distinctThreads(8); n != 8 {
		out["threads"] = int(unix.EAGAIN)
	}
	return out
}

func distinctThreads(n int) int {
	var mu sync.Mutex
	tids := map[int]bool{}
	var ready, release sync.WaitGroup
	ready.Add(n)
	release.Add(1)
	var done sync.WaitGroup
	for range n {
		done.Add(1)
		go func() {
			defer done.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			mu.Lock()
			tids[unix.Gettid()] = true
			mu.Unlock()
			ready.Done()
			release.Wait()
		}()
	}
	ready.Wait()
	release.Done()
	done.Wait()
	return len(tids)
}

func errnoOf(err error) int {
	var e syscall.Errno
	if errors.As(err, &e) {
		return int(e)
	}
	return -1
}
