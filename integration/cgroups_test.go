package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
)

// These tests hold on cgroup v1 (this host) and v2 (the VM matrix) alike:
// the harness delegates whichever the host has (cgroupharness_test.go).

// TestNoCgroupsRefusesToStart: a supervisor that cannot enforce memory and
// pids limits refuses to start, saying why and how to fix it (fail closed).
func TestNoCgroupsRefusesToStart(t *testing.T) {
	in := setup(t)
	id := randID()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, in.path("bin/sandboxd"), "--socket", in.path("run", "nocg-"+id+".sock"),
		"--state-dir", in.path("state"), "--audit-log", in.path("state/logs", "audit-nocg-"+id+".log"),
		"--helper", in.path("libexec", "nsinit"), "--helper-config", in.path("etc/nsinit.json"),
		// v1: a parent nobody delegated; v2: not placed in the delegated
		// root, so the supervisor is in the test's root-owned cgroup.
		"--cgroup-parent", in.cgroupParent+"-none")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(in.uid), Gid: uint32(in.gid), Groups: []uint32{}}}
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if ctx.Err() != nil || !errors.As(err, &ee) {
		t.Fatalf("a supervisor without cgroups did not refuse to start (err %v):\n%s", err, out)
	}
	for _, want := range []string{"refusing to start", "limits cannot be enforced", "fix:", "--allow-no-cgroups"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the refusal does not say %q:\n%s", want, out)
		}
	}
}

// TestAllowNoCgroupsIsDegraded: with --allow-no-cgroups the supervisor
// starts, health says degraded with cgroups none, every result (cold and
// warm) attests 0 for memory, pids and CPU -- not the requested values --
// its usage says rusage, and doctor fails the cgroups check unless told
// the same flag, then warns.
func TestAllowNoCgroupsIsDegraded(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{noCgroups: true, extra: append([]string{"--allow-no-cgroups"}, warmOn...)})
	status, body := s.do("GET", "/v1/health", nil)
	var h api.Health
	if err := json.Unmarshal(body, &h); err != nil || status != 200 {
		t.Fatalf("health %d %s", status, body)
	}
	if !h.OK || h.Status != api.HealthDegraded || h.Checks.Cgroups != "none" {
		t.Fatalf("health ok %v status %q cgroups %q: want ready, degraded, none", h.OK, h.Status, h.Checks.Cgroups)
	}
	waitWarm(t, s, "python", 2)
	// The supervisor's limits are the defaults (2 GiB, 256 pids, 1 CPU):
	// none of them may be attested.
	warm := py("print('warm')")
	cold := py("print('cold')")
	cold["env"] = map[string]string{"X": "1"} // a request with env launches cold
	for _, tc := range []struct {
		name string
		req  map[string]any
		warm bool
	}{{"warm", warm, true}, {"cold", cold, false}} {
		r := s.exec(tc.req)
		if _, ok := warmExecs(t, s)[r.ID]; ok != tc.warm {
			t.Fatalf("%s exec served warm = %v", tc.name, ok)
		}
		l := r.Policy.Limits
		if l.MemoryBytes != 0 || l.Pids != 0 || l.CPUs != 0 {
			t.Errorf("%s: policy.limits memory %d pids %d cpus %v: claims limits nothing enforces", tc.name, l.MemoryBytes, l.Pids, l.CPUs)
		}
		if r.Usage.Source != api.UsageSourceRusage {
			t.Errorf("%s: usage.source %q without a cgroup, want rusage", tc.name, r.Usage.Source)
		}
	}
	for _, tc := range []struct {
		flags []string
		want  string
	}{{nil, "fail"}, {[]string{"--allow-no-cgroups"}, "warn"}} {
		if got := doctorCgroups(t, in, s, tc.flags...); got != tc.want {
			t.Errorf("doctor %v: cgroups check %q, want %q", tc.flags, got, tc.want)
		}
	}
}

// doctorCgroups runs sandboxctl doctor against s and returns the status
// of its cgroups check.
func doctorCgroups(t *testing.T, in *installation, s *supervisor, flags ...string) string {
	t.Helper()
	args := append([]string{"doctor", "--json", "--socket", s.socket, "--helper", in.path("libexec", "nsinit"), "--helper-config", in.path("etc/nsinit.json")}, flags...)
	cmd := exec.Command(in.path("bin/sandboxctl"), args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, _ := cmd.Output() // exits 1 when a check fails
	var rep struct {
		Checks []struct{ Name, Status, Detail string }
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("doctor output: %v: %s", err, out)
	}
	for _, c := range rep.Checks {
		if c.Name == "cgroups" {
			t.Logf("doctor %v: cgroups %s: %s", flags, c.Status, c.Detail)
			return c.Status
		}
	}
	t.Fatalf("no cgroups check in %s", out)
	return ""
}

// spin200 burns about 0.3 s of CPU and holds 200 MiB (every page written).
const spin200 = `sum(i*i for i in range(3_000_000))
b = bytearray(200 << 20)
for i in range(0, len(b), 4096):
    b[i] = 1
print('done')`

// TestUsageFromCgroup: usage is the exec cgroup's, cold and warm: the
// CPU of a fixed amount of work and a 200 MiB peak, with source cgroup;
// and a sleeping exec uses far less CPU than a spinning one.
func TestUsageFromCgroup(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{extra: warmOn})
	waitWarm(t, s, "python", 2)
	cold := py(spin200)
	cold["env"] = map[string]string{"X": "1"}
	for _, tc := range []struct {
		name string
		req  map[string]any
		warm bool
	}{{"warm", py(spin200), true}, {"cold", cold, false}} {
		r := s.exec(tc.req)
		if _, ok := warmExecs(t, s)[r.ID]; ok != tc.warm {
			t.Fatalf("%s exec served warm = %v", tc.name, ok)
		}
		if r.Stdout != "done\n" {
			t.Fatalf("%s: %+v", tc.name, r)
		}
		t.Logf("%s: usage %+v", tc.name, r.Usage)
		if r.Usage.Source != api.UsageSourceCgroup {
			t.Errorf("%s: usage.source %q, want cgroup", tc.name, r.Usage.Source)
		}
		if r.Usage.CPUMS < 200 {
			t.Errorf("%s: cpu_ms %d for about 0.3 s of CPU", tc.name, r.Usage.CPUMS)
		}
		if r.Usage.MaxRSSKB < 200<<10 {
			t.Errorf("%s: max_rss_kb %d with 200 MiB written", tc.name, r.Usage.MaxRSSKB)
		}
	}
	// A fixed amount of work, not a wall-clock spin: CPU time, not the
	// share of a busy host's CPU the spin got, is what is compared.
	sleep := s.exec(py("import time; time.sleep(1)"))
	spin := s.exec(py("sum(i*i for i in range(6_000_000))"))
	t.Logf("sleep %+v, spin %+v", sleep.Usage, spin.Usage)
	if spin.Usage.CPUMS-sleep.Usage.CPUMS < 150 {
		t.Errorf("cpu_ms sleep %d, spin %d: the spin's CPU is not in it", sleep.Usage.CPUMS, spin.Usage.CPUMS)
	}
}

// TestSupervisorSIGKILLLeavesNoCgroup: a supervisor killed with SIGKILL
// mid-exec leaves the exec's cgroup (and whatever still runs in it) to the
// next start, which kills and removes it: nothing of the exec survives.
func TestSupervisorSIGKILLLeavesNoCgroup(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{extra: []string{"--warm-pool", "0"}})
	req := py("import subprocess, time\nsubprocess.Popen(['sleep', '60'])\nprint('started', flush=True)\ntime.sleep(60)")
	req["timeout_ms"] = 60000
	b, _ := json.Marshal(req)
	// Not s.do: the request is cut off by the kill, which s.do would fail on.
	go func() {
		if resp, err := s.client.Post("http://sandboxd/v1/exec", "application/json", bytes.NewReader(b)); err == nil {
			resp.Body.Close()
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for len(in.execCgroupsNow()) == 0 || !hasProcess(in.uid, "sleep 60") {
		if time.Now().After(deadline) {
			t.Fatalf("the exec never ran: cgroups %v, processes %v", in.execCgroupsNow(), userProcesses(in.uid))
		}
		time.Sleep(50 * time.Millisecond)
	}
	cgs := in.execCgroupsNow()
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-s.done
	s2 := in.startSupervisor(t, supervisorOpts{extra: []string{"--warm-pool", "0"}})
	deadline = time.Now().Add(10 * time.Second)
	for (len(in.execCgroupsNow()) > 0 || hasProcess(in.uid, "sleep 60", s2.cmd.Process.Pid)) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if left := in.execCgroupsNow(); len(left) > 0 {
		t.Errorf("exec cgroups %v left after SIGKILL and restart (were %v)", left, cgs)
	}
	if hasProcess(in.uid, "sleep 60", s2.cmd.Process.Pid) {
		t.Errorf("the exec's processes survived: %v", userProcesses(in.uid, s2.cmd.Process.Pid))
	}
}

// hasProcess reports whether a process of uid (other than exclude) has
// cmdline in its command line.
func hasProcess(uid int, cmdline string, exclude ...int) bool {
	for _, p := range userProcesses(uid, exclude...) {
		if strings.Contains(p, cmdline) {
			return true
		}
	}
	return false
}

// TestSweepNamesWhatItCannotKill: a stale exec cgroup that holds a process
// the service uid may not signal (here a sleep of the namespace owner's
// uid, what a fault in the helper's clean-up would leave) is not removed
// by the start-up sweep on cgroup v1, which has no cgroup.kill: the
// supervisor's log then names the process, its command and uid, and the
// root command that ends it. On v2 cgroup.kill ends it whatever its uid,
// and the cgroup goes.
func TestSweepNamesWhatItCannotKill(t *testing.T) {
	in := setup(t)
	holder := exec.Command("sleep", "300")
	holder.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(in.ownerUID), Gid: uint32(in.ownerGID), NoSetGroups: true}}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = holder.Wait(); close(exited) }()
	name := strings.Repeat("5e", 16)
	var dirs []string
	t.Cleanup(func() {
		_ = holder.Process.Kill()
		<-exited
		for _, d := range dirs {
			for i := 0; i < 100 && syscall.Rmdir(d) == syscall.EBUSY; i++ {
				time.Sleep(10 * time.Millisecond)
			}
		}
	})
	pid := strconv.Itoa(holder.Process.Pid)
	for _, parent := range in.cgroupDirs {
		d := filepath.Join(parent, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(pid), 0o644); err != nil {
			t.Fatalf("move the holder into %s: %v", d, err)
		}
	}
	s := in.startSupervisor(t, supervisorOpts{extra: []string{"--warm-pool", "0"}})
	s.stop()
	log := s.logs.String()
	if in.cgroupMode == "v2" {
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			t.Fatalf("cgroup.kill left the owner's process %s running:\n%s", pid, log)
		}
		if _, err := os.Stat(dirs[0]); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the stale cgroup %s is still there (%v):\n%s", dirs[0], err, log)
		}
		return
	}
	want := fmt.Sprintf("exec cgroup %s still holds pid %s (sleep, uid %d), which the service uid could not kill; as root: kill -KILL %s, then restart sandboxd", name, pid, in.ownerUID, pid)
	if !strings.Contains(log, want) {
		t.Fatalf("the sweep's warning does not name the process it could not kill; want %q in:\n%s", want, log)
	}
}
