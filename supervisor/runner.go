package supervisor

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/kernel/protocol"
	"github.com/sandboxd/sandboxd/kernel/runners"
	"github.com/sandboxd/sandboxd/launch"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/workspace"
)

// runnerLauncher is what kernels and run-once execs need of the launcher
// (launch.HelperLauncher); a Launcher without it runs every exec as a
// plain process and refuses kernel mode.
type runnerLauncher interface {
	launch.Starter
	CollectArtifacts(req launch.Request, wsName string, res *ExecResult)
	ArtifactLimits() workspace.ArtifactLimits
	Stage(req launch.Request) error
}

func (s *Server) runners() (runnerLauncher, bool) {
	rl, ok := s.launcher.(runnerLauncher)
	return rl, ok
}

// useRunner reports whether a process-mode exec runs through its runner's
// run-once mode: a code-node call (an entrypoint) of python or
// javascript. Every other process-mode exec runs as a plain interpreter,
// with today's fidelity: the payload's own fds 0-2 and nothing else, its
// environment exactly the request's, output at pipe speed (a 5 GiB flood is
// drained in a minute; as JSON frames through the runner it is not).
func (s *Server) useRunner(d decision) bool {
	if _, ok := s.runners(); !ok || d.entrypoint == "" {
		return false
	}
	return policy.HasRunner(d.launch.Runtime)
}

// runnerRequest is the sandbox launch of a runner: the runner's source as
// the payload's code, the mode in its environment (policy refuses
// SANDBOXD_ names in a request, so only the supervisor sets it).
func runnerRequest(base LaunchRequest, id, mode string) (LaunchRequest, error) {
	src, err := runners.Source(base.Runtime)
	if err != nil {
		return LaunchRequest{}, err
	}
	req := base
	req.ExecID, req.Code, req.Stdin = id, src, nil
	req.Env = make(map[string]string, len(base.Env)+1)
	for k, v := range base.Env {
		req.Env[k] = v
	}
	req.Env[runners.ModeEnv] = mode
	req.Kernel = mode
	return req, nil
}

// startKernel launches a runner and waits for its ready frame.
func (s *Server) startKernel(ctx context.Context, rl runnerLauncher, req LaunchRequest) (*kernel, error) {
	k := newKernel(req.Runtime)
	k.environment = req.Environment
	sb, err := rl.Start(ctx, req, k.read)
	if err != nil {
		return nil, err
	}
	k.id, k.sb, k.enc = sb.ID(), sb, protocol.NewEncoder(sb.Stdin())
	timer := time.NewTimer(kernelReadyTimeout)
	defer timer.Stop()
	select {
	case err = <-k.ready:
	case <-sb.Done():
		err = fmt.Errorf("it exited before it was ready")
	case <-timer.C:
		err = fmt.Errorf("no ready frame within %s", kernelReadyTimeout)
	}
	if err != nil {
		return nil, kernelStartError(k, err)
	}
	return k, nil
}

// runOnce runs a process-mode python/javascript exec through the runner's
// run-once mode, in its own sandbox whose launch records are the exec's
// own (prepare, the helper's steps, reap under the exec id).
func (s *Server) runOnce(ctx context.Context, d decision, emit func(event) bool) (*ExecResult, error) {
	rl, _ := s.runners()
	req, err := runnerRequest(d.launch, d.launch.ExecID, runners.ModeOnce)
	if err != nil {
		return nil, err
	}
	k, err := s.startKernel(context.WithoutCancel(ctx), rl, req)
	if err != nil {
		return nil, err
	}
	sink := newSink(d.launch.ExecID, d.launch.Limits.OutputLimitBytes, rl.ArtifactLimits(), emit)
	o := k.execute(ctx, d.execute(), d.launch.Limits.Timeout(), sink)
	if o.exit == nil {
		o.exit = s.awaitOnceExit(k)
	}
	res := assemble(d, sink, o)
	if ex := o.exit; ex != nil && ex.Result != nil {
		res.Usage, res.Policy = ex.Result.Usage, ex.Result.Policy
		res.QuotaExceeded = ex.Result.QuotaExceeded
		// Collected by the sandbox after its reap, before a one-shot
		// workspace is removed.
		res.Artifacts, res.ArtifactsTruncated = ex.Result.Artifacts, res.ArtifactsTruncated || ex.Result.ArtifactsTruncated
	}
	if res.Artifacts == nil {
		res.Artifacts = []Artifact{}
	}
	res.Policy.Limits = d.launch.Limits
	return res, nil
}

// awaitOnceExit waits for a run-once runner to exit after its result, and
// kills it if it lingers.
func (s *Server) awaitOnceExit(k *kernel) *launch.SandboxExit {
	timer := time.NewTimer(onceExitGrace)
	defer timer.Stop()
	select {
	case <-k.sb.Done():
	case <-timer.C:
	}
	ex := k.sb.Stop()
	return &ex
}

// execute is the decision as the kernel channel's request.
func (d decision) execute() protocol.Execute {
	return protocol.Execute{ID: d.launch.ExecID, Code: d.launch.Code, Stdin: string(d.launch.Stdin),
		Entrypoint: d.entrypoint, Inputs: d.inputs}
}

// assemble turns an exec's frames and outcome into its result, with the
// same output caps as a process exec.
func assemble(d decision, sink *execSink, o outcome) *ExecResult {
	sink.mu.Lock()
	displays, trunc := append([]api.Display{}, sink.displays...), sink.dispTrunc
	sink.mu.Unlock()
	res := &ExecResult{ID: d.launch.ExecID, Stdout: sink.stdout.String(), Stderr: sink.stderr.String(),
		StdoutTruncated: sink.stdout.Truncated(), StderrTruncated: sink.stderr.Truncated(),
		DurationMS: o.took.Milliseconds(), TimedOut: o.timedOut, Artifacts: []Artifact{},
		Displays: displays, ArtifactsTruncated: trunc}
	res.Policy.Limits = d.launch.Limits
	if o.exit != nil {
		// The kernel's sandbox ended during the exec: what stopped it
		// (the OOM killer, the workspace quota watcher) is this exec's.
		res.OOMKilled = o.exit.OOMKilled
		res.QuotaExceeded = o.exit.QuotaExceeded
	}
	switch {
	case o.result != nil && !o.timedOut && !o.cancelled:
		code := o.result.ExitCode
		res.ExitCode, res.ReturnValue = &code, o.result.ReturnValue
		if o.exit != nil && code > 128 && code < 128+65 {
			// The runner reported its interpreter killed by signal
			// code-128 (node's evaluator) and the kernel is gone: the
			// process-exec convention for 128+N.
			sig := signalName(code - 128)
			res.ExitCode, res.Signal = nil, &sig
		}
		if e := o.result.Exception; e != nil {
			res.Exception = &api.Exception{Type: e.Type, Message: e.Message, Traceback: e.Traceback}
		}
	case o.broken != nil:
		sig := "SIGKILL"
		res.Signal = &sig
		res.Exception = &api.Exception{Type: "KernelProtocolError",
			Message: "the kernel broke the channel protocol and was killed: " + o.broken.Error()}
	case o.timedOut || o.cancelled || o.killed:
		sig := "SIGKILL"
		res.Signal = &sig
		if o.result != nil && o.result.Exception != nil {
			e := o.result.Exception
			res.Exception = &api.Exception{Type: e.Type, Message: e.Message, Traceback: e.Traceback}
		}
	case o.exit != nil && o.exit.Result != nil:
		res.ExitCode, res.Signal = o.exit.Result.ExitCode, o.exit.Result.Signal
		if o.exit.OOMKilled && res.Signal == nil {
			sig := "SIGKILL"
			res.Signal, res.ExitCode = &sig, nil
		}
	default:
		sig := "SIGKILL"
		res.Signal = &sig
	}
	return res
}

// kernelExecRecord is the audit record linking an exec to its kernel.
func (s *Server) kernelExecRecord(d decision, caller Caller, k *kernel, restarted bool) error {
	return s.writeAudit(s.record(d.launch.ExecID, audit.StepKernelExec, caller, nil, map[string]any{
		"kernel_id": k.id, "language": k.language, "mode": d.mode, "restarted": restarted,
		"session_id": d.facts["session_id"],
	}))
}

// kernelReapRecord ends a kernel exec's trail.
func (s *Server) kernelReapRecord(d decision, caller Caller, k *kernel, res *ExecResult, o outcome) {
	facts := map[string]any{
		"exit_code": res.ExitCode, "signal": res.Signal, "timed_out": res.TimedOut, "duration_ms": res.DurationMS,
		"stdout_truncated": res.StdoutTruncated, "stderr_truncated": res.StderrTruncated, "oom_killed": res.OOMKilled,
		"kernel_id": k.id, "displays": len(res.Displays), "stopped": stoppedOf(o),
	}
	if res.Kernel != nil {
		facts["execution_count"] = res.Kernel.ExecutionCount
	}
	if o.broken != nil {
		facts["protocol_error"] = o.broken.Error()
	}
	if res.QuotaExceeded {
		facts["quota_exceeded"] = true
		if o.exit != nil && o.exit.QuotaErr != "" {
			facts["quota_error"] = o.exit.QuotaErr
		}
	}
	_ = s.writeAudit(s.record(d.launch.ExecID, audit.StepReap, caller, nil, facts))
}

func stoppedOf(o outcome) string {
	switch {
	case o.timedOut:
		return "timeout"
	case o.cancelled:
		return "cancelled"
	case o.broken != nil:
		return "protocol"
	case o.result != nil:
		return "exited"
	}
	return "kernel_ended"
}

// kernelModeUnavailable is the refusal of kernel mode by a launcher that
// cannot start kernels.
func kernelModeUnavailable() error {
	return errdefs.New(errdefs.ErrUnavailable, "this supervisor's launcher cannot run kernels", "use mode \"process\"", nil)
}

// signalName names signal n as a process exec's result does.
func signalName(n int) string {
	if name := unix.SignalName(syscall.Signal(n)); name != "" {
		return name
	}
	return fmt.Sprintf("SIG%d", n)
}
