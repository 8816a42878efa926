package integration

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pyChildren is the Python function the service-uid scripts use to list a
// process's children.
const pyChildren = `
def children(pid):
    try:
        with open('/proc/%d/task/%d/children' % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []
`

// holderSignaller is run as the service user (a compromised supervisor's
// uid). It starts the installed helper with the fds the supervisor would
// give it, in a directory every uid may write, with RLIMIT_CORE unlimited
// (the caller chooses both), catches the prelude's user-namespace holder
// and sends it SIGQUIT, once the holder's real uid is the owner's or after
// 50 ms: a holder the service uid may signal dumps core as the namespace
// owner into that directory. It stops after `want` holders were caught as
// the owner or `tries` starts, and prints what each kill returned, by the
// holder's real uid when it was sent.
const holderSignaller = `
import errno, json, os, resource, signal, sys, time
` + pyChildren + `
def ruid(pid):
    try:
        with open('/proc/%d/status' % pid) as f:
            for line in f:
                if line.startswith('Uid:'):
                    return int(line.split()[1])
    except OSError:
        return None

helper, cwd, owner, want, tries = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
kills, started = {}, 0
while sum(n for k, n in kills.items() if k.startswith('owner:')) < want and started < tries:
    started += 1
    fds = [os.pipe() for _ in range(4)]
    pid = os.fork()
    if pid == 0:
        os.chdir(cwd)
        dups = [os.dup(e) for e in (fds[0][0], fds[1][1], fds[2][1], fds[3][0])]
        for i, d in enumerate(dups):
            os.dup2(d, 3 + i)
        os.closerange(7, 1024)
        os.execv(helper, [helper])
    deadline = time.time() + 2
    while time.time() < deadline:
        kids = children(pid)
        if kids:
            # Wait (briefly) for the holder to be the owner by real uid;
            # whatever it is by then says which bucket the kill counts in.
            h, until, who = kids[0], time.time() + 0.05, None
            while time.time() < until:
                who = ruid(h)
                if who is None or who == owner:
                    break
            try:
                os.kill(h, signal.SIGQUIT)
                r = 'ok'
            except OSError as e:
                r = errno.errorcode[e.errno]
            if r != 'ESRCH' and who is not None:
                k = ('owner:' if who == owner else 'caller:') + r
                kills[k] = kills.get(k, 0) + 1
            break
        if os.waitpid(pid, os.WNOHANG)[0] != 0:
            pid = None
            break
    if pid:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    for r, w in fds:
        for e in (r, w):
            try: os.close(e)
            except OSError: pass
print(json.dumps({'started': started, 'kills': kills}))
`

// TestHelperHolderNotSignallable: the service uid may not signal the
// prelude's user-namespace holder (its every uid is the namespace
// owner's), so it can neither make it dump core as the owner into a
// directory of its choosing nor stop it; and the prelude dumps no core
// whatever the caller's RLIMIT_CORE.
func TestHelperHolderNotSignallable(t *testing.T) {
	in := setup(t)
	cwd, err := os.MkdirTemp("", "sandboxd-core-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(cwd)
	if err := os.Chmod(cwd, 0o777); err != nil {
		t.Fatal(err)
	}
	script := in.path("holder-signaller.py")
	if err := os.WriteFile(script, []byte(holderSignaller), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("setpriv", "--reuid="+strconv.Itoa(in.uid), "--regid="+strconv.Itoa(in.gid), "--clear-groups",
		"/usr/bin/python3", script, in.path("libexec/nsinit"), cwd, strconv.Itoa(in.ownerUID), "10", "100").Output()
	if err != nil {
		t.Fatalf("signaller: %v: %s", err, out)
	}
	var res struct {
		Started int            `json:"started"`
		Kills   map[string]int `json:"kills"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("signaller output %q: %v", out, err)
	}
	t.Logf("%d helpers started; SIGQUIT to a live holder, by its real uid when sent: %v", res.Started, res.Kills)
	asOwner := 0
	for k, n := range res.Kills {
		if strings.HasPrefix(k, "owner:") {
			asOwner += n
		}
	}
	// A kill sent while the holder's real uid is still the caller's (the
	// instant between its fork and its first setresuid) may succeed; the
	// holder has every blockable signal blocked then, so it stays pending.
	if asOwner == 0 {
		t.Errorf("never caught a holder whose real uid is the owner's in %d starts (kills %v)", res.Started, res.Kills)
	}
	if n := res.Kills["owner:ok"]; n > 0 {
		t.Errorf("the service uid signalled a holder whose every uid is the owner's %d times of %d", n, asOwner)
	}
	time.Sleep(500 * time.Millisecond) // a core is written after the kill returns
	ents, _ := os.ReadDir(cwd)
	for _, e := range ents {
		var st syscall.Stat_t
		_ = syscall.Stat(filepath.Join(cwd, e.Name()), &st)
		t.Errorf("%s appeared in the caller's directory (uid %d, %d bytes)", e.Name(), st.Uid, st.Size)
	}
}

// TestHelperKilledLeavesNoOwnerProcess: a helper killed at any moment of
// a launch -- its steps, bwrap's set-up, the payload's run -- leaves no
// process of the namespace owner behind (such a process only root could
// kill: the service uid gets EPERM). SIGKILL is the supervisor's kill past
// its grace, the OOM killer's or an operator's; SIGTERM is the
// supervisor's death (the helper's parent-death signal from its release
// on) and the supervisor's first kill. SIGTERM's delays are short: the
// moment that matters is bwrap's fork, right after the release byte, and
// a SIGTERM that came while the fork was under way, before the helper
// knew bwrap's pid, once left bwrap orphaned as the owner.
func TestHelperKilledLeavesNoOwnerProcess(t *testing.T) {
	in := setup(t)
	for _, tc := range []struct {
		name     string
		sig      syscall.Signal
		launches int
		maxDelay time.Duration
	}{
		{"SIGKILL", syscall.SIGKILL, 200, 60 * time.Millisecond},
		{"SIGTERM", syscall.SIGTERM, 300, 3 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if left := killHelpersAtRandom(t, in, tc.sig, tc.launches, tc.maxDelay); len(left) > 0 {
				t.Fatalf("processes of the namespace owner (uid %d) outlived their helper (%v):\n%s", in.ownerUID, tc.sig, strings.Join(left, "\n"))
			}
			// The payload runs as the service uid, which the supervisor can
			// always kill (and whose cgroup it kills); log what is left of it.
			if ps := userProcesses(in.uid); len(ps) > 0 {
				t.Logf("processes of the service uid left (the supervisor's to kill): %d", len(ps))
				_ = exec.Command("pkill", "-KILL", "-u", strconv.Itoa(in.uid)).Run()
			}
		})
	}
}

// killHelpersAtRandom starts launches helpers, each sent sig at a random
// moment up to maxDelay after its release byte, and returns the namespace
// owner's processes left, checking every 20 launches.
func killHelpersAtRandom(t *testing.T, in *installation, sig syscall.Signal, launches int, maxDelay time.Duration) []string {
	for i := 0; i < launches; i++ {
		d := in.startDirect(t, directOpts{})
		d.sendSpec(t, in, "import time; time.sleep(30)")
		if _, err := d.releaseW.Write([]byte{1}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rand.Int64N(int64(maxDelay))))
		_ = d.cmd.Process.Signal(sig)
		select {
		case <-d.done:
		case <-time.After(10 * time.Second):
			_ = d.cmd.Process.Kill()
			<-d.done
			t.Errorf("launch %d: the helper outlived %v by 10 s", i, sig)
		}
		if i%20 == 19 || i == launches-1 {
			if left := ownerLeftovers(in, 3*time.Second); len(left) > 0 {
				return left
			}
		}
	}
	return nil
}

// ownerLeftovers waits up to wait for the namespace owner's processes to
// go, and lists those that stay.
func ownerLeftovers(in *installation, wait time.Duration) []string {
	deadline := time.Now().Add(wait)
	for {
		ps := userProcesses(in.ownerUID)
		if len(ps) == 0 || time.Now().After(deadline) {
			return ps
		}
		time.Sleep(50 * time.Millisecond)
	}
}
