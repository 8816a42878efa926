package kernel

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/launch"
)

// assemble turns an exec's frames and outcome in kernel k into its result,
// with the same output caps as a process exec and the same attestation
// (launch.Attest: k's confinement, the exec's limits as applied).
func (h *Host) assemble(x Exec, k *Kernel, s *sink, o outcome) *launch.ExecResult {
	s.mu.Lock()
	displays, trunc := append([]api.Display{}, s.displays...), s.dispTrunc
	s.mu.Unlock()
	res := &launch.ExecResult{ID: x.Launch.ExecID, Stdout: s.stdout.String(), Stderr: s.stderr.String(),
		StdoutTruncated: s.stdout.Truncated(), StderrTruncated: s.stderr.Truncated(),
		DurationMS: o.took.Milliseconds(), TimedOut: o.timedOut, Artifacts: []launch.Artifact{},
		Displays: displays, ArtifactsTruncated: trunc}
	res.Policy = launch.Attest(k.sb.ExecFacts(), h.Runners.AppliedLimits(x.Launch.Limits))
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

// execRecord is the audit record linking an exec to its kernel.
func (h *Host) execRecord(x Exec, k *Kernel, restarted bool) error {
	return h.Audit(x.Launch.ExecID, x.Launch.Caller, &facts.KernelExec{
		KernelID: k.id, Language: k.language, Mode: x.Mode, Restarted: restarted, SessionID: x.SessionID,
	})
}

// reapRecord ends a kernel exec's trail: what every reap says
// (launch.ReapFacts), and the kernel's part.
func (h *Host) reapRecord(x Exec, k *Kernel, res *launch.ExecResult, o outcome) {
	f := launch.ReapFacts(res)
	f.KernelID, f.Displays, f.Stopped = k.id, len(res.Displays), stoppedOf(o)
	if res.Kernel != nil {
		f.ExecutionCount = res.Kernel.ExecutionCount
	}
	if o.broken != nil {
		f.ProtocolError = o.broken.Error()
	}
	if res.QuotaExceeded && o.exit != nil {
		f.QuotaError = o.exit.QuotaErr
	}
	_ = h.Audit(x.Launch.ExecID, x.Launch.Caller, f)
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

// signalName names signal n as a process exec's result does.
func signalName(n int) string {
	if name := unix.SignalName(syscall.Signal(n)); name != "" {
		return name
	}
	return fmt.Sprintf("SIG%d", n)
}
