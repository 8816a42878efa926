package launch

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/cgroup"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/nsinit/spec"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/workspace"
)

// Config configures a HelperLauncher.
type Config struct {
	// HelperPath is the installed sandboxd-nsinit (with its file capabilities).
	HelperPath string
	// WorkspaceRoot is where per-exec workspaces are made. It must be the
	// helper config's workspace_root: the helper refuses anything else.
	WorkspaceRoot string
	Sink          audit.Sink
	Log           *slog.Logger
	// Cgroups places each exec in its own cgroup with memory, pids and CPU
	// limits; nil or mode "none" means rlimits only.
	Cgroups *cgroup.Manager
	// RequireCgroups refuses every launch (503) when Cgroups is "none":
	// the supervisor sets it unless started with --allow-no-cgroups, so a
	// launcher never runs an exec whose limits nothing enforces unasked.
	RequireCgroups bool
	// QuotaBytes is the workspace disk quota (uploads, staged files, and
	// what the payload writes); 0 disables it.
	QuotaBytes int64
	// Artifacts bounds artifact collection.
	Artifacts workspace.ArtifactLimits
	// HelperPool keeps this many helpers pre-started (helperpool.go);
	// 0 starts each launch's helper on demand.
	HelperPool int
}

// defaultTimeout holds a request that came without a timeout.
const defaultTimeout = 30 * time.Second

// HelperLauncher runs execs through sandboxd-nsinit and bubblewrap.
type HelperLauncher struct {
	cfg   Config
	probe probeCache
	grace time.Duration // killGrace; tests shorten it
	pool  *helperPool   // nil without HelperPool
}

// New checks the workspace root and returns a launcher.
func New(cfg Config) (*HelperLauncher, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if err := os.MkdirAll(cfg.WorkspaceRoot, 0o700); err != nil {
		return nil, fmt.Errorf("create workspace root %q: %w", cfg.WorkspaceRoot, err)
	}
	h := &HelperLauncher{cfg: cfg, grace: killGrace}
	if cfg.HelperPool > 0 {
		h.pool = newHelperPool(cfg.HelperPool, h.preStart, cfg.Log)
	}
	return h, nil
}

// Close kills the pre-started helpers and stops the pool; launches after
// it start their own helpers.
func (h *HelperLauncher) Close() {
	if h.pool != nil {
		h.pool.close()
	}
}

// PooledHelpers is how many pre-started helpers wait (health, benchmark).
func (h *HelperLauncher) PooledHelpers() int {
	if h.pool == nil {
		return 0
	}
	return h.pool.len()
}

// Launch runs one exec: in a fresh workspace that is removed afterwards, or
// in a session's workspace (req.SessionWorkspace), which stays.
func (h *HelperLauncher) Launch(ctx context.Context, req Request) (*ExecResult, error) {
	res, _, err := h.launch(ctx, req)
	return res, err
}

// launch is Launch, also returning the helper's run (nil if it never
// started) for the health probe to classify.
func (h *HelperLauncher) launch(ctx context.Context, req Request) (*ExecResult, *helperRun, error) {
	pw, err := h.prepare(req)
	if err != nil {
		return nil, nil, err
	}
	defer pw.close()
	res, hr, err := h.run(ctx, req, pw.name, pw.quotaCheck(req))
	if err != nil {
		return nil, hr, err
	}
	if len(req.Artifacts) > 0 {
		h.collect(pw.ws, req, res)
	}
	return res, hr, nil
}

// prepared is a launch's workspace, ready and audited (phase "prepare").
type prepared struct {
	name       string // the directory's name below the workspace root
	ws         *workspace.Workspace
	close      func() // closes ws; removes a one-shot workspace
	quotaBytes int64
}

// quota is the quota watcher of the launch; a probe writes nothing, so its
// workspace is not measured.
func (p *prepared) quotaCheck(req Request) quotaCheck {
	q := quotaCheck{limit: p.quotaBytes}
	if !req.Probe {
		q.ws = p.ws
	}
	return q
}

// prepare makes (one-shot) or opens (session) the workspace, stages the
// request's files and writes the prepare record; nothing runs unaudited.
func (h *HelperLauncher) prepare(req Request) (*prepared, error) {
	name, kind := req.ExecID, "one-shot"
	if req.SessionWorkspace != "" {
		name, kind = req.SessionWorkspace, "session"
	}
	dir := filepath.Join(h.cfg.WorkspaceRoot, name)
	remove := func() {}
	if req.SessionWorkspace == "" {
		if err := os.Mkdir(dir, 0o700); err != nil {
			return nil, h.prepareFailed(req, errdefs.New(errdefs.ErrInternal, "create workspace", "", err))
		}
		remove = func() {
			if err := RemoveWorkspace(dir); err != nil {
				h.cfg.Log.Error("remove workspace", "exec_id", req.ExecID, "dir", dir, "err", err)
			}
		}
	}
	ws, err := workspace.Open(dir, h.cfg.QuotaBytes)
	if err != nil {
		remove()
		return nil, h.prepareFailed(req, errdefs.New(errdefs.ErrInternal, "open workspace", "", err))
	}
	pw := &prepared{name: name, ws: ws, quotaBytes: h.cfg.QuotaBytes, close: func() { ws.Close(); remove() }}
	staged, serr := h.stage(ws, req)
	if serr != nil {
		pw.close()
		return nil, h.prepareFailed(req, serr)
	}
	f := &facts.Prepare{
		Workspace: dir, WorkspaceKind: kind, Files: len(req.Files), FileBytes: staged,
		Stdio: "pipes", CgroupMode: h.cgroupMode(), Limits: LimitsFacts(h.AppliedLimits(req.Limits)),
		QuotaBytes: h.cfg.QuotaBytes, Kernel: req.Kernel,
	}
	if err := h.audit(req, audit.Record{Step: audit.StepPrepare, OK: true, Facts: f}); err != nil {
		pw.close()
		return nil, errdefs.New(errdefs.ErrUnavailable, "the audit log cannot be written, so nothing runs", "check the audit log's disk and run `sandboxctl audit verify`", err)
	}
	return pw, nil
}

// stage writes the request's files into the workspace, within the quota.
func (h *HelperLauncher) stage(ws *workspace.Workspace, req Request) (int64, *errdefs.Error) {
	var staged int64
	for _, f := range req.Files {
		n, _, err := ws.Put(f.Path, bytes.NewReader(f.Content), h.cfg.QuotaBytes)
		if err != nil {
			// The workspace error's class decides the answer, as for an
			// upload (ErrTooLarge is 413 on both paths).
			class := errdefs.Class(err)
			return staged, errdefs.New(class, fmt.Sprintf("stage %s: %v", f.Path, err), "", err)
		}
		staged += n
	}
	return staged, nil
}

// buildSpec turns a decided request into the helper's launch spec.
func buildSpec(req Request, workspace string) spec.LaunchSpec {
	env := make([]string, 0, len(req.Env))
	for k, v := range req.Env {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	var rl []specs.POSIXRlimit
	if n := req.Limits.NoFile; n > 0 {
		rl = append(rl, specs.POSIXRlimit{Type: "RLIMIT_NOFILE", Hard: n, Soft: n})
	}
	if n := req.Limits.FileSizeBytes; n > 0 {
		rl = append(rl, specs.POSIXRlimit{Type: "RLIMIT_FSIZE", Hard: n, Soft: n})
	}
	s := spec.LaunchSpec{
		Version: spec.Version, ExecID: req.ExecID, CallerUID: req.Caller.UID,
		Runtime: req.Runtime, Workspace: workspace, Code: []byte(req.Code),
		Network: spec.NetworkNone, TmpSizeBytes: req.Limits.TmpSizeBytes, Environment: req.Environment,
		Process: specs.Process{Env: env, Rlimits: rl},
	}
	if req.Network == spec.NetworkEgress {
		s.Network, s.Egress = spec.NetworkEgress, req.Egress
	}
	return s
}

// run starts the helper for req, reaps everything it started, and turns
// what happened into a result or a launch error; either way the reap
// record ends the exec's trail.
func (h *HelperLauncher) run(ctx context.Context, req Request, wsName string, q quotaCheck) (*ExecResult, *helperRun, error) {
	start := time.Now()
	hr, err := h.runHelper(ctx, req, buildSpec(req, wsName), q)
	if err != nil {
		_ = h.audit(req, audit.Record{Step: audit.StepReap, OK: false, Error: err.Error()})
		return nil, hr, err
	}
	res, err := h.conclude(req, hr, q, time.Since(start), nil)
	return res, hr, err
}

// noCgroupsMessage and fixNoCgroups explain a launch refused for want of
// a cgroup (the supervisor refuses to start there first).
const (
	noCgroupsMessage = "memory, pids and CPU limits cannot be enforced (no usable delegated cgroup subtree): "
	fixNoCgroups     = "delegate a cgroup subtree to the service user (systemd Delegate=yes; make run does it), or start the supervisor with --allow-no-cgroups to run without those limits"
)

// checkCgroups refuses the launch when cgroups are required and there are
// none.
func (h *HelperLauncher) checkCgroups() error {
	if h.cgroupMode() != cgroup.ModeNone || !h.cfg.RequireCgroups {
		return nil
	}
	reason := "no cgroup subtree was delegated to the supervisor"
	if h.cfg.Cgroups != nil {
		reason = h.cfg.Cgroups.Reason()
	}
	return errdefs.New(errdefs.ErrUnavailable, noCgroupsMessage+reason, fixNoCgroups, nil)
}

func (h *HelperLauncher) cgroupMode() string {
	if h.cfg.Cgroups == nil {
		return cgroup.ModeNone
	}
	return h.cfg.Cgroups.Mode()
}

// cgroupLimits are the request's limits as the cgroup takes them.
func cgroupLimits(l policy.Limits) cgroup.Limits {
	return cgroup.Limits{MemoryBytes: l.MemoryBytes, Pids: l.Pids, CPUs: l.CPUs}
}

// launchCgroupLimits are req's cgroup limits: a warm sandbox's build runs
// in the background (cgroup.Limits.Background) until an exec takes it.
func launchCgroupLimits(req Request) cgroup.Limits {
	l := cgroupLimits(req.Limits)
	l.Background = req.Kernel == KernelWarm
	return l
}

// execCgroup creates the exec's cgroup with its limits, or nil without
// cgroups. The returned func removes it later.
func (h *HelperLauncher) execCgroup(req Request) (*cgroup.Exec, func(), error) {
	if h.cgroupMode() == cgroup.ModeNone {
		return nil, func() {}, nil
	}
	cg, err := h.cfg.Cgroups.Create(req.ExecID, launchCgroupLimits(req))
	if err != nil {
		return nil, nil, errdefs.New(errdefs.ErrUnavailable, "create the exec's cgroup", "check the delegated cgroup subtree (sandboxctl doctor)", err)
	}
	return cg, h.cgroupRemover(req, cg), nil
}

// cgroupRemover removes cg after the answer: by then every process of the
// exec is dead (the reaper's pidfd, then KillAll), but the kernel may take
// a moment to let go of the cgroup, and a memory cgroup's rmdir is slow on
// v1. A supervisor that dies first leaves it to Sweep at the next start.
func (h *HelperLauncher) cgroupRemover(req Request, cg *cgroup.Exec) func() {
	if cg == nil {
		return func() {}
	}
	return func() {
		go func() {
			if err := cg.Remove(); err != nil {
				h.cfg.Log.Error("remove exec cgroup", "exec_id", req.ExecID, "err", err)
			}
		}()
	}
}

// acquireHelper returns a started helper for req, not yet released: a
// pre-started one from the pool when one waits (its cgroup still to be
// claimed), else one started now in a cgroup made with req's limits.
// cleanup removes the cgroup.
func (h *HelperLauncher) acquireHelper(req Request) (*helperProc, func(), error) {
	if err := h.checkCgroups(); err != nil {
		return nil, nil, err
	}
	if h.pool != nil {
		if hp := h.pool.take(); hp != nil {
			hp.pooled = true
			// Its cgroup takes the exec's id and limits in place, before
			// the release (claimCgroup).
			return hp, h.cgroupRemover(req, hp.cg), nil
		}
	}
	cg, removeCgroup, err := h.execCgroup(req)
	if err != nil {
		return nil, nil, err
	}
	hp, err := newHelperProc(h.cfg.HelperPath, cg, 0)
	if err != nil {
		removeCgroup()
		return nil, nil, err
	}
	if err := hp.start(); err != nil {
		hp.pipes.closeAll()
		removeCgroup()
		return nil, nil, err
	}
	return hp, removeCgroup, nil
}

// claimCgroup gives a pre-started helper's cgroup the exec's id (named by
// its exec from here on, like a cgroup made for it) and limits: a rename
// on v1; on v2, which has no cgroup rename, a cgroup made for the exec
// and the helper moved into it (cgroup.Exec.Rename). It runs in place,
// before the release byte: the helper may already be reading its spec,
// but it cannot start bwrap before the limits hold.
func (h *HelperLauncher) claimCgroup(hp *helperProc, req Request) error {
	if !hp.pooled || hp.cg == nil {
		return nil
	}
	err := hp.cg.Rename(req.ExecID)
	if err == nil {
		err = hp.cg.SetLimits(launchCgroupLimits(req))
	}
	if err != nil {
		return errdefs.New(errdefs.ErrUnavailable, "set the exec's cgroup limits", "check the delegated cgroup subtree (sandboxctl doctor)", err)
	}
	return nil
}

// helperIO says how the payload's stdio is wired: stdin is written and
// closed; or, with keepStdin, the stdin pipe stays the caller's (a kernel
// channel) and stdout is read by the caller's stdout func, which must read
// until it fails or returns (the rest is drained here).
type helperIO struct {
	stdin     []byte
	keepStdin bool
	stdout    func(io.Reader)
	// bound, for a warm sandbox: stdout and stderr are captured as an
	// exec's, but only once it is closed (warm.go drainBound).
	bound <-chan struct{}
}

// startHelper runs the phases up to supervise: cgroup, pipes, start (or a
// pre-started helper from the pool), feed,
// place, relay, watch status, drain. cleanup (the cgroup, the pipes) runs
// after the reap.
func (h *HelperLauncher) startHelper(req Request, sp spec.LaunchSpec, hio helperIO) (*helperProc, func(), error) {
	encoded, err := encodeSpec(sp)
	if err != nil {
		return nil, nil, err
	}
	start := time.Now()
	hp, removeCgroup, err := h.acquireHelper(req)
	if err != nil {
		return nil, nil, err
	}
	hp.grace, hp.begin = h.grace, time.Now()
	hp.times.start, hp.times.acquired = start, hp.begin
	hp.stdout.limit, hp.stderr.limit = req.Limits.OutputLimitBytes, req.Limits.OutputLimitBytes
	if out := req.Output; out != nil {
		hp.stdout.onChunk = func(p []byte) { out("stdout", p) }
		hp.stderr.onChunk = func(p []byte) { out("stderr", p) }
	}
	// Last of all, after the reap: the release pipe's write end with it.
	cleanup := func() { hp.pipes.closeAll(); removeCgroup() }
	if hio.keepStdin {
		hp.feedSpec(encoded)
	} else {
		hp.feed(encoded, hio.stdin)
	}
	hp.placeErr = hp.place(func() error { return h.claimCgroup(hp, req) }, func() error { return audit.Sync(h.cfg.Sink) })
	if hp.pooled {
		h.pool.kick() // replace it, now that it is released
	}
	hp.relayReports(func(r spec.Report) {
		if r.Step == audit.StepExec {
			hp.times.exec = time.Now() // read after the relay's end (teardown)
		}
		_ = h.audit(req, audit.Record{Source: audit.SourceNsinit, Step: r.Step, OK: r.OK, Error: joinFix(r.Error, r.Fix), Facts: r.Facts})
	})
	hp.watchStatus()
	if hio.bound != nil {
		hp.drainBound(hio.bound)
	} else {
		hp.drainOutput(hio.stdout)
	}
	return hp, cleanup, nil
}

// runHelper runs the helper for req through its phases and returns only
// once every process of the exec is gone.
func (h *HelperLauncher) runHelper(ctx context.Context, req Request, sp spec.LaunchSpec, q quotaCheck) (*helperRun, error) {
	hp, cleanup, err := h.startHelper(req, sp, helperIO{stdin: req.Stdin})
	if err != nil {
		return nil, err
	}
	timeout := req.Limits.Timeout()
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	return h.finishHelper(ctx, hp, cleanup, timeout, q)
}

// finishHelper supervises a started helper, tears it down and cleans up.
// A timeout <= 0 means none (a kernel lives until it is stopped).
func (h *HelperLauncher) finishHelper(ctx context.Context, hp *helperProc, cleanup func(), timeout time.Duration, q quotaCheck) (*helperRun, error) {
	defer cleanup()
	stop, stopErr := hp.supervise(ctx, timeout, q)
	hr := hp.teardown(stop, stopErr)
	// A helper that failed on its own is gone before the move: its reports
	// say why, so the move's error only counts when the helper had not.
	if hp.placeErr != nil && !reportedFailure(hr.reports) {
		return hr, hp.placeErr
	}
	return hr, nil
}

// reportedFailure reports whether the helper reported a failed step.
func reportedFailure(reps []spec.Report) bool {
	for _, r := range reps {
		if !r.OK {
			return true
		}
	}
	return false
}

func (h *HelperLauncher) prepareFailed(req Request, le *errdefs.Error) error {
	_ = h.audit(req, audit.Record{Step: audit.StepPrepare, OK: false, Error: le.Error()})
	return le
}

// audit writes one record of req's launch. A failure is logged and
// returned; before the helper starts, the caller refuses the launch on it
// (nothing runs unaudited), after it the exec is already running and is
// reaped as usual. A probe's records say so (facts.probe).
func (h *HelperLauncher) audit(req Request, r audit.Record) error {
	r.ExecID, r.CallerUID, r.CallerGID, r.CallerPID = req.ExecID, req.Caller.UID, req.Caller.GID, req.Caller.PID
	r.Caller = req.Caller.ID()
	if r.Source == "" {
		r.Source = audit.SourceSupervisor
	}
	if req.Probe && r.Source == audit.SourceSupervisor {
		markProbe(&r)
	}
	if h.cfg.Sink == nil {
		return nil
	}
	if err := h.cfg.Sink.Write(r); err != nil {
		h.cfg.Log.Error("audit write failed", "exec_id", req.ExecID, "step", r.Step, "err", err)
		return err
	}
	return nil
}

// AppliedLimits is what a launch is really held to: without a cgroup,
// memory, pids and CPU are not enforced, so they are attested as 0 rather
// than claimed.
func (h *HelperLauncher) AppliedLimits(l policy.Limits) policy.Limits {
	if h.cgroupMode() == cgroup.ModeNone {
		l.MemoryBytes, l.Pids, l.CPUs = 0, 0, 0
	}
	return l
}

// joinFix renders a helper report's error and fix the way errdefs renders
// every fix.
func joinFix(msg, fix string) string {
	return errdefs.New(errdefs.ErrUnavailable, msg, fix, nil).Error()
}
