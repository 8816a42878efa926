package launch

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/cgroup"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/nsinit/spec"
)

// Exit statuses of the helper's own process that mean it never ran: the
// shell conventions exec.Cmd's callers and the kernel's binfmt use.
const (
	exitNotExecutable = 126 // found but could not be executed
	exitNotFound      = 127 // not found
)

// killGrace is how long teardown waits for the helper to exit once the
// sandbox's pid 1 is dead before it kills the helper itself.
const killGrace = 2 * time.Second

// fixInstallHelper is the operator's fix for a helper that cannot start.
const fixInstallHelper = "install the helper with `make install` and run `sandboxctl doctor` (an exec refused with \"operation not permitted\" means the supervisor's bounding set lacks CAP_SYS_ADMIN or CAP_NET_ADMIN)"

// waitStatus is what the helper's wait returned: its exit status and
// resource usage, or why waiting failed.
type waitStatus struct {
	err   error
	state *os.ProcessState
}

// helperProc is one run of sandboxd-nsinit, from its pipes to its reap.
// Its phases are methods, called in this order by HelperLauncher.runHelper:
// newHelperProc (pipes), start, feed, place, relayReports, watchStatus,
// drainOutput, supervise, teardown.
type helperProc struct {
	path string
	cg   *cgroup.Exec // nil without cgroups
	// placed: the helper is in cg already (born there on v2, or a
	// pre-started helper moved there ahead of time on v1).
	placed bool
	// usageBase is the cgroup's usage when a warm sandbox was taken: its
	// build's CPU is not the exec's (teardown subtracts it).
	usageBase cgroup.Usage
	pipes     *helperPipes
	cmd       *exec.Cmd
	// grace is killGrace; tests shorten it.
	grace time.Duration

	waited  chan waitStatus // from the locked thread that started the helper
	reports chan relayed    // relayReports' result, at EOF of fd 4
	// attested is the exec step's facts once the relay saw the whole
	// permit sequence (nil before, or when it broke).
	attested  atomic.Pointer[facts.Exec]
	violation chan error        // the first permit violation, as soon as it is seen
	status    chan bwrapOutcome // watchStatus' result, at EOF of fd 5
	pidfd     chan int          // the sandbox's pid 1 as a pidfd, or -1
	outDone   chan struct{}

	stdout, stderr capturedStream
	placeErr       error      // place's error, judged after the reap
	wait           waitStatus // set once the helper has been waited for
	begin          time.Time
	pooled         bool        // a pre-started helper (helperpool.go)
	times          launchTimes // where the launch's time went
}

// launchTimes are the moments of one launch, for the reap's launch_us.
type launchTimes struct {
	start, acquired, released, exec, exited, done time.Time
	barrier                                       time.Duration
}

// us renders t as the reap's facts.LaunchUS; a moment not reached counts 0.
func (t launchTimes) us() *facts.LaunchUS {
	d := func(a, b time.Time) int64 {
		if a.IsZero() || b.IsZero() || b.Before(a) {
			return 0
		}
		return b.Sub(a).Microseconds()
	}
	return &facts.LaunchUS{Acquire: d(t.start, t.acquired), Barrier: t.barrier.Microseconds(), Place: d(t.acquired, t.released),
		ToExec: d(t.released, t.exec), Run: d(t.exec, t.exited), Teardown: d(t.exited, t.done)}
}

// newHelperProc makes the pipes of one helper run (phase "pipes").
func newHelperProc(path string, cg *cgroup.Exec, outputLimit int64) (*helperProc, error) {
	p, err := newPipes()
	if err != nil {
		return nil, errdefs.New(errdefs.ErrInternal, "create the helper's pipes", "", err)
	}
	hp := &helperProc{
		path: path, cg: cg, pipes: p, grace: killGrace,
		waited: make(chan waitStatus, 1), reports: make(chan relayed, 1),
		violation: make(chan error, 1), status: make(chan bwrapOutcome, 1),
		pidfd: make(chan int, 1), outDone: make(chan struct{}, 2),
	}
	hp.stdout.limit, hp.stderr.limit = outputLimit, outputLimit
	return hp, nil
}

// start forks the helper (phase "start"). On cgroup v2 it is born in the
// exec's cgroup (CLONE_INTO_CGROUP): nothing of it ever runs outside.
func (hp *helperProc) start() error {
	hp.cmd = &exec.Cmd{
		Path:       hp.path,
		Args:       []string{"sandboxd-nsinit"},
		Env:        []string{},
		Dir:        "/",
		Stdin:      hp.pipes.stdinR,
		Stdout:     hp.pipes.stdoutW,
		Stderr:     hp.pipes.stderrW,
		ExtraFiles: hp.pipes.extraFiles(), // fds 3, 4, 5, 6
		SysProcAttr: &syscall.SysProcAttr{
			// The helper re-arms this after its exec (file capabilities
			// clear it); it covers the window before.
			Pdeathsig: syscall.SIGKILL,
		},
	}
	if hp.cg != nil && hp.cg.Dir() != "" {
		fd, err := unix.Open(hp.cg.Dir(), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return errdefs.New(errdefs.ErrUnavailable, "open the exec's cgroup", "check the delegated cgroup subtree (sandboxctl doctor)", err)
		}
		defer unix.Close(fd) // the child has it from the clone on
		hp.cmd.SysProcAttr.UseCgroupFD, hp.cmd.SysProcAttr.CgroupFD = true, fd
		hp.placed = true
	}
	err := hp.fork()
	if err != nil && hp.cmd.SysProcAttr.UseCgroupFD && cloneIntoUnsupported(err) {
		// A kernel before 5.7 has no CLONE_INTO_CGROUP (clone3 fails with
		// ENOSYS, or E2BIG for its longer argument): fork as before and
		// let place move the helper before its release, as on v1.
		hp.cmd = &exec.Cmd{Path: hp.cmd.Path, Args: hp.cmd.Args, Env: hp.cmd.Env, Dir: hp.cmd.Dir,
			Stdin: hp.cmd.Stdin, Stdout: hp.cmd.Stdout, Stderr: hp.cmd.Stderr, ExtraFiles: hp.cmd.ExtraFiles,
			SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}}
		hp.placed = false
		err = hp.fork()
	}
	if err != nil {
		return errdefs.New(errdefs.ErrUnavailable, "start sandbox helper "+hp.path, fixInstallHelper, err)
	}
	hp.begin = time.Now()
	hp.pipes.closeChildEnds()
	return nil
}

// cloneIntoUnsupported reports whether a fork with CLONE_INTO_CGROUP
// failed because the kernel lacks it (before Linux 5.7).
func cloneIntoUnsupported(err error) bool {
	return errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.E2BIG)
}

// fork starts hp.cmd and waits for it on a goroutine that reports to
// hp.waited.
func (hp *helperProc) fork() error {
	started := make(chan error, 1)
	// Pdeathsig fires when the thread that forked the child exits, not the
	// process (golang/go#27505): start and wait on one locked thread, so
	// the runtime cannot retire it while the helper lives.
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		// Registered as ours before any scan of adopted children can see
		// it (adopted.go): its status is this Wait's.
		if err := ownChildren.forked(func() (int, error) {
			if err := hp.cmd.Start(); err != nil {
				return 0, err
			}
			return hp.cmd.Process.Pid, nil
		}); err != nil {
			started <- err
			return
		}
		started <- nil
		err := hp.cmd.Wait()
		ownChildren.waited(hp.cmd.Process.Pid)
		hp.waited <- waitStatus{err: err, state: hp.cmd.ProcessState}
	}()
	return <-started
}

// feed writes the spec and the payload's stdin, each from its own
// goroutine: a helper that stops reading must not block the launch.
func (hp *helperProc) feed(encodedSpec, stdin []byte) {
	go func() {
		_, _ = hp.pipes.specW.Write(encodedSpec)
		hp.pipes.close(hp.pipes.specW)
	}()
	go func() {
		if len(stdin) > 0 {
			_, _ = hp.pipes.stdinW.Write(stdin)
		}
		hp.pipes.close(hp.pipes.stdinW)
	}()
}

// place readies the helper for its payload, then releases it (phase
// "place"): it moves the helper into the exec's cgroup on v1 unless it is
// there already, gives a pre-started helper's cgroup the exec's id and
// limits (claim), and makes the exec's records so far durable (barrier).
// The helper execs bwrap only after the release byte, so everything of the
// sandbox starts inside the cgroup, under its limits and after the
// barrier; only the prelude's short-lived holder does not. A v1 move waits
// for an RCU grace period (cgroup_threadgroup_rwsem), 5-12 ms here: a
// pre-started helper (helperpool.go) was moved ahead of time. The release
// pipe's write end stays open until the helper is reaped (closeAll): a
// hang-up on fd 6 then means the supervisor died, never that the launch
// was released. A failure kills the helper unreleased: nothing ran.
func (hp *helperProc) place(claim, barrier func() error) error {
	if hp.cg != nil && !hp.placed {
		if err := hp.cg.Add(hp.cmd.Process.Pid); err != nil {
			_ = hp.cmd.Process.Kill()
			return errdefs.New(errdefs.ErrUnavailable, "place the helper in the exec's cgroup", "check the delegated cgroup subtree (sandboxctl doctor)", err)
		}
	}
	if err := claim(); err != nil {
		_ = hp.cmd.Process.Kill()
		return err
	}
	b := time.Now()
	err := barrier()
	hp.times.barrier = time.Since(b)
	if err != nil {
		_ = hp.cmd.Process.Kill()
		return errdefs.New(errdefs.ErrUnavailable, "the audit log cannot be made durable, so nothing runs", "check the audit log's disk and run `sandboxctl audit verify`", err)
	}
	// A failed write means the helper is already gone; its reports say why.
	_, _ = hp.pipes.releaseW.Write([]byte{1})
	hp.times.released = time.Now()
	return nil
}

// feedSpec writes the spec only: the stdin pipe stays open for the caller
// (a kernel's channel), closed with the other pipes after the reap.
func (hp *helperProc) feedSpec(encodedSpec []byte) {
	go func() {
		_, _ = hp.pipes.specW.Write(encodedSpec)
		hp.pipes.close(hp.pipes.specW)
	}()
}

// drainOutput captures the payload's stdout and stderr to EOF. With a
// stdout func, that func reads stdout instead (a kernel's channel); what it
// leaves is discarded to EOF, so the payload never blocks on a full pipe
// and teardown's wait for the streams ends.
func (hp *helperProc) drainOutput(stdout func(io.Reader)) {
	go func() {
		if stdout != nil {
			stdout(hp.pipes.stdoutR)
			_, _ = io.Copy(io.Discard, hp.pipes.stdoutR)
		} else {
			hp.stdout.drain(hp.pipes.stdoutR)
		}
		hp.outDone <- struct{}{}
	}()
	go func() { hp.stderr.drain(hp.pipes.stderrR); hp.outDone <- struct{}{} }()
}

// encodeSpec is the spec as the helper reads it on fd 3.
func encodeSpec(sp spec.LaunchSpec) ([]byte, error) {
	encoded, err := json.Marshal(sp)
	if err != nil {
		return nil, errdefs.New(errdefs.ErrInternal, "encode launch spec", "", err)
	}
	if len(encoded) > spec.MaxSize {
		return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("the launch spec is %d bytes, above the helper's limit of %d: send less code or env", len(encoded), spec.MaxSize), "", nil)
	}
	return encoded, nil
}
