package launch

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/cgroup"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/workspace"
)

// Starter starts long-lived launches (a session's kernel, a process-mode
// exec run through its runner). HelperLauncher implements it; a Launcher
// without it (a test fake) runs no kernels.
type Starter interface {
	Start(ctx context.Context, req Request, stdout func(io.Reader)) (*Sandbox, error)
}

// errStopped is the cancellation cause of a sandbox stopped by its owner.
var errStopped = errors.New("the sandbox was stopped by the supervisor")

// Sandbox is a running long-lived launch: the same phases, namespaces,
// profile, cgroup (its own, for its whole life), workspace and uid as an
// exec, but the caller talks to the payload while it runs and decides when
// it ends. Its launch records (prepare, the helper's steps, reap) are under
// req.ExecID, the sandbox's launch id.
type Sandbox struct {
	h      *HelperLauncher
	req    Request
	hp     *helperProc
	cancel context.CancelCauseFunc
	ctx    context.Context // done once the sandbox is stopping
	done   chan struct{}
	exit   SandboxExit
	quota  quotaCheck // the workspace's, measured at the reap and by OverQuota
	// finalUsage is the cgroup's counters at the reap (MeterExec's
	// reading once the cgroup is gone); set before done is closed.
	finalUsage cgroup.Usage
}

// SandboxExit is how a sandbox ended, known once Done is closed.
type SandboxExit struct {
	// Result is the payload's end as a process exec's result (its stdout
	// is empty: the caller read it), with the artifacts req asked for;
	// nil when the launch failed (Err).
	Result    *ExecResult
	Err       error
	Stderr    string // the payload's stderr (bounded by the output limit)
	OOMKilled bool
	Stopped   string // exited, cancelled, quota, permit
	// QuotaExceeded: the workspace went over its quota (or could not be
	// measured, QuotaErr says why) and the sandbox was stopped or found so.
	QuotaExceeded bool
	QuotaErr      string
}

// Start launches req's payload and returns once the helper runs. stdin is
// the caller's (Stdin); stdout is read by the stdout func, which must
// return when reading fails or once Stopping is closed; stderr is kept,
// bounded by req.Limits.OutputLimitBytes. req.Stdin is not used. The
// sandbox ends when its payload exits, when Stop is called, when ctx ends,
// or when the workspace goes over its quota; Done is closed once every
// process of it is reaped and the reap record written.
func (h *HelperLauncher) Start(ctx context.Context, req Request, stdout func(io.Reader)) (*Sandbox, error) {
	pw, err := h.prepare(req)
	if err != nil {
		return nil, err
	}
	hp, cleanup, err := h.startHelper(req, buildSpec(req, pw.name), helperIO{keepStdin: true, stdout: stdout})
	if err != nil {
		pw.close()
		_ = h.audit(req, audit.Record{Step: audit.StepReap, OK: false, Error: err.Error()})
		return nil, err
	}
	sctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	sb := &Sandbox{h: h, req: req, hp: hp, cancel: cancel, ctx: sctx, done: make(chan struct{}), quota: pw.quotaCheck(req)}
	go func() {
		select {
		case <-ctx.Done(): // the owner's context (the supervisor's life)
			cancel(context.Cause(ctx))
		case <-sb.done:
		}
	}()
	go sb.supervise(sctx, pw, cleanup)
	return sb, nil
}

// supervise waits for the sandbox to end, reaps it and writes its reap
// record, as run does for an exec.
func (sb *Sandbox) supervise(ctx context.Context, pw *prepared, cleanup func()) {
	defer close(sb.done)
	defer sb.cancel(errStopped)
	defer pw.close()
	start := time.Now()
	hr, err := sb.h.finishHelper(ctx, sb.hp, cleanup, 0, pw.quotaCheck(sb.req))
	sb.exit.Stderr = sb.hp.stderr.String()
	if hr != nil {
		sb.exit.OOMKilled, sb.exit.Stopped = hr.oomKilled, hr.stop.String()
		sb.finalUsage = hr.cgUsage
	}
	if err == nil {
		if !hr.quotaExceeded {
			hr.quotaExceeded, hr.quotaErr = pw.quotaCheck(sb.req).over()
		}
		sb.exit.QuotaExceeded = hr.quotaExceeded
		if hr.quotaErr != nil {
			sb.exit.QuotaErr = hr.quotaErr.Error()
		}
		if le := sb.h.refusal(hr); le != nil {
			err = le
		}
	}
	if err != nil {
		sb.exit.Err = err
		_ = sb.h.audit(sb.req, audit.Record{Step: audit.StepReap, OK: false, Error: err.Error()})
		return
	}
	res := sb.h.result(sb.req, hr, time.Since(start))
	if errors.Is(context.Cause(ctx), errStopped) && hr.stop == stopCancelled {
		res.Signal = nil // stopped by its owner: not the payload's outcome
	}
	sb.exit.Result = res
	_ = sb.h.audit(sb.req, audit.Record{Step: audit.StepReap, OK: true, Facts: reapFacts(res, hr)})
	if len(sb.req.Artifacts) > 0 { // before a one-shot workspace is removed
		sb.h.collect(pw.ws, sb.req, res)
	}
}

// ID is the sandbox's launch id (its audit records' exec id).
func (sb *Sandbox) ID() string { return sb.req.ExecID }

// Stdin is the payload's standard input (the kernel channel's request side).
func (sb *Sandbox) Stdin() io.Writer { return sb.hp.pipes.stdinW }

// Stopping is closed once the sandbox is being stopped or has ended: the
// stdout func must not block past it.
func (sb *Sandbox) Stopping() <-chan struct{} { return sb.ctx.Done() }

// Done is closed once the sandbox is reaped.
func (sb *Sandbox) Done() <-chan struct{} { return sb.done }

// Exit is how the sandbox ended; valid once Done is closed.
func (sb *Sandbox) Exit() SandboxExit {
	<-sb.done
	return sb.exit
}

// MemoryBytes is the sandbox cgroup's peak memory use (0 without cgroups).
func (sb *Sandbox) MemoryBytes() int64 {
	if sb.hp.cg == nil {
		return 0
	}
	return sb.hp.cg.MemoryPeak()
}

// CgroupUsage is the sandbox cgroup's CPU time and memory peak so far, and
// false without a cgroup. A kernel exec's usage is the difference of two
// readings (at its start and end) for the CPU; for the peak, ResetPeak
// first (Sandbox.ResetPeak).
func (sb *Sandbox) CgroupUsage() (cgroup.Usage, bool) {
	if sb.hp.cg == nil {
		return cgroup.Usage{}, false
	}
	return sb.hp.cg.Usage(), true
}

// ResetPeak starts the sandbox cgroup's memory peak afresh (see
// cgroup.Exec.ResetPeak for the kernels that cannot).
func (sb *Sandbox) ResetPeak() error {
	if sb.hp.cg == nil {
		return nil
	}
	return sb.hp.cg.ResetPeak()
}

// ExecFacts are the sandbox helper's exec step facts, the confinement
// every exec run in the sandbox attests (Attest); nil before the helper's
// exec report was relayed, or for a nil sandbox.
func (sb *Sandbox) ExecFacts() *facts.Exec {
	if sb == nil || sb.hp == nil {
		return nil
	}
	return sb.hp.attested.Load()
}

// MeterExec starts measuring one exec run in the sandbox (a session
// kernel's exec; a kernel runs one at a time) and returns the function
// that ends the measure with the exec's usage (API.md, usage): cpu_ms is
// the growth of the sandbox cgroup's CPU counter over the exec; max_rss_kb
// the cgroup's memory peak since the exec began, its peak reset at the
// start (v1; v2 on Linux 6.12+), else the peak since the sandbox started
// (source cgroup_lifetime_peak). Without a cgroup nothing measures a
// running sandbox's exec: the source is none.
func (sb *Sandbox) MeterExec() (end func() Usage) {
	cg := sb.hp.cg
	if cg == nil {
		return func() Usage { return Usage{Source: api.UsageSourceNone} }
	}
	reset := cg.ResetPeak() == nil
	base := cg.Usage()
	base.PeakBytes = 0
	return func() Usage {
		now := sb.lastUsage(cg)
		u := mergeUsage(now, base, Usage{})
		switch {
		case !now.CPUKnown && !now.PeakKnown:
			u.Source = api.UsageSourceNone
		case u.Source == api.UsageSourceCgroup && !reset:
			u.Source = api.UsageSourceLifetimePeak
		}
		return u
	}
}

// lastUsage reads the sandbox cgroup's counters now or, once the sandbox
// has been reaped (an exec that ended its kernel), as its teardown read
// them last, before the cgroup was removed.
func (sb *Sandbox) lastUsage(cg *cgroup.Exec) cgroup.Usage {
	select {
	case <-sb.done:
		return sb.finalUsage
	default:
		return cg.Usage()
	}
}

// OOMKilled reports whether the kernel OOM-killed a process of the
// sandbox so far (a kernel whose caller code was killed may live on).
func (sb *Sandbox) OOMKilled() bool { return sb.hp.cg != nil && sb.hp.cg.OOMKilled() }

// OverQuota measures the workspace now. The watcher polls, so a kernel exec
// that writes past the quota and ends before the next poll is caught only
// here -- as a process exec is by the measurement at its reap. It fails
// closed like the watcher (an unmeasurable workspace is over, err says why).
func (sb *Sandbox) OverQuota() (bool, error) { return sb.quota.over() }

// Stop kills every process of the sandbox (its pid 1 first, as for a
// timed-out exec) and waits until it is reaped. A graceful end (an
// interrupt, a shutdown request) is the caller's to try first, over the
// channel.
func (sb *Sandbox) Stop() SandboxExit {
	sb.cancel(errStopped)
	return sb.Exit()
}

// StopErr is the launch error of a sandbox that ended before its payload
// answered: the exit's error or, for a payload that exited, a description.
func (e SandboxExit) StopErr() error {
	if e.Err != nil {
		return e.Err
	}
	return errdefs.New(errdefs.ErrInternal, "the sandbox ended: "+e.Stopped, "", nil)
}

// CollectArtifacts adds the artifacts req asks for to res, from req's
// workspace (a session's, or the sandbox's one-shot one while it runs), and
// audits them under req.ExecID.
func (h *HelperLauncher) CollectArtifacts(req Request, wsName string, res *ExecResult) {
	if len(req.Artifacts) == 0 {
		return
	}
	ws, err := workspace.Open(filepath.Join(h.cfg.WorkspaceRoot, wsName), h.cfg.QuotaBytes)
	if err != nil {
		h.cfg.Log.Error("open workspace for artifacts", "exec_id", req.ExecID, "err", err)
		return
	}
	defer ws.Close()
	h.collect(ws, req, res)
}

// ArtifactLimits are the limits displays count against as well.
func (h *HelperLauncher) ArtifactLimits() workspace.ArtifactLimits {
	l := h.cfg.Artifacts
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = workspace.DefaultMaxArtifactFileBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = workspace.DefaultMaxArtifactFiles
	}
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = workspace.DefaultMaxArtifactTotalBytes
	}
	return l
}

// Stage writes files into a session's workspace before a kernel exec,
// within the quota.
func (h *HelperLauncher) Stage(req Request) error {
	ws, err := workspace.Open(filepath.Join(h.cfg.WorkspaceRoot, req.SessionWorkspace), h.cfg.QuotaBytes)
	if err != nil {
		return errdefs.New(errdefs.ErrInternal, "open workspace", "", err)
	}
	defer ws.Close()
	if _, serr := h.stage(ws, req); serr != nil {
		return serr
	}
	return nil
}
