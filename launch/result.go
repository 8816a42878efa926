package launch

import (
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/nsinit/spec"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/workspace"
	"golang.org/x/sys/unix"
)

// conclude turns a reaped run into a result or a launch error and writes
// the reap record (with extra facts, if any) that ends req's trail.
func (h *HelperLauncher) conclude(req Request, hr *helperRun, q quotaCheck, took time.Duration, extra func(*facts.Reap)) (*ExecResult, error) {
	// The quota may also have been passed between two checks, or in the
	// last interval; RLIMIT_FSIZE (= the quota) bounds each file.
	if !hr.quotaExceeded {
		hr.quotaExceeded, hr.quotaErr = q.over()
	}
	if le := h.refusal(hr); le != nil {
		head := hr.stderr.Head(512)
		f := &facts.Reap{HelperExit: &hr.helperExit, StderrHead: &head, Stopped: hr.stop.String()}
		if extra != nil {
			extra(f)
		}
		_ = h.audit(req, audit.Record{Step: audit.StepReap, OK: false, Error: le.Error(), Facts: f})
		return nil, le
	}
	res := h.result(req, hr, took)
	f := reapFacts(res, hr)
	if extra != nil {
		extra(f)
	}
	_ = h.audit(req, audit.Record{Step: audit.StepReap, OK: true, Facts: f})
	return res, nil
}

// refusal is the launch error of a run that produced no payload result:
// the helper broke the permit sequence, or the payload never started, or it
// ran without the helper having reported every step (fail closed: then the
// confinement it ran under is not attested).
func (h *HelperLauncher) refusal(hr *helperRun) *errdefs.Error {
	if hr.violation != nil {
		return errdefs.New(errdefs.ErrUnavailable, "the sandbox helper's step reports broke the permit sequence, so the launch was refused and the helper killed: "+hr.violation.Error(),
			"reinstall the helper (make install) so it matches this supervisor, and run `sandboxctl doctor`", nil)
	}
	if hr.killed {
		return nil // stopped by the supervisor: a result (SIGKILL)
	}
	if hr.bwrap.exit == nil {
		return h.launchFailure(hr)
	}
	if hr.exec == nil {
		return errdefs.New(errdefs.ErrUnavailable, "the payload ran but the sandbox helper never reported its exec step, so its confinement is not attested and the result is withheld",
			"reinstall the helper (make install) and run `sandboxctl doctor`", nil)
	}
	return nil
}

// result assembles the answer of a run that produced a payload result.
func (h *HelperLauncher) result(req Request, hr *helperRun, took time.Duration) *ExecResult {
	res := &ExecResult{
		ID: req.ExecID, Stdout: hr.stdout.String(), Stderr: hr.stderr.String(),
		StdoutTruncated: hr.stdout.truncated, StderrTruncated: hr.stderr.truncated,
		DurationMS: took.Milliseconds(), Usage: hr.usage, TimedOut: hr.stop == stopTimeout,
		Artifacts:     []Artifact{},
		Policy:        Attest(hr.exec, h.AppliedLimits(req.Limits)),
		OOMKilled:     hr.oomKilled,
		QuotaExceeded: hr.quotaExceeded,
	}
	switch {
	case hr.killed:
		sig := "SIGKILL"
		res.Signal = &sig
	case *hr.bwrap.exit > 128 && *hr.bwrap.exit < 128+65:
		// bwrap reports a payload killed by signal N as 128+N, the shell
		// convention; a payload that exits 128+N itself reads the same.
		sig := signalName(syscall.Signal(*hr.bwrap.exit - 128))
		res.Signal = &sig
	default:
		code := *hr.bwrap.exit
		res.ExitCode = &code
	}
	return res
}

// collect adds the requested artifacts to res and audits them.
func (h *HelperLauncher) collect(ws *workspace.Workspace, req Request, res *ExecResult) {
	arts, truncated, err := ws.Collect(req.Artifacts, h.cfg.Artifacts)
	if err != nil {
		h.cfg.Log.Error("collect artifacts", "exec_id", req.ExecID, "err", err)
	}
	res.ArtifactsTruncated = truncated
	res.Artifacts = make([]Artifact, 0, len(arts))
	f := &facts.Artifacts{Patterns: req.Artifacts, Artifacts: make([]facts.Artifact, 0, len(arts)), Truncated: truncated}
	for _, a := range arts {
		res.Artifacts = append(res.Artifacts, Artifact(a))
		f.Artifacts = append(f.Artifacts, facts.Artifact{Path: a.Path, Size: a.Size, SHA256: a.SHA256})
	}
	_ = h.audit(req, audit.Record{Step: audit.StepArtifacts, OK: err == nil, Facts: f})
}

// Attest is the policy attestation of an exec of any kind (cold, warm, a
// session kernel's exec, a run-once call): the confinement is taken from
// the exec step's typed facts only (audit/facts.Exec), which describe the
// sandbox bwrap was exec'd into after every other step passed, and the
// limits are applied -- what the launch is really held to
// (HelperLauncher.AppliedLimits), never the limits requested: without a
// cgroup, memory, pids and CPU are 0, not claimed. (A killed exec may
// have no exec facts: then only the limits are attested.)
func Attest(exec *facts.Exec, applied policy.Limits) PolicyAttestation {
	if exec == nil {
		return PolicyAttestation{Limits: applied}
	}
	a := exec.Attestation()
	p := PolicyAttestation{ProfileSHA256: a.ProfileSHA256, MountsSHA256: a.MountsSHA256, HelperVersion: a.HelperVersion, Limits: applied}
	if a.Environment != "" {
		p.Environment = &EnvironmentRef{Name: a.Environment, Digest: a.EnvironmentDigest}
	}
	return p
}

// launchFailure explains a run in which the payload never started.
func (h *HelperLauncher) launchFailure(hr *helperRun) *errdefs.Error {
	for i := len(hr.reports) - 1; i >= 0; i-- {
		r := hr.reports[i]
		if r.OK {
			continue
		}
		class := errdefs.ErrInternal
		// A refused spec: the supervisor built it from a decided request,
		// so the operator's limits exceed the helper's caps -- not the
		// caller's fault.
		if spec.Unavailable(hr.helperExit) || hr.helperExit == spec.ExitSpec {
			class = errdefs.ErrUnavailable
		}
		return errdefs.New(class, fmt.Sprintf("sandbox helper failed at step %q: %s", r.Step, r.Error), r.Fix, nil)
	}
	if hr.helperExit >= spec.ExitUsage && hr.helperExit <= spec.ExitExec || hr.helperExit == exitNotFound || hr.helperExit == exitNotExecutable {
		return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("sandbox helper %s exited %d without a report: %s", h.cfg.HelperPath, hr.helperExit, strings.TrimSpace(hr.stderr.Head(300))), "reinstall the helper (make install) and run `sandboxctl doctor`", nil)
	}
	if len(hr.reports) > 0 && hr.reports[len(hr.reports)-1].Step == audit.StepExec {
		return errdefs.New(errdefs.ErrUnavailable, "bubblewrap could not build the sandbox: "+strings.TrimSpace(hr.stderr.Head(500)), "run `sandboxctl doctor`; check that the helper config's binds exist; in a container bubblewrap also needs an unmasked /proc (Docker security_opt systempaths=unconfined, Kubernetes procMount: Unmasked) and an AppArmor profile that allows mount", nil)
	}
	return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("sandbox helper %s did not start (exit %d): %s", h.cfg.HelperPath, hr.helperExit, strings.TrimSpace(hr.stderr.Head(300))), fixInstallHelper, nil)
}

func signalName(s syscall.Signal) string {
	if name := unix.SignalName(s); name != "" {
		return name
	}
	return fmt.Sprintf("SIG%d", int(s))
}
