package supervisor

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/cgroup"
	"github.com/sandboxd/sandboxd/nsinit/spec"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/workspace"
)

// HelperConfig configures a HelperLauncher.
type HelperConfig struct {
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
	// RequireCgroups refuses every launch (503) when Cgroups is "none".
	RequireCgroups bool
	// QuotaBytes is the workspace disk quota (uploads, staged files, and
	// what the payload writes); 0 disables it.
	QuotaBytes int64
	// Artifacts bounds artifact collection.
	Artifacts workspace.ArtifactLimits
}

// quotaInterval is how often a running exec's workspace usage is checked.
const quotaInterval = 200 * time.Millisecond

// HelperLauncher runs execs through sandboxd-nsinit and bubblewrap.
type HelperLauncher struct {
	cfg   HelperConfig
	probe probeCache
}

// NewHelperLauncher checks the workspace root and returns a launcher.
func NewHelperLauncher(cfg HelperConfig) (*HelperLauncher, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if err := os.MkdirAll(cfg.WorkspaceRoot, 0o700); err != nil {
		return nil, fmt.Errorf("create workspace root %q: %w", cfg.WorkspaceRoot, err)
	}
	return &HelperLauncher{cfg: cfg}, nil
}

// Launch runs one exec: in a fresh workspace that is removed afterwards, or
// in a session's workspace (req.SessionWorkspace), which stays.
func (h *HelperLauncher) Launch(ctx context.Context, req LaunchRequest) (*ExecResult, error) {
	name, kind := req.ExecID, "one-shot"
	if req.SessionWorkspace != "" {
		name, kind = req.SessionWorkspace, "session"
	}
	dir := filepath.Join(h.cfg.WorkspaceRoot, name)
	if req.SessionWorkspace == "" {
		if err := os.Mkdir(dir, 0o700); err != nil {
			return nil, h.prepareFailed(req, &LaunchError{Kind: KindInternal, Reason: "create workspace", Err: err})
		}
		defer func() {
			if err := RemoveWorkspace(dir); err != nil {
				h.cfg.Log.Error("remove workspace", "exec_id", req.ExecID, "dir", dir, "err", err)
			}
		}()
	}
	ws, err := workspace.Open(dir, h.cfg.QuotaBytes)
	if err != nil {
		return nil, h.prepareFailed(req, &LaunchError{Kind: KindInternal, Reason: "open workspace", Err: err})
	}
	defer ws.Close()
	var staged int64
	for _, f := range req.Files {
		n, _, err := ws.Put(f.Path, bytes.NewReader(f.Content), h.cfg.QuotaBytes)
		if err != nil {
			le := &LaunchError{Kind: KindInternal, Reason: fmt.Sprintf("stage %s: %v", f.Path, err), Err: err}
			switch {
			case errors.Is(err, workspace.ErrQuota):
				le.Kind = KindQuota
			case errors.Is(err, workspace.ErrEscape):
				le.Kind = KindForbidden
			case errors.Is(err, workspace.ErrInvalidPath), errors.Is(err, workspace.ErrTooLarge):
				le.Kind = KindInvalid
			}
			return nil, h.prepareFailed(req, le)
		}
		staged += n
	}
	if err := h.audit(req, audit.Record{Step: audit.StepPrepare, OK: true, Facts: map[string]any{
		"workspace": dir, "workspace_kind": kind, "files": len(req.Files), "file_bytes": staged,
		"stdio": "pipes", "cgroup_mode": h.cgroupMode(), "limits": h.AppliedLimits(req.Limits),
		"quota_bytes": h.cfg.QuotaBytes,
	}}); err != nil {
		return nil, &LaunchError{Kind: KindUnavailable, Reason: "the audit log cannot be written, so nothing runs", Fix: "check the audit log's disk and run `sandboxctl audit verify`", Err: err}
	}
	res, err := h.run(ctx, req, name, ws)
	if err != nil {
		return nil, err
	}

	if len(req.Artifacts) > 0 {
		arts, truncated, err := ws.Collect(req.Artifacts, h.cfg.Artifacts)
		if err != nil {
			h.cfg.Log.Error("collect artifacts", "exec_id", req.ExecID, "err", err)
		}
		res.ArtifactsTruncated = truncated
		res.Artifacts = make([]Artifact, 0, len(arts))
		facts := make([]map[string]any, 0, len(arts))
		for _, a := range arts {
			res.Artifacts = append(res.Artifacts, Artifact{Path: a.Path, Size: a.Size, SHA256: a.SHA256, ContentBase64: a.ContentBase64})
			facts = append(facts, map[string]any{"path": a.Path, "size": a.Size, "sha256": a.SHA256})
		}
		h.audit(req, audit.Record{Step: audit.StepArtifacts, OK: err == nil, Facts: map[string]any{
			"patterns": req.Artifacts, "artifacts": facts, "truncated": truncated}})
	}
	return res, nil
}

func (h *HelperLauncher) prepareFailed(req LaunchRequest, le *LaunchError) error {
	h.audit(req, audit.Record{Step: audit.StepPrepare, OK: false, Error: le.Error()})
	return le
}

// audit writes one record of req's launch. A failure is logged and
// returned; before the helper starts, the caller refuses the launch on it
// (nothing runs unaudited), after it the exec is already running and is
// reaped as usual.
func (h *HelperLauncher) audit(req LaunchRequest, r audit.Record) error {
	r.ExecID, r.CallerUID, r.CallerGID, r.CallerPID = req.ExecID, req.Caller.UID, req.Caller.GID, req.Caller.PID
	if r.Source == "" {
		r.Source = "supervisor"
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

func (h *HelperLauncher) cgroupMode() string {
	if h.cfg.Cgroups == nil {
		return cgroup.ModeNone
	}
	return h.cfg.Cgroups.Mode()
}

// buildSpec turns a decided request into the helper's launch spec.
func buildSpec(req LaunchRequest, workspace string) spec.LaunchSpec {
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
	return spec.LaunchSpec{
		Version: spec.Version, ExecID: req.ExecID, CallerUID: req.Caller.UID,
		Runtime: req.Runtime, Workspace: workspace, Code: []byte(req.Code),
		Network: spec.NetworkNone, TmpSizeBytes: req.Limits.TmpSizeBytes,
		Process: specs.Process{Env: env, Rlimits: rl},
	}
}

// bwrapStatus is one JSON document of bwrap's --json-status-fd.
type bwrapStatus struct {
	ChildPID *int `json:"child-pid"`
	ExitCode *int `json:"exit-code"`
}

// helperRun is what one helper invocation produced.
type helperRun struct {
	reports    []spec.Report
	helperExit int // the helper/bwrap process's exit status, -1 if signalled
	bwrapExit  *int
	childPID   int
	reaperGone bool // waited until the sandbox's pid 1 had exited
	oomKilled  bool
	// quotaExceeded: the workspace grew past the quota and the exec was killed.
	quotaExceeded bool
	cgroupLeft    int // processes still in the exec's cgroup after the reaper was gone
	killed        bool
	timedOut      bool
	stdout        capturedStream
	stderr        capturedStream
	usage         Usage
	duration      time.Duration
}

// run starts the helper for req and reaps everything it started.
func (h *HelperLauncher) run(ctx context.Context, req LaunchRequest, wsName string, ws *workspace.Workspace) (*ExecResult, error) {
	start := time.Now()
	sp := buildSpec(req, wsName)
	hr, err := h.runHelper(ctx, req, sp, ws)
	if err != nil {
		h.audit(req, audit.Record{Step: audit.StepReap, OK: false, Error: err.Error()})
		return nil, err
	}
	// The quota may also have stopped the payload between two checks:
	// RLIMIT_FSIZE (= the quota) refuses a file that grows past it.
	if ws != nil && h.cfg.QuotaBytes > 0 && !hr.quotaExceeded {
		if used, err := ws.Usage(); err == nil && used > h.cfg.QuotaBytes {
			hr.quotaExceeded = true
		}
	}
	res := &ExecResult{
		ID: req.ExecID, Stdout: hr.stdout.String(), Stderr: hr.stderr.String(),
		StdoutTruncated: hr.stdout.truncated, StderrTruncated: hr.stderr.truncated,
		DurationMS: time.Since(start).Milliseconds(), Usage: hr.usage, TimedOut: hr.timedOut,
		Artifacts:     []Artifact{},
		Policy:        PolicyAttestation{Limits: h.AppliedLimits(req.Limits)},
		OOMKilled:     hr.oomKilled,
		QuotaExceeded: hr.quotaExceeded,
	}
	// The attestation is what the helper stated in its exec report,
	// immediately before it exec'd bwrap (typed: audit/facts.Exec).
	for _, r := range hr.reports {
		if r.Step != facts.StepExec || !r.OK {
			continue
		}
		if f, err := facts.Decode(r.Step, r.OK, r.Facts); err == nil {
			a := f.(*facts.Exec).Attestation()
			res.Policy.ProfileSHA256, res.Policy.MountsSHA256, res.Policy.HelperVersion = a.ProfileSHA256, a.MountsSHA256, a.HelperVersion
		}
	}

	switch {
	case hr.killed:
		sig := "SIGKILL"
		res.Signal = &sig
	case hr.bwrapExit != nil:
		code := *hr.bwrapExit
		// bwrap reports a payload killed by signal N as 128+N, the shell
		// convention; a payload that exits 128+N itself reads the same.
		if code > 128 && code < 128+65 {
			sig := signalName(syscall.Signal(code - 128))
			res.Signal = &sig
		} else {
			res.ExitCode = &code
		}
	default:
		le := h.launchFailure(hr)
		h.audit(req, audit.Record{Step: audit.StepReap, OK: false, Error: le.Error(), Facts: map[string]any{
			"helper_exit": hr.helperExit, "stderr_head": hr.stderr.Head(512)}})
		return nil, le
	}
	h.audit(req, audit.Record{Step: audit.StepReap, OK: true, Facts: map[string]any{
		"exit_code": res.ExitCode, "signal": res.Signal, "timed_out": res.TimedOut,
		"duration_ms": res.DurationMS, "usage": res.Usage, "bwrap_child_pid": hr.childPID,
		"stdout_bytes": hr.stdout.total, "stderr_bytes": hr.stderr.total,
		"stdout_truncated": res.StdoutTruncated, "stderr_truncated": res.StderrTruncated,
		// The reaper's pidfd became readable: the kernel had killed and
		// reaped every process of the sandbox's pid namespace by then.
		"pid_namespace_gone": hr.reaperGone,
		"oom_killed":         hr.oomKilled, "cgroup_processes_left": hr.cgroupLeft,
		"quota_exceeded": hr.quotaExceeded,
	}})
	return res, nil
}

// launchFailure explains a run in which the payload never started.
func (h *HelperLauncher) launchFailure(hr *helperRun) *LaunchError {
	for i := len(hr.reports) - 1; i >= 0; i-- {
		r := hr.reports[i]
		if r.OK {
			continue
		}
		kind := KindInternal
		if spec.Unavailable(hr.helperExit) {
			kind = KindUnavailable
		} else if hr.helperExit == spec.ExitSpec {
			// The supervisor built the spec from a decided request: a
			// refusal means the operator's limits exceed the helper's
			// caps, not that the caller asked for something wrong.
			kind = KindUnavailable
		}
		return &LaunchError{Kind: kind, Reason: fmt.Sprintf("sandbox helper failed at step %q: %s", r.Step, r.Error), Fix: r.Fix}
	}
	if hr.helperExit >= spec.ExitUsage && hr.helperExit <= spec.ExitExec || hr.helperExit == 127 || hr.helperExit == 126 {
		return &LaunchError{Kind: KindUnavailable,
			Reason: fmt.Sprintf("sandbox helper %s exited %d without a report: %s", h.cfg.HelperPath, hr.helperExit, strings.TrimSpace(hr.stderr.Head(300))),
			Fix:    "reinstall the helper (make install) and run `sandboxctl doctor`"}
	}
	if len(hr.reports) > 0 && hr.reports[len(hr.reports)-1].Step == "exec" {
		return &LaunchError{Kind: KindUnavailable,
			Reason: "bubblewrap could not build the sandbox: " + strings.TrimSpace(hr.stderr.Head(500)),
			Fix:    "run `sandboxctl doctor`; check that the helper config's binds exist; in a container bubblewrap also needs an unmasked /proc (Docker security_opt systempaths=unconfined, Kubernetes procMount: Unmasked) and an AppArmor profile that allows mount"}
	}
	return &LaunchError{Kind: KindUnavailable,
		Reason: fmt.Sprintf("sandbox helper %s did not start (exit %d): %s", h.cfg.HelperPath, hr.helperExit, strings.TrimSpace(hr.stderr.Head(300))),
		Fix:    "install the helper with `make install` and run `sandboxctl doctor` (an exec refused with \"operation not permitted\" means the supervisor's bounding set lacks CAP_SYS_ADMIN or CAP_NET_ADMIN)"}
}

// runHelper starts sandboxd-nsinit with the spec and stdio, relays its step
// reports into the audit trail, enforces the timeout and ctx, and returns
// only once every process of the exec is gone.
func (h *HelperLauncher) runHelper(ctx context.Context, req LaunchRequest, sp spec.LaunchSpec, ws *workspace.Workspace) (*helperRun, error) {
	encoded, err := json.Marshal(sp)
	if err != nil {
		return nil, &LaunchError{Kind: KindInternal, Reason: "encode launch spec", Err: err}
	}
	if len(encoded) > spec.MaxSize {
		return nil, &LaunchError{Kind: KindInvalid, Reason: fmt.Sprintf("the launch spec is %d bytes, above the helper's limit of %d: send less code or env", len(encoded), spec.MaxSize)}
	}
	p := &pipeSet{}
	defer p.closeAll()
	specR, specW := p.pipe()
	reportR, reportW := p.pipe()
	statusR, statusW := p.pipe()
	stdinR, stdinW := p.pipe()
	stdoutR, stdoutW := p.pipe()
	stderrR, stderrW := p.pipe()
	releaseR, releaseW := p.pipe()
	if p.err != nil {
		return nil, &LaunchError{Kind: KindInternal, Reason: "create pipes", Err: p.err}
	}

	var cg *cgroup.Exec
	switch {
	case h.cgroupMode() != cgroup.ModeNone:
		cg, err = h.cfg.Cgroups.Create(req.ExecID, cgroup.Limits{
			MemoryBytes: req.Limits.MemoryBytes, Pids: req.Limits.Pids, CPUs: req.Limits.CPUs})
		if err != nil {
			return nil, &LaunchError{Kind: KindUnavailable, Reason: "create the exec's cgroup", Fix: "check the delegated cgroup subtree (sandboxctl doctor)", Err: err}
		}
		// Removed after the answer: by then every process of the exec is
		// dead (the reaper's pidfd, then KillAll), but the kernel may take
		// a moment to let go of the cgroup, and a memory cgroup's rmdir is
		// slow on v1. A supervisor that dies first leaves it to Sweep at
		// the next start.
		defer func() {
			go func() {
				if err := cg.Remove(); err != nil {
					h.cfg.Log.Error("remove exec cgroup", "exec_id", req.ExecID, "err", err)
				}
			}()
		}()
	case h.cfg.RequireCgroups:
		reason := "no cgroup subtree was delegated to the supervisor"
		if h.cfg.Cgroups != nil {
			reason = h.cfg.Cgroups.Reason()
		}
		return nil, &LaunchError{Kind: KindUnavailable, Reason: "cgroups are required (--require-cgroups) but " + reason}
	}

	cmd := &exec.Cmd{
		Path:       h.cfg.HelperPath,
		Args:       []string{"sandboxd-nsinit"},
		Env:        []string{},
		Dir:        "/",
		Stdin:      stdinR,
		Stdout:     stdoutW,
		Stderr:     stderrW,
		ExtraFiles: []*os.File{specR, reportW, statusW, releaseR}, // fds 3, 4, 5, 6
		SysProcAttr: &syscall.SysProcAttr{
			// The helper re-arms this after its exec (file capabilities
			// clear it); it covers the window before.
			Pdeathsig: syscall.SIGKILL,
		},
	}
	if cg != nil && cg.Dir() != "" {
		// cgroup v2: born in its cgroup (CLONE_INTO_CGROUP), no window.
		fd, err := unix.Open(cg.Dir(), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, &LaunchError{Kind: KindUnavailable, Reason: "open the exec's cgroup", Err: err}
		}
		defer unix.Close(fd)
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
	}

	hr := &helperRun{}
	limit := req.Limits.OutputLimitBytes
	hr.stdout.limit, hr.stderr.limit = limit, limit
	timeout := req.Limits.Timeout()
	if timeout <= 0 {
		timeout = 30 * time.Second
	}

	type startResult struct {
		err   error
		state *os.ProcessState
	}
	started := make(chan error, 1)
	waited := make(chan startResult, 1)
	// Pdeathsig fires when the thread that forked the child exits, not the
	// process: start and wait on one locked thread so it cannot go early.
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		err := cmd.Wait()
		waited <- startResult{err: err, state: cmd.ProcessState}
	}()
	if err := <-started; err != nil {
		return nil, &LaunchError{Kind: KindUnavailable,
			Reason: fmt.Sprintf("start sandbox helper %s", h.cfg.HelperPath),
			Fix:    "install the helper with `make install` and run `sandboxctl doctor` (an exec refused with \"operation not permitted\" means the supervisor's bounding set lacks CAP_SYS_ADMIN or CAP_NET_ADMIN)", Err: err}
	}
	begin := time.Now()
	// The child has its ends; ours must go so that EOF means "child done".
	for _, f := range []*os.File{specR, reportW, statusW, stdinR, stdoutW, stderrW, releaseR} {
		p.release(f)
	}

	go func() {
		_, _ = specW.Write(encoded)
		p.release(specW)
	}()
	// cgroup v1: move the helper while it starts up, then release it. It
	// execs bwrap only after the release byte, so everything of the sandbox
	// starts inside the cgroup; only the prelude's short-lived holder does
	// not. (A v1 move waits for an RCU grace period, several ms here: done
	// in parallel with the helper's own start-up, it costs little.)
	// A helper that failed on its own is gone before the move: its reports
	// say why, so the move's error only counts when the helper had not.
	var placeErr error
	if cg != nil && cg.Dir() == "" {
		if placeErr = cg.Add(cmd.Process.Pid); placeErr != nil {
			_ = cmd.Process.Kill() // never released: nothing ran
		}
	}
	if placeErr == nil {
		_, _ = releaseW.Write([]byte{1})
	}
	p.release(releaseW)
	go func() {
		if len(req.Stdin) > 0 {
			_, _ = stdinW.Write(req.Stdin)
		}
		p.release(stdinW)
	}()

	reportsDone := make(chan []spec.Report, 1)
	go func() {
		var reps []spec.Report
		sc := bufio.NewScanner(reportR)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			// Strict: bounded, no unknown field, typed facts (audit/facts).
			r, _, err := spec.ParseReport(sc.Bytes())
			if err != nil {
				r = spec.Report{Step: "unknown", Error: err.Error()}
			}
			reps = append(reps, r)
			h.audit(req, audit.Record{Source: "nsinit", Step: r.Step, OK: r.OK, Error: joinFix(r.Error, r.Fix), Facts: r.Facts})
		}
		reportsDone <- reps
	}()

	pidfdCh := make(chan int, 1)
	statusDone := make(chan *int, 1)
	go func() {
		dec := json.NewDecoder(io.LimitReader(statusR, 1<<20))
		var exit *int
		sentPID := false
		for {
			var st bwrapStatus
			if err := dec.Decode(&st); err != nil {
				break
			}
			if st.ChildPID != nil && !sentPID {
				hr.childPID = *st.ChildPID
				// Opened while the child is alive, so the fd names that
				// process even if its pid is reused later.
				if fd, err := unix.PidfdOpen(*st.ChildPID, 0); err == nil {
					pidfdCh <- fd
					sentPID = true
				}
			}
			if st.ExitCode != nil {
				exit = st.ExitCode
			}
		}
		if !sentPID {
			pidfdCh <- -1
		}
		statusDone <- exit
	}()

	outDone := make(chan struct{}, 2)
	go func() { hr.stdout.drain(stdoutR); outDone <- struct{}{} }()
	go func() { hr.stderr.drain(stderrR); outDone <- struct{}{} }()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	// The workspace quota is watched while the payload runs: past it, the
	// exec is stopped. RLIMIT_FSIZE caps any single file at the quota, so
	// the overshoot is at most what the payload writes in one interval
	// (README: "Workspace quota").
	var quotaTick <-chan time.Time
	if ws != nil && h.cfg.QuotaBytes > 0 {
		t := time.NewTicker(quotaInterval)
		defer t.Stop()
		quotaTick = t.C
	}
	var res startResult
wait:
	for {
		select {
		case res = <-waited:
			break wait
		case <-timer.C:
			hr.timedOut, hr.killed = true, true
			break wait
		case <-ctx.Done():
			hr.killed = true
			break wait
		case <-quotaTick:
			if used, err := ws.Usage(); err == nil && used > h.cfg.QuotaBytes {
				hr.quotaExceeded, hr.killed = true, true
				break wait
			}
		}
	}
	pidfd := -1
	pidfdKnown := false
	if hr.killed {
		// Kill the sandbox's pid 1 (bwrap's reaper) first: the kernel then
		// kills every process of its pid namespace -- setsid, double fork
		// and daemons included -- and bwrap, still alive, reaps it and exits,
		// so no orphan is left for the host's init. If the reaper is not
		// known yet (bwrap still setting up), or bwrap lingers, bwrap itself
		// is killed and --die-with-parent takes the reaper down.
		select {
		case pidfd = <-pidfdCh:
			pidfdKnown = true
		default:
		}
		if pidfd >= 0 {
			_ = unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0)
		} else {
			_ = cmd.Process.Kill()
		}
		select {
		case res = <-waited:
		case <-time.After(2 * time.Second):
			_ = cmd.Process.Kill()
			res = <-waited
		}
	}
	hr.bwrapExit = <-statusDone
	if !pidfdKnown {
		pidfd = <-pidfdCh
	}
	if pidfd >= 0 {
		// Returns once the reaper is gone, and with it its pid namespace.
		_ = unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0)
		hr.reaperGone = waitPidfd(pidfd)
		// bwrap exits as soon as its reaper reports the payload's status,
		// without waiting for the reaper itself: the reaper is then
		// orphaned, and re-parented to this process (a child subreaper,
		// see cmd/sandboxd). Reap it, or it stays a zombie of ours.
		var info unix.Siginfo
		_ = unix.Waitid(unix.P_PIDFD, pidfd, &info, unix.WEXITED|unix.WNOHANG, nil)
		unix.Close(pidfd)
	}
	if cg != nil {
		// Belt and braces: the pid namespace is gone with its reaper, but
		// anything that escaped it into the cgroup is killed here.
		hr.oomKilled = cg.OOMKilled()
		hr.cgroupLeft = len(cg.Procs())
		cg.KillAll()
	}
	hr.reports = <-reportsDone
	<-outDone
	<-outDone
	if placeErr != nil && !reportedFailure(hr.reports) {
		return nil, &LaunchError{Kind: KindUnavailable, Reason: "place the helper in the exec's cgroup", Fix: "check the delegated cgroup subtree (sandboxctl doctor)", Err: placeErr}
	}
	hr.duration = time.Since(begin)
	if res.state != nil {
		hr.helperExit = res.state.ExitCode()
		if ru, ok := res.state.SysUsage().(*syscall.Rusage); ok && ru != nil {
			hr.usage = Usage{
				CPUMS:    (ru.Utime.Sec+ru.Stime.Sec)*1000 + (int64(ru.Utime.Usec)+int64(ru.Stime.Usec))/1000,
				MaxRSSKB: ru.Maxrss,
			}
		}
	}
	if hr.killed {
		hr.bwrapExit = nil
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

// waitPidfd blocks until the process behind pidfd has exited. For the
// sandbox's pid 1 that means every process of its pid namespace is gone:
// the kernel kills and reaps them before pid 1's exit completes.
func waitPidfd(fd int) bool {
	for {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, -1)
		if err == unix.EINTR {
			continue
		}
		return err == nil && n == 1
	}
}

func joinFix(msg, fix string) string {
	if fix == "" {
		return msg
	}
	return msg + "; fix: " + fix
}

// pipeSet tracks pipe ends so none leaks on any return path.
type pipeSet struct {
	open []*os.File
	err  error
}

func (p *pipeSet) pipe() (*os.File, *os.File) {
	if p.err != nil {
		return nil, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		p.err = err
		return nil, nil
	}
	p.open = append(p.open, r, w)
	return r, w
}

func (p *pipeSet) release(f *os.File) { _ = f.Close() }

func (p *pipeSet) closeAll() {
	for _, f := range p.open {
		_ = f.Close()
	}
}

func signalName(s syscall.Signal) string {
	if name := unix.SignalName(s); name != "" {
		return name
	}
	return fmt.Sprintf("SIG%d", int(s))
}
