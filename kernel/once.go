package kernel

import (
	"context"
	"time"

	"github.com/sandboxd/sandboxd/kernel/runners"
	"github.com/sandboxd/sandboxd/launch"
)

// RunOnce runs a process-mode python/javascript exec through the runner's
// run-once mode, in its own sandbox whose launch records are the exec's
// own (prepare, the helper's steps, reap under the exec id).
func (h *Host) RunOnce(ctx context.Context, x Exec) (*launch.ExecResult, error) {
	req, err := runnerRequest(x.Launch, x.Launch.ExecID, runners.ModeOnce)
	if err != nil {
		return nil, err
	}
	k, err := h.start(context.WithoutCancel(ctx), req)
	if err != nil {
		return nil, err
	}
	s := newSink(x.Launch.ExecID, x.Launch.Limits.OutputLimitBytes, h.Runners.ArtifactLimits(), x.Emit)
	o := k.execute(ctx, x.request(), x.Launch.Limits.Timeout(), s)
	if o.exit == nil {
		o.exit = awaitOnceExit(k)
	}
	res := h.assemble(x, k, s, o)
	if ex := o.exit; ex != nil && ex.Result != nil {
		// The runner's sandbox was this exec's alone: its reap's usage
		// (from its cgroup) is the exec's.
		res.Usage = ex.Result.Usage
		res.QuotaExceeded = ex.Result.QuotaExceeded
		// Collected by the sandbox after its reap, before a one-shot
		// workspace is removed.
		res.Artifacts, res.ArtifactsTruncated = ex.Result.Artifacts, res.ArtifactsTruncated || ex.Result.ArtifactsTruncated
	}
	if res.Artifacts == nil {
		res.Artifacts = []launch.Artifact{}
	}
	return res, nil
}

// awaitOnceExit waits for a run-once runner to exit after its result, and
// kills it if it lingers.
func awaitOnceExit(k *Kernel) *launch.SandboxExit {
	timer := time.NewTimer(onceExitGrace)
	defer timer.Stop()
	select {
	case <-k.sb.Done():
	case <-timer.C:
	}
	ex := k.sb.Stop()
	return &ex
}
