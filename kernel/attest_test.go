package kernel

import (
	"io"
	"log/slog"
	"testing"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/kernel/protocol"
	"github.com/sandboxd/sandboxd/launch"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/workspace"
)

// TestKernelExecAttestsAppliedLimits: a kernel exec (and a run-once
// call, which shares the assembly) attests the limits its launch is held
// to, not the ones requested. Without a cgroup nothing enforces memory,
// pids or CPU, so they are attested as 0; timeout and output limits are
// the supervisor's own and stay.
func TestKernelExecAttestsAppliedLimits(t *testing.T) {
	hl, err := launch.New(launch.Config{HelperPath: "/nonexistent/sandboxd-nsinit", WorkspaceRoot: t.TempDir(),
		Sink: &audit.Memory{}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	h := &Host{Runners: hl} // no Cgroups: cgroup mode none
	requested := policy.Limits{TimeoutMS: 5000, OutputLimitBytes: 1 << 16, MemoryBytes: 256 << 20, Pids: 64, CPUs: 1.5}
	x := Exec{Launch: launch.Request{ExecID: "e1", Runtime: "python", Limits: requested}, Mode: "kernel"}
	k := newKernel("python", "")
	s := newSink("e1", requested.OutputLimitBytes, workspace.ArtifactLimits{MaxFiles: 1, MaxFileBytes: 1, MaxTotalBytes: 1}, nil)
	res := h.assemble(x, k, s, outcome{result: &protocol.Result{ID: "e1"}})
	got := res.Policy.Limits
	if got.MemoryBytes != 0 || got.Pids != 0 || got.CPUs != 0 {
		t.Errorf("without a cgroup the kernel exec attests memory_bytes %d, pids %d, cpus %v; want 0 (not enforced, not claimed)",
			got.MemoryBytes, got.Pids, got.CPUs)
	}
	if got.TimeoutMS != requested.TimeoutMS || got.OutputLimitBytes != requested.OutputLimitBytes {
		t.Errorf("timeout %d, output %d: the supervisor's own limits must stay attested", got.TimeoutMS, got.OutputLimitBytes)
	}
}
