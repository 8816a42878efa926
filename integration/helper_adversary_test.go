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

// holderSignaller is run as the service user (a compromised supervisor's
// uid). It starts the installed helper with the fds the supervisor would
// give it, in a directory every uid may write, with RLIMIT_CORE unlimited
// (the caller chooses both), catches the prelude's user-namespace holder
// and sends it SIGQUIT: a holder the service uid may signal dumps core as
// the namespace owner into that directory. It stops after `want` holders
// were caught or `tries` starts, and prints what each kill returned.
const holderSignaller = `
import errno, json, os, resource, signal, sys, time

def children(pid):
    try:
        with open('/proc/%d/task/%d/children' % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []

helper, cwd, want, tries = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
kills, started = {}, 0
while sum(kills.values()) < want and started < tries:
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
            try:
                os.kill(kids[0], signal.SIGQUIT)
                r = 'ok'
            except OSError as e:
                r = errno.errorcode[e.errno]
            if r != 'ESRCH':
                kills[r] = kills.get(r, 0) + 1
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
		"/usr/bin/python3", script, in.path("libexec/nsinit"), cwd, "10", "400").Output()
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
	t.Logf("%d helpers started; SIGQUIT to a live holder returned %v", res.Started, res.Kills)
	caught := 0
	for _, n := range res.Kills {
		caught += n
	}
	if caught == 0 {
		t.Fatalf("never caught a live holder in %d starts: the test proves nothing", res.Started)
	}
	if res.Kills["ok"] > 0 {
		t.Errorf("the service uid signalled the holder %d times of %d", res.Kills["ok"], caught)
	}
	time.Sleep(500 * time.Millisecond) // a core is written after the kill returns
	ents, _ := os.ReadDir(cwd)
	for _, e := range ents {
		var st syscall.Stat_t
		_ = syscall.Stat(filepath.Join(cwd, e.Name()), &st)
		t.Errorf("%s appeared in the caller's directory (uid %d, %d bytes)", e.Name(), st.Uid, st.Size)
	}
}

// TestHelperKilledLeavesNoOwnerProcess: a helper SIGKILLed at any moment
// of a launch -- its steps, bwrap's set-up, the payload's run -- leaves no
// process of the namespace owner behind (such a process only root could
// kill: the service uid gets EPERM). 200 launches, each killed at a random
// moment after the release byte.
func TestHelperKilledLeavesNoOwnerProcess(t *testing.T) {
	in := setup(t)
	const launches = 200
	var leftovers []string
	for i := 0; i < launches; i++ {
		d := in.startDirect(t, directOpts{})
		d.sendSpec(t, in, "import time; time.sleep(30)")
		if _, err := d.releaseW.Write([]byte{1}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rand.IntN(60_000)) * time.Microsecond)
		_ = d.cmd.Process.Kill()
		<-d.done
		if i%20 == 19 || i == launches-1 {
			leftovers = append(leftovers, ownerLeftovers(in, 3*time.Second)...)
			if len(leftovers) > 0 {
				break
			}
		}
	}
	if len(leftovers) > 0 {
		t.Fatalf("processes of the namespace owner (uid %d) outlived their killed helper:\n%s", in.ownerUID, strings.Join(leftovers, "\n"))
	}
	// The payload runs as the service uid, which the supervisor can
	// always kill (and whose cgroup it kills); log what is left of it.
	if ps := userProcesses(in.uid); len(ps) > 0 {
		t.Logf("processes of the service uid left (the supervisor's to kill): %d", len(ps))
		_ = exec.Command("pkill", "-KILL", "-u", strconv.Itoa(in.uid)).Run()
	}
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
