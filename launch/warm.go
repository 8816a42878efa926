package launch

import (
	"context"
	"errors"
	"os"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/errdefs"
)

// KernelWarm is Request.Kernel of a warm sandbox's build: its cgroup is a
// background one (cgroup.Limits.Background) until an exec takes it.
const KernelWarm = "warm"

// ErrWarmGone is Run's answer when the warm sandbox can no longer take a
// request (it died while idle, was stopped, or was taken already) and
// nothing of the request was handed to it: the caller launches cold.
var ErrWarmGone = errors.New("the warm sandbox is gone")

// errWarmDestroyed is the cancellation cause of a warm sandbox destroyed
// without (or instead of) a request.
var errWarmDestroyed = errors.New("the warm sandbox was destroyed by its pool")

// Warm is a one-shot launch started before its request: the same prepare
// (an empty one-shot workspace), cgroup, helper, namespaces, profile and
// bwrap as any exec, running a warm stub (kernel/runners) that waits for
// one request header on stdin. Its launch records (prepare, the helper's
// steps) are under its own launch id. It is taken by at most one request
// (Run) and never reused: after that request, or Stop, every process of it
// is reaped and its workspace removed.
type Warm struct {
	h       *HelperLauncher
	req     Request // the build request; ExecID is the launch id
	pw      *prepared
	hp      *helperProc
	cleanup func()
	bound   chan struct{} // closed once output is captured (Run or destroy)
	dead    chan struct{} // closed if the helper exited while idle
	claimed chan struct{} // closed by the one Run or Stop that owns it
	done    chan struct{} // closed once it is reaped
	ready   chan struct{} // closed once bwrap has reported the sandbox's pid 1
	watched chan struct{} // closed once watchReady has let go of hp.pidfd
	once    sync.Once
}

// StartWarm builds a warm sandbox for req, whose Code is a warm stub and
// whose Env, Stdin, Files and Artifacts are empty. It returns once the
// helper runs; the stub then starts its interpreter and waits.
func (h *HelperLauncher) StartWarm(req Request) (*Warm, error) {
	pw, err := h.prepare(req)
	if err != nil {
		return nil, err
	}
	w := &Warm{h: h, req: req, pw: pw, bound: make(chan struct{}), dead: make(chan struct{}),
		claimed: make(chan struct{}), done: make(chan struct{}), ready: make(chan struct{}), watched: make(chan struct{})}
	hp, cleanup, err := h.startHelper(req, buildSpec(req, pw.name), helperIO{keepStdin: true, bound: w.bound})
	if err != nil {
		pw.close()
		_ = h.audit(req, audit.Record{Step: audit.StepReap, OK: false, Error: err.Error()})
		return nil, err
	}
	w.hp, w.cleanup = hp, cleanup
	go w.watchIdle()
	go w.watchReady()
	return w, nil
}

// watchReady closes ready once bwrap has reported the sandbox's pid 1 (the
// helper's steps are done and the stub is starting). The pidfd goes back
// for teardown; Run and destroy wait for watched before anything reads it.
func (w *Warm) watchReady() {
	defer close(w.watched)
	select {
	case fd := <-w.hp.pidfd:
		w.hp.pidfd <- fd
		if fd >= 0 {
			close(w.ready)
		}
	case <-w.claimed:
	}
}

// Ready is closed once the sandbox is built: bwrap runs the stub in the
// finished sandbox. A sandbox taken before is still faster than a cold
// launch, but its exec waits for the rest of the build.
func (w *Warm) Ready() <-chan struct{} { return w.ready }

// watchIdle marks the sandbox dead if its helper exits before a request
// claims it. The wait status goes back for supervise (the channel holds one).
func (w *Warm) watchIdle() {
	select {
	case ws := <-w.hp.waited:
		w.hp.waited <- ws
		close(w.dead)
	case <-w.claimed:
	}
}

// ID is the warm launch's id (its launch records' exec id).
func (w *Warm) ID() string { return w.req.ExecID }

// Dead is closed if the sandbox ended while idle: it can only be stopped.
func (w *Warm) Dead() <-chan struct{} { return w.dead }

// Done is closed once the sandbox is reaped.
func (w *Warm) Done() <-chan struct{} { return w.done }

// claim makes the caller the sandbox's one owner.
func (w *Warm) claim() bool {
	ok := false
	w.once.Do(func() { ok = true; close(w.claimed) })
	return ok
}

// Run hands ex to the sandbox and waits for it exactly as Launch waits for
// a cold one-shot exec: ex's files are staged into the workspace through
// the same openat2 path, the cgroup's memory, pids and CPU limits are set
// to ex's, the warm_exec record (linking ex to the launch id) is written,
// and only then does the stub get header (the code and env) followed by
// ex.Stdin and EOF. The timeout, output caps, quota and artifacts are ex's;
// ex's trail ends with its reap record. ErrWarmGone means nothing was
// handed over (launch cold); any other error is ex's launch error.
func (w *Warm) Run(ctx context.Context, ex Request, header []byte) (*ExecResult, error) {
	select {
	case <-w.dead:
		w.Stop()
		return nil, ErrWarmGone
	default:
	}
	if !w.claim() {
		return nil, ErrWarmGone
	}
	<-w.watched
	start := time.Now()
	if err := w.hand(ex, header); err != nil {
		w.destroy()
		return nil, err
	}
	defer close(w.done)
	defer w.pw.close()
	timeout := ex.Limits.Timeout()
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	q := w.pw.quotaCheck(ex)
	hr, err := w.h.finishHelper(ctx, w.hp, w.cleanup, timeout, q)
	if err != nil {
		_ = w.h.audit(ex, audit.Record{Step: audit.StepReap, OK: false, Error: err.Error(),
			Facts: &facts.Reap{Warm: true, LaunchID: w.ID()}})
		w.reapLaunch(hr, err, ex.ExecID)
		return nil, err
	}
	res, err := w.h.conclude(ex, hr, q, time.Since(start), func(f *facts.Reap) { f.Warm, f.LaunchID = true, w.ID() })
	w.reapLaunch(hr, err, ex.ExecID)
	if err == nil && len(ex.Artifacts) > 0 {
		w.h.collect(w.pw.ws, ex, res)
	}
	return res, err
}

// hand stages ex's files, sets its limits, audits the take and binds the
// output; then the header and stdin go to the stub. Nothing of ex runs
// before its warm_exec record is in the log.
func (w *Warm) hand(ex Request, header []byte) error {
	staged, serr := w.h.stage(w.pw.ws, ex)
	if serr != nil {
		return w.h.prepareFailed(ex, serr)
	}
	if cg := w.hp.cg; cg != nil {
		// The exec's limits, and the default CPU weight: the build ran in
		// the background, the exec does not.
		if err := cg.SetLimits(cgroupLimits(ex.Limits)); err != nil {
			return errdefs.New(errdefs.ErrUnavailable, "set the warm sandbox's cgroup limits", "check the delegated cgroup subtree (sandboxctl doctor)", err)
		}
		// The exec's usage starts here: the build's CPU is subtracted at
		// the reap, its memory peak reset (where the kernel cannot, v2
		// before 6.12, the peak includes the build: the interpreter the
		// exec runs in).
		w.hp.usageBase = cg.Usage()
		w.hp.usageBase.PeakBytes = 0
		if err := cg.ResetPeak(); err != nil {
			w.h.cfg.Log.Debug("reset the warm sandbox's memory peak", "exec_id", ex.ExecID, "err", err)
		}
	}
	f := &facts.WarmExec{LaunchID: w.ID(), Runtime: ex.Runtime, Files: len(ex.Files), FileBytes: staged,
		Limits: LimitsFacts(w.h.AppliedLimits(ex.Limits)), Warm: true}
	if err := w.h.audit(ex, audit.Record{Step: audit.StepWarmExec, OK: true, Facts: f}); err != nil {
		return errdefs.New(errdefs.ErrUnavailable, "the audit log cannot be written, so nothing runs", "check the audit log's disk and run `sandboxctl audit verify`", err)
	}
	hp := w.hp
	hp.stdout.limit, hp.stderr.limit = ex.Limits.OutputLimitBytes, ex.Limits.OutputLimitBytes
	if out := ex.Output; out != nil {
		hp.stdout.onChunk = func(p []byte) { out("stdout", p) }
		hp.stderr.onChunk = func(p []byte) { out("stderr", p) }
	}
	close(w.bound)
	go func() {
		// A stub that died takes the write's EPIPE with it; supervise
		// sees its exit.
		if _, err := hp.pipes.stdinW.Write(header); err == nil && len(ex.Stdin) > 0 {
			_, _ = hp.pipes.stdinW.Write(ex.Stdin)
		}
		hp.pipes.close(hp.pipes.stdinW)
	}()
	return nil
}

// Stop destroys an idle sandbox (a drained or stale one, or at shutdown)
// and waits until it is reaped; a sandbox a request took is waited for.
func (w *Warm) Stop() {
	if w.claim() {
		w.destroy()
		return
	}
	<-w.done
}

// destroy kills the sandbox, reaps it and ends its launch trail. A pool
// destroys sandboxes while they are still being built (at shutdown, on a
// stale fingerprint), so it first waits for bwrap to report the sandbox's
// pid 1: killing the helper before that leaves bwrap to its parent-death
// signal, and a bwrap caught between its setns into the user namespace
// (which clears the signal, as any change of capabilities does) and its
// own --die-with-parent outlives the helper as the namespace owner's uid,
// out of the supervisor's reach, holding the status pipe teardown reads.
func (w *Warm) destroy() {
	defer close(w.done)
	<-w.watched
	w.awaitStarted(startWait)
	select {
	case <-w.bound:
	default:
		close(w.bound)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errWarmDestroyed)
	hr, err := w.h.finishHelper(ctx, w.hp, w.cleanup, 0, quotaCheck{})
	w.pw.close()
	w.reapLaunch(hr, err, "")
}

// startWait bounds destroy's wait for a sandbox still being built.
const startWait = 10 * time.Second

// awaitStarted waits, up to d, until bwrap has reported the sandbox's pid
// 1 (the pidfd kill then takes the whole pid namespace) or the helper has
// exited. What it takes from a channel it puts back for teardown.
func (w *Warm) awaitStarted(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case fd := <-w.hp.pidfd:
		w.hp.pidfd <- fd
	case ws := <-w.hp.waited:
		w.hp.waited <- ws
	case <-t.C:
	}
}

// reapLaunch ends the warm launch's own trail: how the sandbox ended and,
// when a request took it, which exec (taken_by).
func (w *Warm) reapLaunch(hr *helperRun, err error, takenBy string) {
	f := &facts.Reap{Warm: true, TakenBy: takenBy}
	if hr != nil {
		f.Stopped, f.PIDNamespaceGone, f.CgroupProcessesLeft = hr.stop.String(), hr.reaperGone, hr.cgroupLeft
	}
	r := audit.Record{Step: audit.StepReap, OK: err == nil, Facts: f}
	if err != nil {
		r.Error = err.Error()
	}
	_ = w.h.audit(w.req, r)
}

// drainBound captures stdout and stderr as an exec's once bound is closed
// (Run has set the request's output limit and streaming); until then a
// warm stub writes nothing. Closed without a request, the streams are
// drained with the build request's limit, so teardown's wait ends.
func (hp *helperProc) drainBound(bound <-chan struct{}) {
	for _, s := range []struct {
		c *capturedStream
		r *os.File
	}{{&hp.stdout, hp.pipes.stdoutR}, {&hp.stderr, hp.pipes.stderrR}} {
		go func() {
			<-bound
			s.c.drain(s.r)
			hp.outDone <- struct{}{}
		}()
	}
}
