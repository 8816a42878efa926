package integration

import (
	"testing"

	"github.com/sandboxd/sandboxd/api"
)

// TestUsageSessionExecs: a session's execs report usage from a cgroup too,
// through the API: a process-mode exec from its own cgroup (the cold
// path), a kernel exec from its kernel's cgroup during the exec (the CPU
// counter's growth, the memory peak reset at the exec's start). Each runs
// the fixed amount of work and the 200 MiB of spin200. Then a sleep and a
// spin in the same kernel: their CPU differs by the spin, so the kernel's
// idle time and its earlier execs are not counted.
func TestUsageSessionExecs(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	sess := s.kernelSession(t)
	for _, mode := range []string{api.ModeProcess, api.ModeKernel} {
		req := py(spin200)
		req["mode"] = mode
		r := s.kexec(t, sess.ID, req)
		t.Logf("session %s exec: usage %+v", mode, r.Usage)
		if r.Stdout != "done\n" {
			t.Fatalf("session %s exec: %+v", mode, r)
		}
		if r.Usage.Source != api.UsageSourceCgroup {
			t.Errorf("session %s exec: usage.source %q, want cgroup", mode, r.Usage.Source)
		}
		if r.Usage.CPUMS < 150 {
			t.Errorf("session %s exec: cpu_ms %d for about 0.3 s of CPU", mode, r.Usage.CPUMS)
		}
		if r.Usage.MaxRSSKB < 150<<10 {
			t.Errorf("session %s exec: max_rss_kb %d with 200 MiB written", mode, r.Usage.MaxRSSKB)
		}
		// One attestation for every kind of exec: the sandbox's
		// confinement and the limits as applied (cgroups here).
		if p := r.Policy; p.ProfileSHA256 == "" || p.MountsSHA256 == "" || p.HelperVersion == "" || p.Limits.MemoryBytes == 0 {
			t.Errorf("session %s exec: policy %+v, want its sandbox's confinement and applied limits", mode, p)
		}
	}
	kernel := func(code string) execResult {
		req := py(code)
		req["mode"] = api.ModeKernel
		return s.kexec(t, sess.ID, req)
	}
	// Free the 200 MiB the kernel still holds from the exec above.
	kernel("del b\nimport gc; gc.collect()")
	sleep := kernel("import time; time.sleep(1)")
	spin := kernel("sum(i*i for i in range(6_000_000))")
	t.Logf("kernel sleep %+v, spin %+v", sleep.Usage, spin.Usage)
	if sleep.Usage.Source != api.UsageSourceCgroup || spin.Usage.Source != api.UsageSourceCgroup {
		t.Errorf("kernel usage sources %q, %q; want cgroup", sleep.Usage.Source, spin.Usage.Source)
	}
	if spin.Usage.CPUMS-sleep.Usage.CPUMS < 150 {
		t.Errorf("kernel cpu_ms sleep %d, spin %d: the spin's CPU is not in it", sleep.Usage.CPUMS, spin.Usage.CPUMS)
	}
	if sleep.Usage.CPUMS > 150 {
		t.Errorf("kernel cpu_ms %d for a 1 s sleep: more than the exec's own CPU is counted", sleep.Usage.CPUMS)
	}
}
