package supervisor

import (
	"context"

	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/kernel"
	"github.com/sandboxd/sandboxd/launch"
	"github.com/sandboxd/sandboxd/policy"
)

// kernelHost is the kernel host over the launcher, if the launcher can
// start runners (launch.HelperLauncher); a Launcher without it runs every
// exec as a plain process and refuses kernel mode.
func (s *Server) kernelHost() (*kernel.Host, bool) {
	rl, ok := s.launcher.(kernel.Runners)
	if !ok {
		return nil, false
	}
	return &kernel.Host{Runners: rl, Egress: s.kernelEgress, Audit: s.auditStep, FrameBudget: s.frames}, true
}

// auditStep writes a supervisor record of exec execID, of f's step.
func (s *Server) auditStep(execID string, caller launch.Caller, f facts.Facts) error {
	return s.writeAudit(s.record(execID, f.Step(), caller, nil, f))
}

// useRunner reports whether a process-mode exec runs through its runner's
// run-once mode: a code-node call (an entrypoint) of python or
// javascript. Every other process-mode exec runs as a plain interpreter,
// with today's fidelity: the payload's own fds 0-2 and nothing else, its
// environment exactly the request's, output at pipe speed (a 5 GiB flood is
// drained in a minute; as JSON frames through the runner it is not).
func (s *Server) useRunner(d decision) bool {
	if _, ok := s.kernelHost(); !ok || d.entrypoint == "" {
		return false
	}
	return policy.HasRunner(d.launch.Runtime)
}

// runOnce runs an exec through the runner's run-once mode
// (kernel.Host.RunOnce): a process-mode code-node call, or a one-shot
// kernel exec, which gets a throwaway kernel of its own, started cold and
// ended after it, so that displays come back without a session. The warm
// pool cannot serve a kernel: a warm sandbox hands the payload its stdout
// as a plain pipe, while a kernel's stdout is the framed channel the host
// drives from the start.
func (s *Server) runOnce(ctx context.Context, d decision, emit func(event) bool) (*launch.ExecResult, error) {
	host, ok := s.kernelHost()
	if !ok {
		return nil, kernel.ModeUnavailable()
	}
	return host.RunOnce(ctx, d.kernelExec(emit))
}

// kernelExec is the decision as a kernel runs it, its output streamed
// through emit (nil: buffered).
func (d decision) kernelExec(emit func(event) bool) kernel.Exec {
	x := kernel.Exec{Launch: d.launch, Mode: d.mode, Entrypoint: d.entrypoint, Inputs: d.inputs}
	if d.facts != nil {
		x.SessionID = d.facts.SessionID
	}
	if emit != nil {
		x.Emit = func(o kernel.Output) bool { return emit(event{Type: o.Type, Data: o.Data, Display: o.Display}) }
	}
	return x
}
