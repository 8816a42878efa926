package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// attacker is run as the service user (the uid a compromised supervisor
// has). "pids P..." tries, for each pid, to open /proc/P/ns/user, setns
// into it (in a forked, single-threaded child) and PTRACE_SEIZE it.
// "holder HELPER N" starts the helper itself with the fds the supervisor
// would give it, catches the prelude's first child -- the user-namespace
// holder, or the keeper once the holder is gone -- and keeps trying to
// open its ns/user while it lives (for at most 2 s); once open, it tries
// to SIGSTOP it (refused: every uid of both is the owner's) and setns; up
// to N attempts.
const attacker = `
import ctypes, errno, json, os, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWUSER, PTRACE_SEIZE = 0x10000000, 0x4206

def in_child(fn):
    pid = os.fork()
    if pid == 0:
        try:
            os._exit(fn())
        except BaseException:
            os._exit(255)
    _, st = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(st)
    return 'ok' if code == 0 else errno.errorcode.get(code, str(code))

def attack(pid):
    out = {}
    try:
        fd = os.open('/proc/%d/ns/user' % pid, os.O_RDONLY)
    except OSError as e:
        out['open'] = errno.errorcode[e.errno]
        out['setns'] = 'not reached'
    else:
        out['open'] = 'ok'
        out['setns'] = in_child(lambda: 0 if libc.setns(fd, CLONE_NEWUSER) == 0 else ctypes.get_errno())
        os.close(fd)
    out['ptrace'] = in_child(lambda: 0 if libc.ptrace(PTRACE_SEIZE, pid, 0, 0) == 0 else ctypes.get_errno())
    return out

` + pyChildren + `
def holder(helper, tries):
    for attempt in range(tries):
        fds = [os.pipe() for _ in range(4)]
        pid = os.fork()
        if pid == 0:
            ends = [fds[0][0], fds[1][1], fds[2][1], fds[3][0]]
            dups = [os.dup(e) for e in ends]
            for i, d in enumerate(dups):
                os.dup2(d, 3 + i)
            os.closerange(7, 1024)
            os.execv(helper, [helper])
        for r, w in fds:
            pass
        os.close(fds[0][0]); os.close(fds[1][1]); os.close(fds[2][1]); os.close(fds[3][0])
        result = None
        deadline = time.time() + 2
        while time.time() < deadline and result is None:
            kids = children(pid)
            if not kids:
                try:
                    if os.waitpid(pid, os.WNOHANG)[0] != 0:
                        pid = None
                        break
                except ChildProcessError:
                    break
                continue
            # Keep trying while the holder lives: it may become openable
            # (dumpable) only after a while; an open fd keeps the
            # namespace even after the holder is gone.
            h, last = kids[0], None
            while time.time() < deadline:
                try:
                    fd = os.open('/proc/%d/ns/user' % h, os.O_RDONLY)
                except OSError as e:
                    if e.errno in (errno.ENOENT, errno.ESRCH):
                        break
                    last = errno.errorcode[e.errno]
                    continue
                try:
                    os.kill(h, signal.SIGSTOP)
                except OSError:
                    pass
                setns = in_child(lambda: 0 if libc.setns(fd, CLONE_NEWUSER) == 0 else ctypes.get_errno())
                os.close(fd)
                result = dict(open='ok', setns=setns, pid=h, attempt=attempt)
                break
            if result is None and last is not None:
                result = dict(open=last, setns='not reached', pid=h, attempt=attempt)
            try:
                os.kill(h, signal.SIGKILL)
            except OSError:
                pass
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except OSError:
                pass
        for r, w in fds:
            for e in (r, w):
                try: os.close(e)
                except OSError: pass
        if result:
            return result
    return {'error': 'never caught the holder in %d attempts' % tries}

if sys.argv[1] == 'pids':
    print(json.dumps({p: attack(int(p)) for p in sys.argv[2:]}))
else:
    print(json.dumps(holder(sys.argv[2], int(sys.argv[3]))))
`

// runAttacker runs the attacker script as the service user.
func (in *installation) runAttacker(t *testing.T, args ...string) []byte {
	t.Helper()
	script := in.path("attacker.py")
	if _, err := os.Stat(script); err != nil {
		if err := os.WriteFile(script, []byte(attacker), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	argv := append([]string{"--reuid=" + strconv.Itoa(in.uid), "--regid=" + strconv.Itoa(in.gid), "--clear-groups", "/usr/bin/python3", script}, args...)
	out, err := exec.Command("setpriv", argv...).Output()
	if err != nil {
		t.Fatalf("attacker %v: %v: %s", args, err, out)
	}
	return out
}

// childrenOf lists the children of pid (every thread's).
func childrenOf(pid int) []int {
	var out []int
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, task := range tasks {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, task.Name()))
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// TestI10NamespaceOwnership: while a payload sleeps, a process of the
// service uid can neither setns into the sandbox's user namespace through
// bwrap, bwrap's reaper (the sandbox's pid 1) or the payload, nor ptrace
// the helper (bwrap's relay), bwrap or the reaper; nsenter --user --target
// fails the same way.
func TestI10NamespaceOwnership(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	done := make(chan execResult, 1)
	go func() { done <- s.exec(py("import time; time.sleep(6)")) }()

	// supervisor -> helper (bwrap's relay) -> bwrap -> reaper (pid 1) -> payload
	argv0 := func(pid int) string {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		a, _, _ := strings.Cut(string(b), "\x00")
		return a
	}
	var relay, bwrap, reaper, payload int
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && payload == 0 {
		time.Sleep(50 * time.Millisecond)
		for _, h := range childrenOf(s.cmd.Process.Pid) {
			for _, b := range childrenOf(h) {
				for _, r := range childrenOf(b) {
					for _, p := range childrenOf(r) {
						if argv0(b) == "/usr/bin/bwrap" && argv0(r) == "/usr/bin/bwrap" && argv0(p) == "/usr/bin/python3" {
							relay, bwrap, reaper, payload = h, b, r, p
						}
					}
				}
			}
		}
	}
	if payload == 0 {
		t.Fatalf("never saw supervisor -> helper -> bwrap -> reaper -> payload")
	}
	procs := map[string]int{"helper": relay, "bwrap": bwrap, "reaper": reaper, "payload": payload}
	for name, pid := range procs {
		st, _ := statusOf(pid)
		t.Logf("%s pid %d: Uid %s Gid %s Groups %q", name, pid, st["Uid"], st["Gid"], st["Groups"])
	}

	var got map[string]map[string]string
	out := in.runAttacker(t, "pids", strconv.Itoa(relay), strconv.Itoa(bwrap), strconv.Itoa(reaper), strconv.Itoa(payload))
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("attacker output %q: %v", out, err)
	}
	for name, pid := range procs {
		r := got[strconv.Itoa(pid)]
		t.Logf("service uid against %s (pid %d): %v", name, pid, r)
		if r["setns"] == "ok" || r["open"] == "ok" && r["setns"] != "EPERM" {
			t.Errorf("service uid setns into the user namespace through %s: open %s, setns %s; want EPERM (or the open refused)", name, r["open"], r["setns"])
		}
		if name != "payload" && r["ptrace"] == "ok" {
			t.Errorf("service uid may ptrace %s", name)
		}
	}
	for name, pid := range map[string]int{"bwrap": bwrap, "reaper": reaper, "payload": payload} {
		cmd := exec.Command("setpriv", "--reuid="+strconv.Itoa(in.uid), "--regid="+strconv.Itoa(in.gid), "--clear-groups",
			"nsenter", "--user", "--target", strconv.Itoa(pid), "--", "/bin/true")
		out, err := cmd.CombinedOutput()
		t.Logf("nsenter --user --target %s: %v: %s", name, err, strings.TrimSpace(string(out)))
		// Refused at the open (EACCES) or at setns (EPERM); anything
		// after that (e.g. "setgroups failed") means setns succeeded.
		refused := strings.Contains(string(out), "cannot open /proc/") || strings.Contains(string(out), "reassociate to namespace 'ns/user' failed")
		if err == nil || !refused {
			t.Errorf("nsenter --user --target %d (%s) as the service user got into the namespace: %v: %s", pid, name, err, out)
		}
	}
	r := <-done
	if r.ExitCode == nil || *r.ExitCode != 0 {
		t.Errorf("payload exit %v: %s", r.ExitCode, r.Stderr)
	}
}

// TestI10HolderNotEnterable: the prelude's holder (the process that makes
// the user namespace) is not enterable by the service uid either, even
// when the service uid runs the helper itself and stops the holder.
func TestI10HolderNotEnterable(t *testing.T) {
	in := setup(t)
	var got map[string]any
	out := in.runAttacker(t, "holder", in.path("libexec/nsinit"), "200")
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("attacker output %q: %v", out, err)
	}
	t.Logf("service uid against the holder: %v", got)
	if e, ok := got["error"]; ok {
		t.Fatalf("%v", e)
	}
	if got["setns"] == "ok" || got["open"] == "ok" && got["setns"] != "EPERM" {
		t.Errorf("service uid setns into the holder's user namespace: open %v, setns %v", got["open"], got["setns"])
	}
}
