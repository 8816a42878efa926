package integration

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/profiles"
)

func TestRuntimesEndToEnd(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})

	cases := []struct {
		name     string
		req      map[string]any
		wantOut  string
		wantErr  string
		wantExit int
	}{
		{"python print", py("print(1)"), "1\n", "", 0},
		{"javascript log", map[string]any{"language": "javascript", "code": "console.log(6*7)"}, "42\n", "", 0},
		{"python exit code and stderr", py("import sys; print('err', file=sys.stderr); sys.exit(3)"), "", "err\n", 3},
		{"javascript exit code", map[string]any{"language": "javascript", "code": "process.exitCode = 5"}, "", "", 5},
		{"stdin", map[string]any{"language": "python", "code": "import sys; print(sys.stdin.read().upper())", "stdin": "abc"}, "ABC\n", "", 0},
		{"staged files and import from workspace", map[string]any{"language": "python",
			"code": "import helper; print(helper.X, open('data/in.csv').read())",
			"files": []map[string]string{
				{"path": "helper.py", "content_base64": "WCA9IDQy"}, // "X = 42"
				{"path": "data/in.csv", "content_base64": "YSxi"},   // "a,b"
			}}, "42 a,b\n", "", 0},
		{"env reaches payload", map[string]any{"language": "javascript", "code": "console.log(process.env.GREETING)", "env": map[string]string{"GREETING": "hi"}}, "hi\n", "", 0},
		{"working directory is /workspace", py("import os; print(os.getcwd())"), "/workspace\n", "", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := s.exec(c.req)
			if r.ExitCode == nil || *r.ExitCode != c.wantExit {
				t.Fatalf("exit %v signal %v, want %d; stderr %q", r.ExitCode, r.Signal, c.wantExit, r.Stderr)
			}
			if r.Stdout != c.wantOut {
				t.Errorf("stdout %q, want %q", r.Stdout, c.wantOut)
			}
			if c.wantErr != "" && r.Stderr != c.wantErr {
				t.Errorf("stderr %q, want %q", r.Stderr, c.wantErr)
			}
			if r.Policy.ProfileSHA256 == "" || r.Policy.MountsSHA256 == "" || r.Policy.HelperVersion == "" {
				t.Errorf("policy attestation incomplete: %+v", r.Policy)
			}
		})
	}

	t.Run("output cap", func(t *testing.T) {
		r := s.exec(py("import sys; sys.stdout.write('x' * 1000000)"))
		if !r.StdoutTruncated || len(r.Stdout) != 262144 {
			t.Fatalf("truncated=%v len=%d, want true and 262144", r.StdoutTruncated, len(r.Stdout))
		}
	})
	t.Run("signal", func(t *testing.T) {
		r := s.exec(py("import os, signal; os.kill(os.getpid(), signal.SIGKILL)"))
		if r.Signal == nil || *r.Signal != "SIGKILL" || r.ExitCode != nil {
			t.Fatalf("signal %v exit %v, want SIGKILL and null", r.Signal, r.ExitCode)
		}
	})
	t.Run("workspace is removed after a one-shot exec", func(t *testing.T) {
		r := s.exec(py("open('left.txt','w').write('x')"))
		if _, err := os.Stat(in.path("state/workspaces", s.launchOf(r.ID))); !os.IsNotExist(err) {
			t.Fatalf("workspace of %s still there: %v", r.ID, err)
		}
	})
}

// TestI1SupervisorUnprivileged: the supervisor runs as a non-root uid with
// CapEff = CapPrm = 0, and refuses to start otherwise.
func TestI1SupervisorUnprivileged(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	pid := s.cmd.Process.Pid
	if uid := strings.Fields(statusField(t, pid, "Uid")); uid[0] == "0" || uid[1] == "0" {
		t.Fatalf("supervisor uid %v", uid)
	}
	for _, f := range []string{"CapEff", "CapPrm", "CapInh", "CapAmb"} {
		if v := statusField(t, pid, f); strings.Trim(v, "0") != "" {
			t.Errorf("supervisor %s = %s, want 0", f, v)
		}
	}

	refuse := func(t *testing.T, attr *syscall.SysProcAttr, want string) {
		cmd := exec.Command(in.path("bin/sandboxd"), "--socket", in.path("run", "refused-"+randID()+".sock"),
			"--state-dir", in.path("state"), "--helper", in.path("libexec/nsinit"))
		cmd.SysProcAttr = attr
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("supervisor started; output:\n%s", out)
		}
		if !strings.Contains(string(out), want) {
			t.Fatalf("refusal %q does not mention %q", out, want)
		}
	}
	t.Run("refuses root", func(t *testing.T) { refuse(t, nil, "root") })
	t.Run("refuses a capability", func(t *testing.T) {
		refuse(t, &syscall.SysProcAttr{
			Credential:  &syscall.Credential{Uid: uint32(in.uid), Gid: uint32(in.gid), Groups: []uint32{}},
			AmbientCaps: []uintptr{10}, // CAP_NET_BIND_SERVICE
		}, "capabilit")
	})
}

// helperRecords returns the audit records the helper reported for exec id.
func helperRecords(t *testing.T, s *supervisor, id string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	recs := s.auditRecords()
	for _, r := range recs {
		// A warm exec's helper steps are under its warm sandbox's launch id.
		if f, _ := r["facts"].(map[string]any); r["exec_id"] == id && r["step"] == "warm_exec" {
			id, _ = f["launch_id"].(string)
		}
	}
	for _, r := range recs {
		if r["exec_id"] == id && r["source"] == "nsinit" {
			facts, _ := r["facts"].(map[string]any)
			out[r["step"].(string)] = facts
		}
	}
	return out
}

// TestI2HelperHoldsNoHostCapability: only the helper's prelude runs with a
// host capability; after it made the user namespace the helper holds none.
func TestI2HelperHoldsNoHostCapability(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})

	out, err := exec.Command("getcap", in.path("libexec/nsinit")).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "cap_setgid,cap_setuid,cap_net_admin,cap_sys_admin=p") {
		t.Fatalf("helper file capabilities: %q %v", out, err)
	}
	st, err := os.Stat(in.path("libexec/nsinit"))
	if err != nil || st.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
		t.Fatalf("helper mode %v: setuid/setgid bit set or stat failed (%v)", st.Mode(), err)
	}

	r := s.exec(py("print(1)"))
	recs := helperRecords(t, s, r.ID)
	drop, enter := recs["drop"], recs["enter"]
	if drop == nil || enter == nil {
		t.Fatalf("helper records missing: %v", recs)
	}
	for _, k := range []string{"cap_eff", "cap_prm", "cap_inh", "cap_amb"} {
		v, _ := drop[k].(string)
		if v == "" || strings.Trim(v, "0") != "" {
			t.Errorf("helper %s after the user namespace was made = %q, want 0", k, v)
		}
	}
	if n, _ := drop["threads_checked"].(float64); n < 2 {
		t.Errorf("threads checked %v: every Go thread must be read back", n)
	}
	// The helper itself stayed in the initial user namespace (so it holds
	// nothing there) and handed bwrap a different, new one.
	host, err := os.Stat("/proc/self/ns/user")
	if err != nil {
		t.Fatal(err)
	}
	hostIno := host.Sys().(*syscall.Stat_t).Ino
	if own, _ := enter["own_userns_inode"].(float64); uint64(own) != hostIno {
		t.Errorf("helper's own user namespace %v, want the initial one %d", own, hostIno)
	}
	if made, _ := enter["userns_inode"].(float64); made == 0 || uint64(made) == hostIno {
		t.Errorf("sandbox user namespace inode %v must be new", made)
	}
	if m := enter["uid_map"]; m != fmt.Sprintf("1000 %d 1", in.uid) {
		t.Errorf("uid_map %q, want one line mapping 1000 to the service uid %d", m, in.uid)
	}
}

// deniedProbe defines probe_denied(): it makes each syscall the payload
// must never make, each in a child of its own (so that one which succeeds
// without a filter, such as unshare(0) or userfaultfd, cannot change what
// the next one sees), and returns the errno name of each, or "ok".
//
// The arguments are chosen so that the kernel itself would NOT answer EPERM
// for a process without capabilities: a path that does not exist (ENOENT,
// looked up before the capability check), an unmapped address (EFAULT), a
// bad fd (EBADF), invalid flags (EINVAL), no such pid (ESRCH), or arguments
// that succeed. With all-zero arguments about ten of them answered EPERM
// from the kernel even with no filter, so the check proved nothing.
// TestI3PayloadConfinement runs the same probe without a filter to show it.
// x86_64 syscall numbers.
const deniedProbe = `
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
BAD = 8  # an unmapped address
NOPE = b'/nonexistent-sandboxd-probe'
def sysc(nr, *args):
    conv = [ctypes.c_char_p(a) if isinstance(a, bytes) else ctypes.c_long(a) for a in args]
    r = libc.syscall(ctypes.c_long(nr), *conv)
    return 0 if r >= 0 else ctypes.get_errno()
def isolated(nr, *args):
    pid = os.fork()
    if pid == 0:
        os._exit(sysc(nr, *args))
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
CLONE_NEWUSER, CLONE_NEWNS, CLONE_FS, SIGCHLD = 0x10000000, 0x00020000, 0x200, 17
DENIED = {
    'unshare(0)': (272, 0),
    'unshare(CLONE_NEWUSER)': (272, CLONE_NEWUSER),
    'setns(-1)': (308, -1, 0),
    'mount(nonexistent target)': (165, b'none', NOPE, b'tmpfs', 0, 0),
    'umount2(nonexistent)': (166, NOPE, 0),
    'pivot_root(nonexistent)': (155, NOPE, NOPE),
    'ptrace(PEEKDATA, no such pid)': (101, 2, 0x3fffffff, 0, 0),
    'process_vm_readv(bad flags)': (310, 1, 0, 0, 0, 0, 1),
    'bpf(bad attr)': (321, 0, BAD, 8),
    'keyctl(bad op)': (250, -1, 0, 0, 0, 0),
    'add_key(bad type)': (248, BAD, 0, 0, 0, 0),
    'request_key(bad type)': (249, BAD, 0, 0, 0),
    'perf_event_open(bad attr)': (298, BAD, 0, -1, -1, 0),
    'userfaultfd(UFFD_USER_MODE_ONLY)': (323, 1 | 0o2000000),
    'io_uring_setup(bad params)': (425, 1, BAD),
    'io_uring_enter(-1)': (426, -1, 0, 0, 0, 0, 0),
    'io_uring_register(-1)': (427, -1, 0, 0, 0),
    'kexec_load': (246, 0, 0, 0, 0),
    'init_module': (175, 0, 0, 0),
    'finit_module(-1)': (313, -1, 0, 0),
    'delete_module(bad name)': (176, BAD, 0),
    'open_by_handle_at(-1)': (304, -1, BAD, 0),
    'name_to_handle_at(bad)': (303, -100, BAD, BAD, BAD, 0),
    'chroot(nonexistent)': (161, NOPE),
    'swapon(bad flags)': (167, NOPE, 0x40000000),
    'settimeofday(bad tz)': (164, 0, BAD),
    'clock_settime(bad ts)': (227, 0, BAD),
    'adjtimex(bad)': (159, BAD),
    'clone(CLONE_NEWNS|CLONE_FS)': (56, CLONE_NEWNS | CLONE_FS | SIGCHLD, 0, 0, 0, 0),
    'clone(CLONE_NEWUSER|CLONE_FS)': (56, CLONE_NEWUSER | CLONE_FS | SIGCHLD, 0, 0, 0, 0),
}
def probe_denied():
    out = {}
    for name, (nr, *args) in DENIED.items():
        e = isolated(nr, *args)
        out[name] = 'ok' if e == 0 else errno.errorcode.get(e, str(e))
    return out
`

// initialNSCapFirst are the denied syscalls for which the kernel checks a
// capability of the initial user namespace before it reads any argument
// (CAP_SYS_BOOT, CAP_SYS_MODULE), or answers ENOSYS when it lacks them: no
// argument and no namespace lets an unprivileged probe see anything but
// EPERM there without the filter. For them the proof is the installed
// filter itself: byte for byte the program compiled from payload.json,
// whose verdicts profiles.TestPayloadProgram checks.
var initialNSCapFirst = map[string]bool{
	"kexec_load": true, "init_module": true, "finit_module(-1)": true, "delete_module(bad name)": true,
}

// ownNSCapFirst are the denied syscalls the kernel refuses a process
// without capabilities before it reads an argument, but allows one that
// holds them in its own user namespace: pivot_root (CAP_SYS_ADMIN over the
// mount namespace's owner) and unshare(CLONE_NEWUSER) (on hosts that
// restrict unprivileged user namespaces). replayInstalledFilter proves the
// filter's answer for them.
var ownNSCapFirst = map[string]bool{"pivot_root(nonexistent)": true, "unshare(CLONE_NEWUSER)": true}

// payloadProbe is a Python program that reports what the payload can see
// and do, as JSON.
const payloadProbe = deniedProbe + `
import json, socket
def status():
    out = {}
    for line in open('/proc/self/status'):
        k, _, v = line.partition(':')
        out[k] = v.strip()
    return out
st = status()
fds = sorted(int(f) for f in os.listdir('/proc/self/fd'))
print(json.dumps({
  'uid': os.getuid(), 'gid': os.getgid(), 'euid': os.geteuid(), 'pid': os.getpid(),
  'caps': {k: st[k] for k in ('CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb')},
  'no_new_privs': st['NoNewPrivs'], 'seccomp': st['Seccomp'],
  'pids': sorted(int(p) for p in os.listdir('/proc') if p.isdigit()),
  'links': sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:]),
  'root': sorted(os.listdir('/')),
  'fds': fds,
  'denied': probe_denied(),
  'unknown_syscall': errno.errorcode.get(sysc(1000), 'ok'),
  'environ': open('/proc/self/environ').read().split('\0')[:-1],
  'pid1_environ': open('/proc/1/environ').read().split('\0')[:-1],
  'writable_root': os.access('/', os.W_OK),
}))
`

type payloadView struct {
	UID, GID, EUID, PID int
	Caps                map[string]string
	NoNewPrivs          string `json:"no_new_privs"`
	Seccomp             string
	Pids                []int
	Links               []string
	Root                []string
	Fds                 []int
	Denied              map[string]string
	UnknownSyscall      string   `json:"unknown_syscall"`
	Environ             []string `json:"environ"`
	Pid1Environ         []string `json:"pid1_environ"`
	WritableRoot        bool     `json:"writable_root"`
}

func probePayload(t *testing.T, s *supervisor, env map[string]string) payloadView {
	t.Helper()
	req := py(payloadProbe)
	if env != nil {
		req["env"] = env
	}
	r := s.exec(req)
	if r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("probe failed: exit %v stderr %s", r.ExitCode, r.Stderr)
	}
	var v payloadView
	if err := json.Unmarshal([]byte(r.Stdout), &v); err != nil {
		t.Fatalf("decode probe %q: %v", r.Stdout, err)
	}
	return v
}

// TestI3PayloadConfinement checks every property of I3 from inside a real payload.
func TestI3PayloadConfinement(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	v := probePayload(t, s, nil)

	for k, val := range v.Caps {
		if strings.Trim(val, "0") != "" {
			t.Errorf("payload %s = %s, want 0", k, val)
		}
	}
	if v.NoNewPrivs != "1" {
		t.Errorf("NoNewPrivs %q, want 1", v.NoNewPrivs)
	}
	if v.Seccomp != "2" {
		t.Errorf("Seccomp %q, want 2 (filter)", v.Seccomp)
	}
	if v.UID == 0 || v.EUID == 0 || v.GID == 0 {
		t.Errorf("payload uid %d euid %d gid %d: must be non-root inside", v.UID, v.EUID, v.GID)
	}
	// Own pid namespace: bwrap's reaper is 1, the payload a low pid, and
	// nothing of the host is listed.
	if v.PID > 10 || len(v.Pids) > 5 || v.Pids[0] != 1 {
		t.Errorf("payload pid %d sees pids %v: not its own pid namespace", v.PID, v.Pids)
	}
	if len(v.Links) != 1 || v.Links[0] != "lo" {
		t.Errorf("network links %v, want only lo", v.Links)
	}
	wantRoot := map[string]bool{"bin": true, "dev": true, "etc": true, "lib": true, "lib64": true, "proc": true,
		"run": true, "sbin": true, "tmp": true, "usr": true, "workspace": true}
	for _, e := range v.Root {
		if !wantRoot[e] {
			t.Errorf("unexpected entry /%s in the sandbox root %v", e, v.Root)
		}
	}
	if v.WritableRoot {
		t.Error("the sandbox root is writable: it is an unbounded tmpfs")
	}
	// Only 0, 1, 2 and the fd os.listdir itself opened.
	if len(v.Fds) > 4 || v.Fds[0] != 0 || v.Fds[1] != 1 || v.Fds[2] != 2 {
		t.Errorf("payload fds %v, want only 0, 1, 2 (+ listdir's own)", v.Fds)
	}
	for name, e := range v.Denied {
		if e != "EPERM" {
			t.Errorf("%s: %s, want EPERM", name, e)
		}
	}
	if len(v.Denied) < 25 {
		t.Errorf("only %d denied syscalls checked", len(v.Denied))
	}
	t.Run("denied syscalls answer otherwise without the filter", func(t *testing.T) {
		checkDeniedProbeUnfiltered(t, in, v.Denied)
	})
	var installed []byte
	t.Run("the installed filter is the compiled payload profile", func(t *testing.T) {
		installed = checkInstalledFilter(t, in, s)
	})
	t.Run("the installed filter denies what the kernel would allow", func(t *testing.T) {
		if installed == nil {
			t.Fatal("no installed filter was read")
		}
		replayInstalledFilter(t, in, installed)
	})
	if v.UnknownSyscall != "ENOSYS" {
		t.Errorf("unknown syscall answered %s, want ENOSYS", v.UnknownSyscall)
	}

	t.Run("sees no supervisor socket, state directory or other workspace", func(t *testing.T) {
		// A long exec holds its workspace while a second one looks for it.
		holder := make(chan execResult, 1)
		go func() { holder <- s.exec(py("import time; open('marker-file','w').write('x'); time.sleep(3)")) }()
		time.Sleep(700 * time.Millisecond)
		code := fmt.Sprintf(`
import os, json
hits = []
for root in ['/']:
    for dirpath, dirs, files in os.walk(root):
        if dirpath.startswith('/proc') or dirpath.startswith('/usr') or dirpath.startswith('/sys'):
            dirs[:] = []
            continue
        for f in files + dirs:
            p = os.path.join(dirpath, f)
            if f == 'marker-file' or f.endswith('.sock') or %q in p or 'audit' in f:
                hits.append(p)
print(json.dumps(hits))`, in.prefix)
		r := s.exec(py(code))
		if strings.TrimSpace(r.Stdout) != "[]" {
			t.Errorf("payload found host paths: %s %s", r.Stdout, r.Stderr)
		}
		<-holder
	})
}

// TestI4Environment: the payload's environment is the fixed base plus the
// request's env, nothing of the supervisor's or the helper's; bwrap's reaper
// (pid 1) carries the base only.
func TestI4Environment(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{env: []string{"SUPERVISOR_SECRET=hunter2", "LD_PRELOAD=/nonexistent.so"}})
	v := probePayload(t, s, map[string]string{"API_TOKEN": "t0k3n"})
	want := []string{"API_TOKEN=t0k3n", "HOME=/workspace", "LANG=C.UTF-8", "PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=/tmp"}
	if strings.Join(v.Environ, "\n") != strings.Join(want, "\n") {
		t.Errorf("payload environ %q, want %q", v.Environ, want)
	}
	for _, kv := range v.Pid1Environ {
		if strings.Contains(kv, "t0k3n") || strings.Contains(kv, "hunter2") || strings.HasPrefix(kv, "LD_") {
			t.Errorf("bwrap's reaper environment leaks %q", kv)
		}
	}
	if len(v.Pid1Environ) != 4 {
		t.Errorf("pid 1 environ %q, want the 4 base variables", v.Pid1Environ)
	}
}

// TestI6TimeoutKillsEverything: a payload that setsids and double-forks a
// writer that outlives its timeout; when the answer comes nothing of it is
// left and nothing writes any more.
func TestI6TimeoutKillsEverything(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	code := `
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        # the daemonised writer: detached from every stdio pipe
        fd = os.open('/dev/null', os.O_RDWR)
        for i in (0, 1, 2): os.dup2(fd, i)
        while True:
            with open('/workspace/beat', 'a') as f: f.write('x')
            time.sleep(0.01)
    os._exit(0)
print('started', flush=True)
time.sleep(60)
`
	before := time.Now()
	req := py(code)
	req["timeout_ms"] = 1500
	r := s.exec(req)
	took := time.Since(before)
	if !r.TimedOut || r.Signal == nil || *r.Signal != "SIGKILL" {
		t.Fatalf("timed_out %v signal %v, want a timeout with SIGKILL", r.TimedOut, r.Signal)
	}
	if took > 10*time.Second {
		t.Errorf("the answer took %v for a 1.5 s timeout", took)
	}
	if r.Stdout != "started\n" {
		t.Errorf("stdout %q", r.Stdout)
	}
	if left := s.execProcesses(); len(left) > 0 {
		t.Fatalf("processes of the exec left after the answer: %v", left)
	}
	ws := in.path("state/workspaces", s.launchOf(r.ID))
	if _, err := os.Stat(ws); !os.IsNotExist(err) {
		t.Fatalf("workspace still present (something may still write into it): %v", err)
	}
	time.Sleep(300 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(ws, "beat")); !os.IsNotExist(err) {
		t.Fatal("the writer wrote after the answer came")
	}
}

// TestI8FailClosed: when the sandbox cannot be built nothing runs, and the
// caller gets 503 unavailable with the reason and the fix.
func TestI8FailClosed(t *testing.T) {
	in := setup(t)
	variant := func(t *testing.T, name string, mutate func(cfgPath string, cfg map[string]any), caps bool) *supervisor {
		cfgPath := in.path("etc", name+".json")
		if err := in.buildHelper(name, cfgPath, caps); err != nil {
			t.Fatal(err)
		}
		var cfg map[string]any
		b, _ := json.Marshal(in.helperConfig())
		_ = json.Unmarshal(b, &cfg)
		mutate(cfgPath, cfg)
		if err := writeJSON(cfgPath, cfg); err != nil {
			t.Fatal(err)
		}
		return in.startSupervisor(t, supervisorOpts{helper: name})
	}
	cases := []struct {
		name    string
		mutate  func(string, map[string]any)
		caps    bool
		check   string // health check that must say why
		wantMsg []string
	}{
		{"bwrap missing", func(_ string, c map[string]any) { c["bwrap"] = "/nonexistent/bwrap" }, true,
			"bwrap", []string{"bwrap", "apt-get install bubblewrap"}},
		{"helper without its file capability", func(string, map[string]any) {}, false,
			"helper", []string{"CAP_SYS_ADMIN", "setcap"}},
		{"profile does not parse", func(p string, c map[string]any) {
			bad := in.path("etc/profiles", filepath.Base(p)+"-broken.json")
			_ = os.WriteFile(bad, []byte(`{"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [`), 0o644)
			c["payload_profile"] = bad
		}, true, "seccomp", []string{"profile"}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := variant(t, fmt.Sprintf("nsinit-i8-%d", i), c.mutate, c.caps)
			// The payload would leave a mark in a host-visible place if it ran.
			status, body := s.do("POST", "/v1/exec", py("print('ran')"))
			if status != 503 {
				t.Fatalf("status %d, want 503: %s", status, body)
			}
			var e apiError
			if err := json.Unmarshal(body, &e); err != nil || e.Error.Code != "unavailable" {
				t.Fatalf("body %s: want code unavailable", body)
			}
			for _, w := range c.wantMsg {
				if !strings.Contains(e.Error.Message, w) {
					t.Errorf("message %q does not say %q", e.Error.Message, w)
				}
			}
			if !strings.Contains(e.Error.Message, "fix") {
				t.Errorf("message %q carries no fix", e.Error.Message)
			}
			hs, hb := s.do("GET", "/v1/health", nil)
			var h api.Health
			_ = json.Unmarshal(hb, &h)
			if v := checkNamed(h, c.check); hs != 503 || h.OK || v == "ok" || v == "" {
				t.Errorf("health %d %s: want 503 with checks.%s saying why", hs, hb, c.check)
			}
		})
	}
}

// TestBadInput: bad requests get API.md's codes and the supervisor keeps serving.
func TestBadInput(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	cases := []struct {
		name   string
		body   any
		status int
		code   api.ErrorCode
	}{
		{"malformed JSON", `{"language": "python", "code": `, 400, "invalid_argument"},
		{"unknown field", `{"language": "python", "code": "print(1)", "shell": true}`, 400, "invalid_argument"},
		{"bad language", map[string]any{"language": "ruby", "code": "puts 1"}, 400, "invalid_argument"},
		{"timeout zero", map[string]any{"language": "python", "code": "1", "timeout_ms": 0}, 400, "invalid_argument"},
		{"timeout above one-shot cap", map[string]any{"language": "python", "code": "1", "timeout_ms": 60001}, 400, "invalid_argument"},
		{"escaping file path", map[string]any{"language": "python", "code": "1", "files": []map[string]string{{"path": "../x", "content_base64": ""}}}, 400, "invalid_argument"},
		{"bad env name", map[string]any{"language": "python", "code": "1", "env": map[string]string{"1BAD": "x"}}, 400, "invalid_argument"},
		{"oversized body", `{"language": "python", "code": "` + strings.Repeat("x", 9<<20) + `"}`, 413, "too_large"},
		{"unknown route", nil, 404, "not_found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			method, path := "POST", "/v1/exec"
			if c.body == nil {
				method, path = "GET", "/v1/nope"
			}
			status, body := s.do(method, path, c.body)
			var e apiError
			_ = json.Unmarshal(body, &e)
			if status != c.status || e.Error.Code != c.code || e.Error.Message == "" {
				t.Fatalf("got %d %s, want %d %s", status, body, c.status, c.code)
			}
		})
	}

	t.Run("client disconnects mid-exec", func(t *testing.T) {
		conn, err := net.Dial("unix", s.socket)
		if err != nil {
			t.Fatal(err)
		}
		body := `{"language":"python","code":"import os,time\nos.fork()\ntime.sleep(50)","timeout_ms":60000}`
		fmt.Fprintf(conn, "POST /v1/exec HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		if s.awaitExecProcesses(2) < 2 {
			t.Fatal("the exec never started")
		}
		conn.Close()
		deadline := time.Now().Add(10 * time.Second)
		for len(s.execProcesses()) > 0 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if left := s.execProcesses(); len(left) > 0 {
			t.Fatalf("exec not killed after the client hung up: %v", left)
		}
		ents, _ := os.ReadDir(in.path("state/workspaces"))
		idle := s.idleWarm()
		for _, e := range ents {
			if !idle[e.Name()] {
				t.Errorf("workspace %s left behind", e.Name())
			}
		}
	})

	if r := s.exec(py("print('still serving')")); r.Stdout != "still serving\n" {
		t.Fatalf("supervisor stopped serving: %+v", r)
	}
}

// TestAuditTrailComplete: one record per launch step, each with the exec id
// and the caller's uid.
func TestAuditTrailComplete(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	r := s.exec(py("print(1)"))
	var steps []string
	for _, rec := range s.auditRecords() {
		if rec["exec_id"] != r.ID {
			continue
		}
		steps = append(steps, rec["step"].(string))
		if rec["caller_uid"] != float64(0) {
			t.Errorf("record %v: caller_uid %v, want 0 (the test runs as root)", rec["step"], rec["caller_uid"])
		}
		if rec["ok"] != true {
			t.Errorf("record %v not ok: %v", rec["step"], rec["error"])
		}
	}
	want := "accept decide prepare enter network seccomp drop exec reap"
	if launch := s.launchOf(r.ID); launch != r.ID {
		// Served by the warm pool: the launch steps are the warm
		// sandbox's (TestWarmAuditTrail checks both halves).
		want = "accept decide warm_exec reap"
	}
	if strings.Join(steps, " ") != want {
		t.Fatalf("steps %q, want %q", strings.Join(steps, " "), want)
	}
}

// TestSupervisorUnderWorkerProfile runs the whole launch path with the
// supervisor itself under profiles/kubernetes-worker.json, installed as a
// container runtime would: as root, without no_new_privs, then dropped to
// the service user, so the helper's file capabilities still work.
func TestSupervisorUnderWorkerProfile(t *testing.T) {
	in := setup(t)
	tool := in.path("bin/seccompexec")
	cmd := exec.Command("go", "build", "-o", tool, "./integration/seccompexec")
	cmd.Dir = in.repo
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build seccompexec: %v: %s", err, out)
	}
	s := in.startSupervisor(t, supervisorOpts{wrapper: []string{tool,
		"-profile", in.path("etc/profiles/kubernetes-worker.json"),
		"-uid", fmt.Sprint(in.uid), "-gid", fmt.Sprint(in.gid)}})
	if v := statusField(t, s.cmd.Process.Pid, "Seccomp"); v != "2" {
		t.Fatalf("supervisor Seccomp = %s, want 2 (under the worker profile)", v)
	}
	if v := statusField(t, s.cmd.Process.Pid, "NoNewPrivs"); v != "0" {
		t.Fatalf("supervisor NoNewPrivs = %s, want 0 (file capabilities must work)", v)
	}
	if r := s.exec(py("print(1)")); r.Stdout != "1\n" {
		t.Fatalf("python under the worker profile: %+v", r)
	}
	if r := s.exec(map[string]any{"language": "javascript", "code": "console.log(1)"}); r.Stdout != "1\n" {
		t.Fatalf("node under the worker profile: %+v", r)
	}
	v := probePayload(t, s, nil)
	if v.Seccomp != "2" || v.NoNewPrivs != "1" || len(v.Links) != 1 {
		t.Fatalf("payload under the worker profile: %+v", v)
	}
}

// TestSandboxctlRun drives the CLI against the real supervisor.
func TestSandboxctlRun(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	ctl := func(args ...string) (string, string, int) {
		cmd := exec.Command(in.path("bin/sandboxctl"), append([]string{"run", "--socket", s.socket}, args...)...)
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), errb.String(), code
	}
	if out, _, code := ctl("--lang", "python", "-c", "print(1)"); out != "1\n" || code != 0 {
		t.Fatalf("python: %q exit %d", out, code)
	}
	if out, _, code := ctl("--lang", "javascript", "-c", "console.log('x'); process.exit(7)"); out != "x\n" || code != 7 {
		t.Fatalf("javascript: %q exit %d", out, code)
	}
	f := filepath.Join(t.TempDir(), "prog.py")
	_ = os.WriteFile(f, []byte("import sys; sys.stderr.write('e'); sys.exit(4)"), 0o644)
	if _, errOut, code := ctl("--lang", "python", f); errOut != "e" || code != 4 {
		t.Fatalf("file: stderr %q exit %d", errOut, code)
	}
	if out, _, code := ctl("--lang", "python", "--json", "-c", "print(2)"); code != 0 || !strings.Contains(out, `"stdout"`) {
		t.Fatalf("--json: %q exit %d", out, code)
	}
}

// replayProbe runs deniedProbe in a python3 child, after loading the cBPF
// program in the file named by its first argument, if any (under
// no_new_privs, as bwrap does), and reports its Seccomp mode and answers.
const replayProbe = deniedProbe + `
import json, sys
if len(sys.argv) > 1:
    prog = open(sys.argv[1], 'rb').read()
    buf = ctypes.create_string_buffer(prog, len(prog))
    class Fprog(ctypes.Structure):
        _fields_ = [('len', ctypes.c_ushort), ('filter', ctypes.c_void_p)]
    fp = Fprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
    PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fp), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), 'load the filter')
seccomp = [l.split(':')[1].strip() for l in open('/proc/self/status') if l.startswith('Seccomp:')][0]
print(json.dumps({'seccomp': seccomp, 'denied': probe_denied()}))
`

// runReplayProbe runs replayProbe with attr, loading the filter in
// filterFile unless it is empty, and returns the answers.
func runReplayProbe(t *testing.T, attr *syscall.SysProcAttr, filterFile string) map[string]string {
	t.Helper()
	args := []string{"-c", replayProbe}
	if filterFile != "" {
		args = append(args, filterFile)
	}
	cmd := exec.Command("/usr/bin/python3", args...)
	cmd.SysProcAttr = attr
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.Dir = "/"
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("probe: %v: %s%s", err, out, stderr.String())
	}
	var ref struct {
		Seccomp string
		Denied  map[string]string
	}
	if err := json.Unmarshal(out, &ref); err != nil {
		t.Fatalf("decode %q: %v", out, err)
	}
	if want := map[bool]string{true: "2", false: "0"}[filterFile != ""]; ref.Seccomp != want {
		t.Fatalf("probe ran with Seccomp %s, want %s", ref.Seccomp, want)
	}
	return ref.Denied
}

// checkDeniedProbeUnfiltered runs deniedProbe as the service user, without
// namespaces, capabilities or seccomp filter, and requires every call that
// answered EPERM in the sandbox to answer something else there: the EPERM
// came from the filter, not from the kernel's own checks. Those the kernel
// refuses before reading an argument (initialNSCapFirst, ownNSCapFirst) are
// covered by checkInstalledFilter and replayInstalledFilter.
func checkDeniedProbeUnfiltered(t *testing.T, in *installation, filtered map[string]string) {
	ref := runReplayProbe(t, &syscall.SysProcAttr{Setsid: true,
		Credential: &syscall.Credential{Uid: uint32(in.uid), Gid: uint32(in.gid), Groups: []uint32{}}}, "")
	if len(ref) != len(filtered) {
		t.Fatalf("reference ran %d probes, the payload %d", len(ref), len(filtered))
	}
	for name, e := range ref {
		switch {
		case e != "EPERM":
		case initialNSCapFirst[name] || ownNSCapFirst[name]:
			t.Logf("%s: EPERM from the kernel itself here; proven by the installed filter instead", name)
		default:
			t.Errorf("%s answers EPERM without the filter too: the probe cannot tell the filter's answer from the kernel's", name)
		}
		t.Logf("%-34s unfiltered %-12s sandbox %s", name, e, filtered[name])
	}
}

// replayInstalledFilter loads the payload's installed filter (read from the
// live payload) into a process that holds every capability in a user and
// mount namespace of its own, where the kernel lets pivot_root and
// unshare(CLONE_NEWUSER) get as far as their arguments, and requires:
// without the filter every probe but initialNSCapFirst answers other than
// EPERM there, with it every probe answers EPERM. So the kernel itself
// shows the verdicts of the very bytes the payload runs under. Nothing can
// change the host: every path is absent, every pointer bad, and the calls
// that could act on the host need capabilities of the initial namespace.
func replayInstalledFilter(t *testing.T, in *installation, prog []byte) {
	dir, err := os.MkdirTemp("", "sandboxd-replay-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "payload.bpf")
	if err := os.WriteFile(file, prog, 0o644); err != nil {
		t.Fatal(err)
	}
	attr := func() *syscall.SysProcAttr {
		// uid 0 inside, the service uid outside: every capability in
		// the new namespaces, none in the initial one.
		return &syscall.SysProcAttr{Setsid: true,
			Credential:  &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true},
			Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: in.uid, Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: in.gid, Size: 1}}}
	}
	without := runReplayProbe(t, attr(), "")
	with := runReplayProbe(t, attr(), file)
	for name, e := range without {
		if e == "EPERM" && !initialNSCapFirst[name] {
			t.Errorf("%s answers EPERM with every capability of its own namespaces and no filter", name)
		}
		if with[name] != "EPERM" {
			t.Errorf("%s under the installed filter: %s, want EPERM", name, with[name])
		}
		t.Logf("%-34s own namespaces, no filter %-12s installed filter %s", name, e, with[name])
	}
	for name := range ownNSCapFirst {
		if without[name] == "EPERM" {
			t.Errorf("%s: the replay does not get past the kernel's own check", name)
		}
	}
}

// checkInstalledFilter reads the seccomp filter of a live payload from
// outside (PTRACE_SECCOMP_GET_FILTER, which needs CAP_SYS_ADMIN: the test
// runs as root) and requires exactly one filter, byte for byte the program
// the helper attested (bpf_sha256 of its seccomp record) and the program
// profiles compiles from the installed payload.json. So every verdict
// profiles.TestPayloadProgram checks on that program is the payload's.
func checkInstalledFilter(t *testing.T, in *installation, s *supervisor) []byte {
	done := make(chan execResult, 1)
	go func() { done <- s.exec(py("import time; time.sleep(4)")) }()
	pid := waitForPayload(t, in, 10*time.Second)
	if n := statusField(t, pid, "Seccomp_filters"); n != "1" {
		t.Errorf("payload has %s seccomp filters, want 1", n)
	}
	filters, err := seccompFilters(pid)
	if err != nil {
		t.Fatalf("read the payload's filters: %v", err)
	}
	r := <-done
	if len(filters) != 1 {
		t.Fatalf("payload has %d filters, want 1", len(filters))
	}
	installed := sha256.Sum256(filters[0])
	got := hex.EncodeToString(installed[:])

	p, err := profiles.Load(in.path("etc/profiles/payload.json"))
	if err != nil {
		t.Fatal(err)
	}
	prog, err := p.BPF()
	if err != nil {
		t.Fatal(err)
	}
	compiled := sha256.Sum256(prog)
	if want := hex.EncodeToString(compiled[:]); got != want {
		t.Errorf("installed filter sha256 %s (%d insns), compiled payload.json %s (%d insns)", got, len(filters[0])/8, want, len(prog)/8)
	}
	facts := helperRecords(t, s, r.ID)["seccomp"]
	if att, _ := facts["bpf_sha256"].(string); att != got {
		t.Errorf("installed filter sha256 %s, the helper attested %q", got, att)
	}
	t.Logf("installed filter: %d instructions, sha256 %s", len(filters[0])/8, got)
	return filters[0]
}

// waitForPayload returns the pid of the service user's python3 process
// that runs under a seccomp filter.
func waitForPayload(t *testing.T, in *installation, timeout time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			if err != nil {
				continue
			}
			st := string(b)
			if strings.HasPrefix(st, "Name:\tpython3\n") && strings.Contains(st, fmt.Sprintf("\nUid:\t%d\t", in.uid)) &&
				strings.Contains(st, "\nSeccomp:\t2\n") {
				return pid
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("no filtered python3 payload of the service user appeared")
	return 0
}

// seccompFilters returns the classic BPF programs of pid's seccomp filters,
// the most recently installed first. It stops pid for the time it takes.
func seccompFilters(pid int) ([][]byte, error) {
	// ptrace requests must come from the thread that attached.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.PtraceSeize(pid); err != nil {
		return nil, fmt.Errorf("PTRACE_SEIZE: %w", err)
	}
	defer unix.PtraceDetach(pid)
	if err := unix.PtraceInterrupt(pid); err != nil {
		return nil, fmt.Errorf("PTRACE_INTERRUPT: %w", err)
	}
	var ws unix.WaitStatus
	if _, err := unix.Wait4(pid, &ws, unix.WALL, nil); err != nil {
		return nil, fmt.Errorf("wait for the ptrace stop: %w", err)
	}
	var out [][]byte
	for i := 0; ; i++ {
		n, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SECCOMP_GET_FILTER, uintptr(pid), uintptr(i), 0, 0, 0)
		if e == unix.ENOENT {
			return out, nil
		}
		if e != 0 {
			return nil, fmt.Errorf("PTRACE_SECCOMP_GET_FILTER %d: %w", i, e)
		}
		buf := make([]byte, n*8) // struct sock_filter
		if _, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SECCOMP_GET_FILTER, uintptr(pid), uintptr(i),
			uintptr(unsafe.Pointer(&buf[0])), 0, 0); e != 0 {
			return nil, fmt.Errorf("PTRACE_SECCOMP_GET_FILTER %d: %w", i, e)
		}
		out = append(out, buf)
	}
}

// socketProbe tries socket(2) on every address family number from 0 past
// AF_MAX (45, AF_MCTP, on Linux 6.x) and on values whose low 32 bits name
// an allowed family, a few protocols that autoload modules, socketpair,
// and then uses what is allowed: TCP and UDP echo over loopback (IPv4 and
// IPv6), an AF_UNIX socketpair, and an rtnetlink interface list.
const socketProbe = `
import ctypes, errno, json, os, socket
libc = ctypes.CDLL(None, use_errno=True)
SOCKET, SOCKETPAIR = 41, 53
def call(nr, fam, typ, proto):
    pair = (ctypes.c_int * 2)()
    args = [ctypes.c_long(fam), ctypes.c_long(typ), ctypes.c_long(proto)]
    if nr == SOCKETPAIR:
        args.append(pair)
    r = libc.syscall(ctypes.c_long(nr), *args)
    if r < 0:
        e = ctypes.get_errno()
        return errno.errorcode.get(e, str(e))
    if nr == SOCKETPAIR:
        os.close(pair[0]); os.close(pair[1])
    else:
        os.close(r)
    return 'ok'
out = {'families': {}, 'protocols': {}, 'works': {}}
for fam in list(range(64)) + [1 << 32 | 1, 1 << 32 | 2, 1 << 32 | 10, 1 << 32 | 16]:
    out['families'][str(fam)] = call(SOCKET, fam, socket.SOCK_DGRAM, 0)
P = out['protocols']
P['AF_INET/STREAM/SCTP'] = call(SOCKET, 2, socket.SOCK_STREAM, 132)
P['AF_INET6/STREAM/SCTP'] = call(SOCKET, 10, socket.SOCK_STREAM, 132)
P['AF_INET/DGRAM/L2TP'] = call(SOCKET, 2, socket.SOCK_DGRAM, 115)
P['AF_INET/STREAM/MPTCP'] = call(SOCKET, 2, socket.SOCK_STREAM, 262)
P['AF_INET/DGRAM/ICMP'] = call(SOCKET, 2, socket.SOCK_DGRAM, 1)
P['AF_INET/STREAM/TCP'] = call(SOCKET, 2, socket.SOCK_STREAM, 6)
P['AF_INET6/DGRAM/UDP'] = call(SOCKET, 10, socket.SOCK_DGRAM, 17)
P['AF_INET/STREAM/TCP+2^32'] = call(SOCKET, 2, socket.SOCK_STREAM, 1 << 32 | 6)
P['AF_NETLINK/RAW/ROUTE'] = call(SOCKET, 16, socket.SOCK_RAW, 0)
P['AF_NETLINK/RAW/SOCK_DIAG'] = call(SOCKET, 16, socket.SOCK_RAW, 4)
P['AF_NETLINK/RAW/NETFILTER'] = call(SOCKET, 16, socket.SOCK_RAW, 12)
P['socketpair(AF_UNIX)'] = call(SOCKETPAIR, 1, socket.SOCK_STREAM, 0)
P['socketpair(AF_INET)'] = call(SOCKETPAIR, 2, socket.SOCK_STREAM, 0)
P['socketpair(AF_TIPC)'] = call(SOCKETPAIR, 30, socket.SOCK_STREAM, 0)
P['socketpair(AF_PACKET)'] = call(SOCKETPAIR, 17, socket.SOCK_DGRAM, 0)
W = out['works']
def attempt(name, f):
    try:
        W[name] = f()
    except Exception as e:
        W[name] = 'error: %r' % e
def tcp_echo(family, host):
    with socket.socket(family, socket.SOCK_STREAM) as srv:
        srv.bind((host, 0)); srv.listen()
        with socket.create_connection(srv.getsockname()[:2]) as c:
            a, _ = srv.accept()
            c.sendall(b'ping'); a.sendall(a.recv(4)); a.close()
            return c.recv(4).decode()
def udp_echo():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as a, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as b:
        a.bind(('127.0.0.1', 0)); b.sendto(b'ping', a.getsockname())
        return a.recv(4).decode()
def unix_pair():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    a.sendall(b'ping'); r = b.recv(4).decode(); a.close(); b.close()
    return r
attempt('tcp4', lambda: tcp_echo(socket.AF_INET, '127.0.0.1'))
attempt('tcp6', lambda: tcp_echo(socket.AF_INET6, '::1'))
# getaddrinfo with AI_ADDRCONFIG asks rtnetlink which addresses exist (the
# sandbox has no /etc/hosts, so a numeric host).
attempt('tcp_getaddrinfo', lambda: tcp_echo(socket.AF_INET, socket.getaddrinfo('127.0.0.1', 0, 0, socket.SOCK_STREAM, 0, socket.AI_ADDRCONFIG)[0][4][0]))
attempt('udp4', udp_echo)
attempt('unix_socketpair', unix_pair)
attempt('if_nameindex', lambda: [n for _, n in socket.if_nameindex()])
print(json.dumps(out))
`

// TestI3SocketFamilies: from inside a real payload, socket(2) answers
// EAFNOSUPPORT for every address family but AF_UNIX, AF_INET, AF_INET6 and
// AF_NETLINK (NETLINK_ROUTE only), EPROTONOSUPPORT for protocols that would
// load a module, and what is allowed still works, in Python and in Node
// (issue 9 item 4, security review M2).
func TestI3SocketFamilies(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	r := s.exec(py(socketProbe))
	if r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("probe failed: exit %v stderr %s", r.ExitCode, r.Stderr)
	}
	var v struct {
		Families, Protocols map[string]string
		Works               map[string]any
	}
	if err := json.Unmarshal([]byte(r.Stdout), &v); err != nil {
		t.Fatalf("decode %q: %v", r.Stdout, err)
	}
	allowed := map[string]bool{"1": true, "2": true, "10": true, "16": true}
	if len(v.Families) < 64 {
		t.Fatalf("only %d families probed", len(v.Families))
	}
	fams := make([]string, 0, len(v.Families))
	for fam := range v.Families {
		fams = append(fams, fam)
	}
	slices.SortFunc(fams, func(a, b string) int {
		x, _ := strconv.ParseUint(a, 10, 64)
		y, _ := strconv.ParseUint(b, 10, 64)
		return cmp.Compare(x, y)
	})
	for _, fam := range fams {
		got := v.Families[fam]
		want := "EAFNOSUPPORT"
		if allowed[fam] {
			want = "ok"
		}
		if got != want {
			t.Errorf("socket(%s, SOCK_DGRAM, 0): %s, want %s", fam, got, want)
		}
	}
	wantProto := map[string]string{
		"AF_INET/STREAM/SCTP": "EPROTONOSUPPORT", "AF_INET6/STREAM/SCTP": "EPROTONOSUPPORT",
		"AF_INET/DGRAM/L2TP": "EPROTONOSUPPORT", "AF_INET/STREAM/MPTCP": "EPROTONOSUPPORT",
		"AF_INET/DGRAM/ICMP": "EPROTONOSUPPORT", "AF_INET/STREAM/TCP+2^32": "EPROTONOSUPPORT",
		"AF_INET/STREAM/TCP": "ok", "AF_INET6/DGRAM/UDP": "ok",
		"AF_NETLINK/RAW/ROUTE": "ok", "AF_NETLINK/RAW/SOCK_DIAG": "EPROTONOSUPPORT", "AF_NETLINK/RAW/NETFILTER": "EPROTONOSUPPORT",
		"socketpair(AF_UNIX)": "ok", "socketpair(AF_INET)": "ENOTSUP", // EOPNOTSUPP, the kernel's own answer: allowed through
		"socketpair(AF_TIPC)": "EAFNOSUPPORT", "socketpair(AF_PACKET)": "EAFNOSUPPORT",
	}
	for k, want := range wantProto {
		if got := v.Protocols[k]; got != want {
			t.Errorf("%s: %q, want %s", k, got, want)
		}
	}
	for _, k := range []string{"tcp4", "tcp6", "tcp_getaddrinfo", "udp4", "unix_socketpair"} {
		if v.Works[k] != "ping" {
			t.Errorf("%s: %v, want the echo", k, v.Works[k])
		}
	}
	if names, _ := json.Marshal(v.Works["if_nameindex"]); string(names) != `["lo"]` {
		t.Errorf("if_nameindex: %s, want [\"lo\"] (NETLINK_ROUTE is allowed for it)", names)
	}

	// Node: os.networkInterfaces() needs NETLINK_ROUTE (libuv, getifaddrs);
	// dns.lookup and a loopback server do not.
	js := `
const os = require('os'), net = require('net'), dns = require('dns');
const out = {ifaces: Object.keys(os.networkInterfaces())};
dns.lookup('127.0.0.1', {hints: dns.ADDRCONFIG}, (err, addr) => {
  out.lookup = err ? err.code : addr;
  const srv = net.createServer(c => c.pipe(c)).listen(0, '127.0.0.1', () => {
    const c = net.connect(srv.address().port, '127.0.0.1', () => c.write('ping'));
    c.on('data', d => { out.echo = d.toString(); c.destroy(); srv.close(); console.log(JSON.stringify(out)); });
  });
});`
	r = s.exec(map[string]any{"language": "javascript", "code": js})
	if r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("node probe failed: exit %v stderr %s", r.ExitCode, r.Stderr)
	}
	if got := strings.TrimSpace(r.Stdout); got != `{"ifaces":["lo"],"lookup":"127.0.0.1","echo":"ping"}` {
		t.Errorf("node: %s", got)
	}
}
