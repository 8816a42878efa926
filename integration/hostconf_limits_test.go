//go:build hostconf

package integration

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The host-conformance suite's limits, OOM, fork bomb, kernels, pools,
// restart, SIGKILL recovery and leak checks (see hostconf_test.go).

// TestHostLimitsEnforced: every limit a result attests is written into a
// cgroup of its own while the exec runs (memory.max, memory.swap.max,
// pids.max, cpu.max): the attestation is what the kernel enforces.
func TestHostLimitsEnforced(t *testing.T) {
	h := hostSvc(t)
	root := h.cgroupRoot()
	// Every limited cgroup with processes, polled until the exec returns:
	// the idle warm sandboxes' cgroups carry limits too (at the background
	// CPU weight), so the exec's own is found among them by its values.
	done, stop := make(chan struct{}), make(chan struct{})
	seenSet := map[string]bool{}
	go func() {
		defer close(done)
		for i := 0; i < 200; i++ {
			for _, d := range cgroupDirs(root) {
				if readTrim(filepath.Join(d, "cgroup.procs")) != "" && readTrim(filepath.Join(d, "memory.max")) != "max" &&
					readTrim(filepath.Join(d, "pids.max")) != "max" {
					seenSet[fmt.Sprintf("%s memory.max=%s memory.swap.max=%s pids.max=%s cpu.max=%q cpu.weight=%s", d,
						readTrim(filepath.Join(d, "memory.max")), readTrim(filepath.Join(d, "memory.swap.max")),
						readTrim(filepath.Join(d, "pids.max")), readTrim(filepath.Join(d, "cpu.max")), readTrim(filepath.Join(d, "cpu.weight")))] = true
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	r := h.exec("/v1/exec", py("import time\ntime.sleep(6)\nprint('slept')"))
	close(stop)
	<-done
	seen := slices.Sorted(maps.Keys(seenSet))
	l := r.Policy.Limits
	if l.MemoryBytes <= 0 || l.Pids <= 0 || l.CPUs <= 0 {
		t.Fatalf("attested limits %+v: memory, pids and cpu must all be enforced on this host", l)
	}
	// The exec runs at the default CPU weight, also when a warm sandbox
	// built in the background (weight 1) took it.
	want := []string{"memory.max=" + strconv.FormatInt(l.MemoryBytes, 10), "memory.swap.max=0", "pids.max=" + strconv.FormatInt(l.Pids, 10),
		fmt.Sprintf("cpu.max=\"%d 100000\"", int64(l.CPUs*100000)), "cpu.weight=100"}
	for _, s := range seen {
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(s, w)
		}
		if ok {
			t.Logf("enforced: %s", s)
			return
		}
	}
	t.Fatalf("no cgroup below %s held the attested limits %v while the exec ran; seen: %v", root, want, seen)
}

// TestHostMemoryBombOOMKilled allocates 256 MiB more than the memory limit
// a first exec attests, 64 MiB at a time (every page written: under TCG
// page faults are slow, so the bomb is sized to the limit, not fixed).
func TestHostMemoryBombOOMKilled(t *testing.T) {
	h := hostSvc(t)
	limit := h.exec("/v1/exec", py("print(1)")).Policy.Limits.MemoryBytes
	if limit <= 0 {
		t.Fatalf("attested memory_bytes %d: no memory limit is enforced", limit)
	}
	chunks := (limit + 256<<20) / (64 << 20)
	r := h.exec("/v1/exec", py(fmt.Sprintf("b = [bytearray(64 << 20) for _ in range(%d)]\nprint('allocated')", chunks)))
	if !r.OOMKilled || r.Signal == nil || *r.Signal != "SIGKILL" || r.Stdout != "" {
		t.Fatalf("oom_killed %v signal %s stdout %q: want an OOM kill", r.OOMKilled, deref(r.Signal), r.Stdout)
	}
	if m := r.Policy.Limits.MemoryBytes; m != limit {
		t.Fatalf("attested memory_bytes %d: want the enforced limit %d", m, limit)
	}
	// Under the limit nothing is flagged: the flag comes from this exec's
	// memory.events, not from anything else on the host.
	if r := h.exec("/v1/exec", py("b = bytearray(64 << 20)\nprint('ok')")); r.OOMKilled || r.Stdout != "ok\n" {
		t.Fatalf("a 64 MiB payload: %+v", r)
	}
}

func TestHostForkBombContained(t *testing.T) {
	h := hostSvc(t)
	bomb := py(`
import os, time
while True:
    try:
        os.fork()
    except OSError as e:
        print('fork refused:', e.errno, flush=True)
        time.sleep(3)
        os._exit(0)
`)
	// A minute: under TCG on a loaded host, 256 forks of python have taken
	// more than 20 s.
	bomb["timeout_ms"] = hcTimeoutMS
	before := len(userPids(serviceUsers()...))
	done := make(chan struct{})
	var r execResult
	go func() { defer close(done); r = h.exec("/v1/exec", bomb) }()
	time.Sleep(4 * time.Second)
	if n := h.exec("/v1/exec", py("print('neighbour ok')")); n.Stdout != "neighbour ok\n" {
		t.Errorf("a concurrent exec failed during the fork bomb: %+v", n)
	}
	<-done
	if !strings.Contains(r.Stdout, "fork refused: 11") {
		t.Errorf("the bomb was never refused a fork (EAGAIN): stdout %q stderr %.300q", r.Stdout, r.Stderr)
	}
	if r.Policy.Limits.Pids <= 0 {
		t.Errorf("attested pids %d: want the enforced pids.max", r.Policy.Limits.Pids)
	}
	waitFor(t, time.Minute, "the bomb's processes to go", func() string {
		if n := len(userPids(serviceUsers()...)); n > before+2 {
			return fmt.Sprintf("%d processes of the service users, %d before", n, before)
		}
		return ""
	})
}

// waitFor polls cond (empty: satisfied) until d has passed.
func waitFor(t *testing.T, d time.Duration, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s: %s", d, what, msg)
		}
		time.Sleep(time.Second)
	}
}

func TestHostKernels(t *testing.T) {
	h := hostSvc(t)
	for _, tc := range []struct{ lang, a, b, c string }{
		{"python", "x = 40", "x += 1", "print(x + 1)"},
		{"javascript", "const x = 40; let y = 1", "y += 1", "console.log(x + y)"},
	} {
		status, body, err := h.try("POST", "/v1/sessions", map[string]any{})
		if err != nil || status != 201 {
			t.Fatalf("create session: %d %v %s", status, err, body)
		}
		id := jsonField(t, body, "id")
		path := "/v1/sessions/" + id + "/exec"
		h.startKernel(path, lang(tc.lang, tc.a))
		h.exec(path, lang(tc.lang, tc.b))
		r := h.exec(path, lang(tc.lang, tc.c))
		if r.Stdout != "42\n" || r.Kernel == nil || r.Kernel.ExecutionCount != 3 {
			t.Errorf("%s kernel: %+v kernel %+v", tc.lang, r, r.Kernel)
		}
		if r.Policy.Limits.MemoryBytes <= 0 || r.Policy.Limits.Pids <= 0 {
			t.Errorf("%s kernel ran without enforced limits: %+v", tc.lang, r.Policy.Limits)
		}
		if status, body, _ := h.try("DELETE", "/v1/sessions/"+id, nil); status != 204 {
			t.Errorf("delete session: %d %s", status, body)
		}
	}
}

// startKernel runs a session's first exec, which starts its kernel. The
// supervisor gives a kernel 30 s to report ready; node under TCG on a
// loaded host has missed that (503 "did not start"), so a start is tried
// three times: this suite is about limits, not emulated start-up latency.
func (h *hostService) startKernel(path string, req map[string]any) {
	h.t.Helper()
	req["timeout_ms"] = hcTimeoutMS
	for i := 1; ; i++ {
		status, body, err := h.try("POST", path, req)
		if err == nil && status == 200 {
			return
		}
		if i == 3 || status != 503 || !strings.Contains(string(body), "did not start") {
			h.t.Fatalf("POST %s (attempt %d): status %d err %v: %s", path, i, status, err, body)
		}
		h.t.Logf("attempt %d: the kernel did not start in time under emulation: %s", i, body)
	}
}

// TestHostPools: the warm pool serves one-shot execs and the helper pool's
// pre-started helpers wait in cgroups of their own; both pools build in
// the background (cpu.weight 1).
func TestHostPools(t *testing.T) {
	h := hostSvc(t)
	waitFor(t, 3*time.Minute, "a warm python sandbox", func() string {
		if v := h.metric("sandboxd_warm_pool_idle", `runtime="python"`); v < 1 {
			return fmt.Sprintf("sandboxd_warm_pool_idle{python} = %v", v)
		}
		return ""
	})
	before := h.metric("sandboxd_warm_execs_total", "")
	h.exec("/v1/exec", py("print('warm')"))
	if after := h.metric("sandboxd_warm_execs_total", ""); after != before+1 {
		t.Errorf("sandboxd_warm_execs_total %v -> %v: the exec did not run warm", before, after)
	}
	root := h.cgroupRoot()
	waitFor(t, 2*time.Minute, "a pre-started helper in a pool-* cgroup", func() string {
		for _, d := range cgroupDirs(root) {
			if strings.HasPrefix(filepath.Base(d), "pool-") && readTrim(filepath.Join(d, "cgroup.procs")) != "" {
				if w := readTrim(filepath.Join(d, "cpu.weight")); w != "1" {
					return fmt.Sprintf("%s: cpu.weight %s, want 1 (a pre-started helper waits in the background)", d, w)
				}
				return ""
			}
		}
		return fmt.Sprintf("none below %s: %v", root, cgroupDirs(root))
	})
	// The idle warm sandboxes: the only cgroups with processes at weight 1
	// that are not pool-* ones (a session kernel's runs at 100).
	waitFor(t, 2*time.Minute, "idle warm sandboxes in the background", func() string {
		n := 0
		for _, d := range settledCgroups(root) {
			if readTrim(filepath.Join(d, "cgroup.procs")) != "" && readTrim(filepath.Join(d, "cpu.weight")) == "1" {
				n++
			}
		}
		if n == 0 {
			return "no cgroup with processes and cpu.weight 1 below " + root + ": the warm sandboxes are not built in the background"
		}
		return ""
	})
}

// metric reads one sample of the Prometheus text at /metrics (-1: absent).
func (h *hostService) metric(name, label string) float64 {
	h.t.Helper()
	status, body, err := h.try("GET", "/metrics", nil)
	if err != nil || status != 200 {
		h.t.Fatalf("GET /metrics: %d %v", status, err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, name) && strings.Contains(line, label) {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			return v
		}
	}
	return -1
}

// restart runs SANDBOXD_HC_RESTART and waits for a new supervisor.
func (h *hostService) restart(old int) int {
	h.t.Helper()
	cmd := hcEnv("SANDBOXD_HC_RESTART", "systemctl restart sandboxd")
	if out, err := exec.Command("sh", "-c", cmd).CombinedOutput(); err != nil {
		h.t.Fatalf("%s: %v: %s", cmd, err, out)
	}
	return h.awaitNewPid(old)
}

func (h *hostService) awaitNewPid(old int) int {
	h.t.Helper()
	var pid int
	waitFor(h.t, 2*time.Minute, "a new supervisor", func() string {
		p, err := h.pid()
		if err != nil || p == old {
			return fmt.Sprintf("pid %d (old %d) err %v", p, old, err)
		}
		pid = p
		return ""
	})
	h.waitReady(2 * time.Minute)
	return pid
}

// settledCgroups lists the cgroups of execs, kernels and warm sandboxes:
// those two levels or more below root (root/<cgroup parent>/<id>; the
// supervisor's own leaf and the cgroup parent are one level below), except
// the idle helper pool's (pool-*).
func settledCgroups(root string) []string {
	var out []string
	for _, d := range cgroupDirs(root) {
		rel, err := filepath.Rel(root, d)
		if err != nil || !strings.Contains(rel, "/") || strings.HasPrefix(filepath.Base(d), "pool-") {
			continue
		}
		out = append(out, d)
	}
	return out
}

func TestHostRestart(t *testing.T) {
	h := hostSvc(t)
	old, err := h.pid()
	if err != nil {
		t.Fatal(err)
	}
	pid := h.restart(old)
	t.Logf("supervisor %d restarted as %d", old, pid)
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", old)); err == nil {
		t.Errorf("the old supervisor %d is still alive", old)
	}
	if r := h.exec("/v1/exec", py("print('after restart')")); r.Stdout != "after restart\n" || r.Policy.Limits.MemoryBytes <= 0 {
		t.Fatalf("after restart: %+v", r)
	}
}

// TestHostKill9LeavesNothing: SIGKILL the supervisor during a one-shot exec
// and with a live kernel; once it is back, nothing of the old one is left:
// no process, no cgroup.
func TestHostKill9LeavesNothing(t *testing.T) {
	h := hostSvc(t)
	root := h.cgroupRoot()
	status, body, err := h.try("POST", "/v1/sessions", map[string]any{})
	if err != nil || status != 201 {
		t.Fatalf("create session: %d %v %s", status, err, body)
	}
	h.exec("/v1/sessions/"+jsonField(t, body, "id")+"/exec", py("k = 1"))
	slow := py("import time\ntime.sleep(50)")
	slow["timeout_ms"] = hcTimeoutMS
	go func() { _, _, _ = h.try("POST", "/v1/exec", slow) }()
	time.Sleep(10 * time.Second) // under TCG a cold python start takes seconds
	old, err := h.pid()
	if err != nil {
		t.Fatal(err)
	}
	oldProcs := userPids(serviceUsers()...)
	oldCgroups := settledCgroups(root)
	t.Logf("before SIGKILL of %d: %d processes, cgroups %v", old, len(oldProcs), oldCgroups)
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	pid := h.awaitNewPid(old)
	waitFor(t, 2*time.Minute, "the old supervisor's processes and cgroups to go", func() string {
		var left []string
		for p, name := range oldProcs {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", p)); err == nil && p != pid {
				if s := readTrim(fmt.Sprintf("/proc/%d/stat", p)); s != "" && !strings.Contains(s, ") Z ") {
					left = append(left, fmt.Sprintf("process %d (%s)", p, name))
				}
			}
		}
		for _, d := range oldCgroups {
			if _, err := os.Stat(d); err == nil {
				left = append(left, "cgroup "+d)
			}
		}
		return strings.Join(left, ", ")
	})
}

// TestHostLoadLeaks is a reduced `make load`: SANDBOXD_HC_LOAD_N one-shot
// execs at concurrency 2, then the supervisor's file descriptors, the
// service users' processes, the exec cgroups and the workspaces must be back
// at their baseline.
func TestHostLoadLeaks(t *testing.T) {
	h := hostSvc(t)
	n, _ := strconv.Atoi(hcEnv("SANDBOXD_HC_LOAD_N", "40"))
	pid, err := h.pid()
	if err != nil {
		t.Fatal(err)
	}
	root := h.cgroupRoot()
	workspaces := filepath.Join(hcEnv("SANDBOXD_HC_STATE_DIR", "/var/lib/sandboxd"), "workspaces")
	snap := func() leakCounts { return leakSnapshot(pid, root, workspaces) }
	base := settledSnapshot(t, snap)
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += 2 {
				req := py(fmt.Sprintf("print(%d)", i))
				if i%3 == 0 {
					req = lang("javascript", fmt.Sprintf("console.log(%d)", i))
				}
				req["timeout_ms"] = hcTimeoutMS
				status, body, err := h.try("POST", "/v1/exec", req)
				if err != nil || status != 200 || !strings.Contains(string(body), fmt.Sprintf(`"stdout":"%d\n"`, i)) {
					mu.Lock()
					failed++
					mu.Unlock()
					t.Logf("exec %d: %d %v %.300s", i, status, err, body)
				}
			}
		}(w)
	}
	wg.Wait()
	el := time.Since(start)
	t.Logf("load: %d execs at concurrency 2 in %v (%.1f/s), %d failed; baseline %+v", n, el.Round(time.Millisecond), float64(n)/el.Seconds(), failed, base)
	if failed > 0 {
		t.Errorf("%d of %d execs failed", failed, n)
	}
	waitFor(t, 2*time.Minute, "every resource back at its baseline", func() string {
		now := snap()
		if now.fds > base.fds+2 || now.procs > base.procs || now.cgroups > base.cgroups || now.workspaces > base.workspaces {
			return fmt.Sprintf("now %+v, baseline %+v", now, base)
		}
		t.Logf("after load: %+v", now)
		return ""
	})
}

type leakCounts struct{ fds, procs, cgroups, workspaces int }

func leakSnapshot(pid int, root, workspaces string) leakCounts {
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	ws, _ := os.ReadDir(workspaces)
	return leakCounts{fds: len(fds), procs: len(userPids(serviceUsers()...)), cgroups: len(settledCgroups(root)), workspaces: len(ws)}
}

func jsonField(t *testing.T, body []byte, name string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	v, ok := m[name].(string)
	if !ok || v == "" {
		t.Fatalf("no %s in %s", name, body)
	}
	return v
}

// settledSnapshot waits for three equal snapshots in a row (the pools
// refilled, nothing in flight) and returns it.
func settledSnapshot(t *testing.T, snap func() leakCounts) leakCounts {
	t.Helper()
	var last leakCounts
	same := 0
	waitFor(t, 3*time.Minute, "the service to settle", func() string {
		now := snap()
		if now == last {
			same++
		} else {
			same, last = 0, now
		}
		if same < 2 {
			return fmt.Sprintf("%+v", now)
		}
		return ""
	})
	return last
}
