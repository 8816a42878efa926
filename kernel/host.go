package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/kernel/protocol"
	"github.com/sandboxd/sandboxd/kernel/runners"
	"github.com/sandboxd/sandboxd/launch"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/workspace"
)

// Runners is what kernels and run-once execs need of the launcher
// (launch.HelperLauncher); a launcher without it runs every exec as a
// plain process and refuses kernel mode.
type Runners interface {
	launch.Starter
	CollectArtifacts(req launch.Request, wsName string, res *launch.ExecResult)
	ArtifactLimits() workspace.ArtifactLimits
	Stage(req launch.Request) error
	// AppliedLimits is what a launch is really held to (0 for memory,
	// pids and CPU where no cgroup enforces them): an exec's attestation.
	AppliedLimits(l policy.Limits) policy.Limits
}

// Proxy is a session kernel's network "egress" proxy, served for the
// kernel's whole life, with records per exec.
type Proxy interface {
	// BeginExec attributes the kernel's connections to exec execID until
	// the returned end, which cuts its open connections and returns its
	// network object.
	BeginExec(ctx context.Context, execID string, caller launch.Caller) (end func() *api.NetworkResult)
	// Stop closes the proxy and every connection still open.
	Stop()
}

// Host starts and drives kernels. Its hooks are its owner's (the
// supervisor's): the kernel package knows nothing of sockets or of the
// audit log's records beyond the facts it hands over.
type Host struct {
	Runners Runners
	// Egress serves the proxy of an egress kernel's launch req (named by
	// its launch id) and points req at it (its Egress and environment).
	Egress func(req *launch.Request) (Proxy, error)
	// Audit writes a supervisor record of exec execID: f's step, f its
	// typed facts.
	Audit func(execID string, caller launch.Caller, f facts.Facts) error
	// FrameBudget bounds the bytes of frames all kernels hold at once
	// (shared by every Host of a supervisor); nil: no shared bound.
	FrameBudget *protocol.Budget
}

// Frame budget defaults: two maximal frames in flight at once across all
// kernels (a frame's decoding allocates up to about seven times its line,
// so about 450 MiB at most), and how long a frame may wait for its share.
const (
	DefaultFrameBudgetBytes = 2 * (protocol.MaxFrameBytes + 1)
	FrameBudgetWait         = 5 * time.Second
)

// Exec is one decided exec as a kernel runs it.
type Exec struct {
	Launch     launch.Request // the decided launch: id, caller, code, env, limits
	Mode       string         // the exec's mode, as its kernel_exec record says
	SessionID  string         // a session exec's session
	Entrypoint string         // a code-node call's function ("": none)
	Inputs     json.RawMessage
	Emit       func(Output) bool // streams output as it happens; nil: buffered
}

// request is the exec as the kernel channel's request; its env reaches
// the runner, which sets it for this exec alone.
func (x Exec) request() protocol.Execute {
	return protocol.Execute{ID: x.Launch.ExecID, Code: x.Launch.Code, Stdin: string(x.Launch.Stdin),
		Entrypoint: x.Entrypoint, Inputs: x.Inputs, Env: x.Launch.Env}
}

// ModeUnavailable is the refusal of kernel mode by a launcher that cannot
// start kernels.
func ModeUnavailable() error {
	return errdefs.New(errdefs.ErrUnavailable, "this supervisor's launcher cannot run kernels", "use mode \"process\"", nil)
}

// runnerRequest is the sandbox launch of a runner: the runner's source as
// the payload's code, the mode in its environment (policy refuses
// SANDBOXD_ names in a request, so only the host sets it).
func runnerRequest(base launch.Request, id, mode string) (launch.Request, error) {
	src, err := runners.Source(base.Runtime)
	if err != nil {
		return launch.Request{}, err
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

// start launches a runner and waits for its ready frame.
func (h *Host) start(ctx context.Context, req launch.Request) (*Kernel, error) {
	k := newKernel(req.Runtime, req.Environment)
	k.budget = h.FrameBudget
	sb, err := h.Runners.Start(ctx, req, k.read)
	if err != nil {
		return nil, err
	}
	k.id, k.sb, k.enc = sb.ID(), sb, protocol.NewEncoder(sb.Stdin())
	k.setKill(func() { go sb.Stop() })
	if err := k.brokenErr(); err != nil && !errors.Is(err, io.EOF) {
		go sb.Stop() // it broke the protocol before its kill was set
	}
	timer := time.NewTimer(readyTimeout)
	defer timer.Stop()
	select {
	case err = <-k.ready:
	case <-sb.Done():
		err = fmt.Errorf("it exited before it was ready")
	case <-timer.C:
		err = fmt.Errorf("no ready frame within %s", readyTimeout)
	}
	if err != nil {
		return nil, startError(k, err)
	}
	return k, nil
}
