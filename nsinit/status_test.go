package nsinit

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/nsinit/prelude/keepertest"
	"github.com/sandboxd/sandboxd/nsinit/spec"
)

// TestLifeBytesMatchKeeper: the bytes the helper writes are the ones the
// keeper (C, keeper.h) reads.
func TestLifeBytesMatchKeeper(t *testing.T) {
	if lifeClean != keepertest.Clean || lifeScan != keepertest.Scan {
		t.Fatalf("helper writes clean %q, scan %q; keeper reads %q, %q", lifeClean, lifeScan, keepertest.Clean, keepertest.Scan)
	}
}

// relayChildEnv makes the test binary, started by TestHelperExitsAsBwrap,
// run the helper's steps with a real child in bwrap's place (relayChild)
// instead of the tests.
const relayChildEnv = "SANDBOXD_TEST_RELAY_SCRIPT"

// relayOwnerEnv is the uid relayChild takes for the namespace owner's.
const relayOwnerEnv = "SANDBOXD_TEST_RELAY_OWNER"

func TestMain(m *testing.M) {
	if script := os.Getenv(relayChildEnv); script != "" {
		os.Exit(relayChild(script))
	}
	os.Exit(m.Run())
}

// relayChild runs the launch's steps as Main does: the set-up steps pass
// and the exec step relays a real child, a shell running script, in
// bwrap's place. Its status is this process's exit status.
func relayChild(script string) int {
	ok := func() int { return 0 }
	execStep := func() int {
		// fd 7, when open, stands for the keeper's life pipe, and this
		// process is a subreaper, as the exec step makes it before bwrap.
		l := &launch{}
		l.pre.OwnerUID, _ = strconv.Atoi(os.Getenv(relayOwnerEnv))
		if _, err := unix.FcntlInt(7, unix.F_GETFD, 0); err == nil {
			unix.CloseOnExec(7)
			l.pre.LifeFD = 7
		}
		l.becomeSubreaper()
		p, err := os.StartProcess("/bin/sh", []string{"sh", "-c", script}, &os.ProcAttr{Files: []*os.File{nil, os.Stderr, os.Stderr}})
		if err != nil {
			return 99
		}
		return l.relay(p.Pid)
	}
	return runSteps([]func() int{ok, ok, ok, ok, execStep})
}

// TestHelperExitsAsBwrap: the helper's own status is bwrap's, as is: 0
// after a payload that exited 0, n after n, and death by the same signal.
func TestHelperExitsAsBwrap(t *testing.T) {
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	for _, tc := range []struct {
		name, script string
		status       int
		signal       syscall.Signal
	}{
		{"exit 0", "exit 0", 0, 0},
		{"exit 3", "exit 3", 3, 0},
		{"exit 125", "exit 125", 125, 0},
		{"SIGKILL", "kill -KILL $$", -1, syscall.SIGKILL},
		{"SIGTERM", "kill -TERM $$", -1, syscall.SIGTERM},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = []string{relayChildEnv + "=" + tc.script}
			// fds 3-6 taken, as the helper's are: the relay closes 4-6.
			cmd.ExtraFiles = []*os.File{devnull, devnull, devnull, devnull}
			err := cmd.Run()
			var ee *exec.ExitError
			if err != nil && !errors.As(err, &ee) {
				t.Fatalf("run: %v", err)
			}
			ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if tc.signal != 0 {
				if !ws.Signaled() || ws.Signal() != tc.signal {
					t.Fatalf("helper ended %v, want killed by %v", cmd.ProcessState, tc.signal)
				}
				return
			}
			if ws.Signaled() || ws.ExitStatus() != tc.status {
				t.Fatalf("helper ended %v, want exit status %d", cmd.ProcessState, tc.status)
			}
		})
	}
}

// TestRunStepsStopsAtFirstFailure: a failing set-up step's status is the
// helper's, and no later step runs.
func TestRunStepsStopsAtFirstFailure(t *testing.T) {
	var ran []int
	step := func(i, status int) func() int {
		return func() int { ran = append(ran, i); return status }
	}
	got := runSteps([]func() int{step(0, 0), step(1, spec.ExitNetwork), step(2, 0), step(3, 0), step(4, 0)})
	if got != spec.ExitNetwork || len(ran) != 2 {
		t.Fatalf("status %d after steps %v, want %d after [0 1]", got, ran, spec.ExitNetwork)
	}
}

// TestRelayTellsKeeperCleanEnd: the relay writes the clean-end byte to the
// keeper's life pipe (so that the keeper skips its /proc scan) only when
// bwrap exited on its own and left nothing behind; a child that bwrap
// left orphaned, or a bwrap killed by a signal, ends with the scan byte
// and the keeper scans and kills the namespace at once. (A bare EOF is
// kept for a helper that died: the keeper waits for it to be gone first.)
func TestRelayTellsKeeperCleanEnd(t *testing.T) {
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	me, other := os.Getuid(), 4000000
	for _, tc := range []struct {
		name, script string
		owner        int // the namespace owner's uid
		clean        bool
	}{
		{"exit 0", "exit 0", other, true},
		{"exit 3", "exit 3", other, true},
		{"a child left running, not as the owner (the sandbox's pid 1)", "sleep 0.3 & exit 0", other, true},
		{"a child left running as the owner", "sleep 0.3 & exit 0", me, false},
		{"killed by SIGKILL", "kill -KILL $$", other, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = []string{relayChildEnv + "=" + tc.script, relayOwnerEnv + "=" + strconv.Itoa(tc.owner)}
			cmd.ExtraFiles = []*os.File{devnull, devnull, devnull, devnull, w}
			_ = cmd.Run()
			w.Close()
			got, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			want := []byte{lifeScan}
			if tc.clean {
				want = []byte{lifeClean}
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("life pipe carried %q after %q, want %q", got, tc.script, want)
			}
		})
	}
}
