package kernel

import (
	"context"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/kernel/runners"
	"github.com/sandboxd/sandboxd/launch"
)

// SessionLaunch is the long-lived launch (launch id id) of a session's
// kernel, from the exec that starts it: its caller, limits (no timeout:
// each exec has its own) and the session's workspace; no env (each exec's
// env travels on its execute request and holds for that exec alone: the
// exec that happens to start the kernel must not leave its variables to
// the execs after it), no files (each exec stages its own) and no
// artifacts (collected per exec).
func SessionLaunch(base launch.Request, id string) (launch.Request, error) {
	base.Env = nil
	req, err := runnerRequest(base, id, runners.ModeKernel)
	if err != nil {
		return req, err
	}
	req.Files, req.Artifacts, req.Kernel = nil, nil, "session"
	req.Limits.TimeoutMS = 0
	return req, nil
}

// StartSession starts a session's kernel; for network "egress" with its
// own proxy (the Egress hook), bound into that one sandbox, which ends
// with the kernel. restarted says that an earlier kernel of its language
// had run in the session; the exec that starts it reports that itself.
func (h *Host) StartSession(req launch.Request, restarted bool) (*Kernel, error) {
	var proxy Proxy
	if req.Network == api.NetworkEgress {
		var err error
		if proxy, err = h.Egress(&req); err != nil {
			return nil, err
		}
	}
	k, err := h.start(context.Background(), req)
	if err != nil {
		if proxy != nil {
			proxy.Stop()
		}
		return nil, err
	}
	k.restarted, k.reported = restarted, true
	if proxy != nil {
		k.egress = proxy
		go func() {
			<-k.sb.Done()
			proxy.Stop()
		}()
	}
	return k, nil
}

// Claim takes a running kernel for an exec: restarted says that it was
// started because an earlier one ended and no exec has said so yet.
func (k *Kernel) Claim() (restarted bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	restarted = k.restarted && !k.reported
	k.reported = true
	return restarted
}

// Run runs a session exec in its session's kernel k (restarted: as Claim
// or StartSession said): it writes the kernel_exec record (the link to the
// kernel's launch id), then, once the exec has ended, its reap record and
// its artifacts. A kernel the exec left dead (!Alive) is the caller's to
// drop.
func (h *Host) Run(ctx context.Context, k *Kernel, restarted bool, x Exec) (*launch.ExecResult, error) {
	if err := h.execRecord(x, k, restarted); err != nil {
		return nil, err
	}
	s := newSink(x.Launch.ExecID, x.Launch.Limits.OutputLimitBytes, h.Runners.ArtifactLimits(), x.Emit)
	network := k.beginExec(ctx, x)
	meter := k.sb.MeterExec()
	o := k.execute(ctx, x.request(), x.Launch.Limits.Timeout(), s)
	if o.exit == nil && k.sb.OOMKilled() {
		// node's evaluator was killed and reported as 128+9: the kernel
		// is not trusted after an OOM kill.
		ex := k.sb.Stop()
		o.exit = &ex
	}
	if o.exit == nil {
		o.exit = stopIfOverQuota(k)
	}
	res := h.assemble(x, k, s, o)
	res.Usage = meter()
	res.Network = network()
	res.OOMKilled = res.OOMKilled || k.sb.OOMKilled()
	k.mu.Lock()
	res.Kernel = &api.KernelInfo{ID: k.id, ExecutionCount: k.count, Restarted: restarted}
	k.mu.Unlock()
	h.reapRecord(x, k, res, o)
	h.Runners.CollectArtifacts(x.Launch, x.Launch.SessionWorkspace, res)
	return res, nil
}

// beginExec attributes the kernel's egress connections to the exec until
// the returned finish, which returns its network object (nil without
// egress).
func (k *Kernel) beginExec(ctx context.Context, x Exec) func() *api.NetworkResult {
	if k.egress == nil {
		return func() *api.NetworkResult { return nil }
	}
	return k.egress.BeginExec(ctx, x.Launch.ExecID, x.Launch.Caller)
}

// stopIfOverQuota measures the session's workspace after a kernel exec that
// left the kernel running. Past the quota (or unmeasurable), the kernel is
// stopped as the watcher would have stopped it, and the exit says why: an
// exec that wrote past the quota between two polls is not let off.
func stopIfOverQuota(k *Kernel) *launch.SandboxExit {
	over, err := k.sb.OverQuota()
	if !over {
		return nil
	}
	ex := k.sb.Stop()
	ex.QuotaExceeded = true
	if err != nil && ex.QuotaErr == "" {
		ex.QuotaErr = err.Error()
	}
	return &ex
}
