package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
)

// These tests prove the resource limits with the mechanism the host
// offers: cgroup v1 (memory, pids, cpu) delegated to the service user below
// the test's own cgroup, or a cgroup v2 subtree delegated as systemd's
// Delegate=yes does (cgroupharness_test.go), plus rlimits and the /tmp
// tmpfs size. They run unchanged on both.

func rssKB(t *testing.T, pid int) int64 {
	t.Helper()
	f := strings.Fields(statusField(t, pid, "VmRSS"))
	n, _ := strconv.ParseInt(f[0], 10, 64)
	return n
}

// execCgroupsNow lists the exec cgroups below the delegated directories
// (supervisor.execCgroupsLeft waits for them to go, without the idle warm
// pool's).
func (in *installation) execCgroupsNow() []string {
	var left []string
	for _, d := range in.cgroupDirs {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			// pool-*: the supervisor's pre-started helpers (--helper-pool),
			// no exec's; poolCgroups counts them.
			if e.IsDir() && !strings.HasPrefix(e.Name(), "pool-") {
				left = append(left, filepath.Join(d, e.Name()))
			}
		}
	}
	return left
}

// poolCgroups lists the pre-started helpers' cgroups (--helper-pool).
func (in *installation) poolCgroups() []string {
	var pool []string
	for _, d := range in.cgroupDirs {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if e.IsDir() && strings.HasPrefix(e.Name(), "pool-") {
				pool = append(pool, filepath.Join(d, e.Name()))
			}
		}
	}
	return pool
}

func TestHealthReportsCgroups(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	status, body := s.do("GET", "/v1/health", nil)
	var h api.Health
	if err := json.Unmarshal(body, &h); err != nil || status != 200 || !h.OK {
		t.Fatalf("health %d %s", status, body)
	}
	if h.Checks.Cgroups != in.cgroupMode || h.Status != api.HealthReady {
		t.Fatalf("checks.cgroups = %q, status %q: want %s (this host's) and ready", h.Checks.Cgroups, h.Status, in.cgroupMode)
	}
	r := s.exec(py("print(1)"))
	if r.Policy.Limits.MemoryBytes != 2<<30 || r.Policy.Limits.Pids != 256 || r.Policy.Limits.CPUs != 1 {
		t.Errorf("attested limits %v: want the defaults, enforced", r.Policy.Limits)
	}
	if left := s.execCgroupsLeft(); len(left) > 0 {
		t.Fatalf("exec cgroups left behind: %v", left)
	}
}

func TestForkBombStopsAtPidsLimit(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{extra: []string{"--pids", "64"}})
	bomb := py(`
import os, time
n = 0
while True:
    try:
        os.fork(); n += 1
    except OSError as e:
        print('fork refused:', e.errno, flush=True)
        time.sleep(3)
        os._exit(0)
`)
	bomb["timeout_ms"] = 8000
	done := make(chan execResult, 1)
	go func() { done <- s.exec(bomb) }()
	time.Sleep(1500 * time.Millisecond)
	// A neighbour still runs while the bomb is at its limit.
	if r := s.exec(py("print('neighbour ok')")); r.Stdout != "neighbour ok\n" {
		t.Fatalf("a concurrent exec failed during the fork bomb: %+v", r)
	}
	if n := len(s.execProcessesNow()); n > 64+8 {
		t.Errorf("%d processes of the service user during the bomb, limit 64", n)
	}
	r := <-done
	if r.Policy.Limits.Pids != 64 {
		t.Errorf("policy.limits.pids = %d, want the enforced 64", r.Policy.Limits.Pids)
	}
	if !strings.Contains(r.Stdout, "fork refused: 11") {
		t.Errorf("the bomb was never refused a fork (EAGAIN): %q %q", r.Stdout, r.Stderr)
	}
	if left := s.execProcesses(); len(left) > 0 {
		t.Fatalf("processes left after the bomb: %v", left)
	}
	if left := s.execCgroupsLeft(); len(left) > 0 {
		t.Fatalf("exec cgroups left behind: %v", left)
	}
}

func TestMemoryBombIsOOMKilled(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{extra: []string{"--memory", "256MiB"}})
	before := rssKB(t, s.cmd.Process.Pid)
	r := s.exec(py("b = bytearray(1 << 30)\nprint('allocated')"))
	if !r.OOMKilled || r.Signal == nil || *r.Signal != "SIGKILL" || r.Stdout != "" {
		t.Fatalf("oom_killed %v signal %v stdout %q stderr %q: want an OOM kill", r.OOMKilled, r.Signal, r.Stdout, r.Stderr)
	}
	if r.Policy.Limits.MemoryBytes != 256<<20 {
		t.Errorf("policy.limits.memory_bytes = %d, want the enforced 256 MiB", r.Policy.Limits.MemoryBytes)
	}
	if after := rssKB(t, s.cmd.Process.Pid); after-before > 20<<10 {
		t.Errorf("supervisor RSS grew from %d KiB to %d KiB", before, after)
	}
	// Under the limit, nothing is flagged.
	if r := s.exec(py("b = bytearray(64 << 20)\nprint('ok')")); r.OOMKilled || r.Stdout != "ok\n" {
		t.Fatalf("a 64 MiB payload under a 256 MiB limit: %+v", r)
	}
}

func TestStdoutFloodIsBounded(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	before := rssKB(t, s.cmd.Process.Pid)
	start := time.Now()
	req := py(`
import sys
chunk = b'x' * (1 << 20)
w = sys.stdout.buffer
for i in range(5 * 1024):
    w.write(chunk)
w.write(b'THE END')
`)
	req["timeout_ms"] = 60000
	r := s.exec(req)
	took := time.Since(start)
	if !r.StdoutTruncated || len(r.Stdout) != 262144 {
		t.Fatalf("truncated %v, %d bytes kept: want the 256 KiB cap", r.StdoutTruncated, len(r.Stdout))
	}
	if !strings.HasPrefix(r.Stdout, "xxxx") || !strings.HasSuffix(r.Stdout, "xTHE END") || !strings.Contains(r.Stdout, "bytes cut") {
		t.Errorf("want head, marker and tail; got %q…%q", r.Stdout[:20], r.Stdout[len(r.Stdout)-40:])
	}
	if r.ExitCode == nil || *r.ExitCode != 0 {
		t.Errorf("the flood should finish on its own: exit %v signal %v", r.ExitCode, r.Signal)
	}
	if after := rssKB(t, s.cmd.Process.Pid); after-before > 20<<10 {
		t.Errorf("supervisor RSS grew from %d KiB to %d KiB during a 5 GiB flood", before, after)
	}
	t.Logf("5 GiB of stdout drained in %v", took)
}

func TestTmpFillStopsAtItsCap(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{extra: []string{"--tmp-size", "32MiB"}})
	r := s.exec(py(`
import errno
n = 0
try:
    with open('/tmp/fill', 'wb') as f:
        while True:
            f.write(b'x' * (1 << 20)); f.flush(); n += 1
except OSError as e:
    print(n, errno.errorcode[e.errno])
`))
	f := strings.Fields(r.Stdout)
	if len(f) != 2 || f[1] != "ENOSPC" {
		t.Fatalf("stdout %q stderr %q: want a count and ENOSPC", r.Stdout, r.Stderr)
	}
	if n, _ := strconv.Atoi(f[0]); n < 28 || n > 32 {
		t.Fatalf("wrote %d MiB to a 32 MiB /tmp", n)
	}
}

func TestCPULimitAndConcurrency(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{extra: []string{"--max-queued-execs", "2"}})

	t.Run("one CPU per exec", func(t *testing.T) {
		// Two processes spinning for 1.5 s of wall time: with a 1-CPU
		// quota their CPU time stays near 1.5 s, not 3 s.
		r := s.exec(py(`
import os, time
end = time.time() + 1.5
pid = os.fork()
while time.time() < end: pass
if pid: os.waitpid(pid, 0)
`))
		if r.ExitCode == nil || *r.ExitCode != 0 {
			t.Fatalf("%+v", r)
		}
		if r.Usage.CPUMS > 2100 {
			t.Errorf("cpu_ms %d for 1.5 s of wall time on 1 CPU", r.Usage.CPUMS)
		}
	})

	t.Run("eight CPU-bound execs against four slots", func(t *testing.T) {
		var wg sync.WaitGroup
		codes := make([]int, 8)
		start := time.Now()
		for i := range codes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req := py("import time\nend = time.time() + 1\nwhile time.time() < end: pass")
				req["timeout_ms"] = 2500
				status, _ := s.do("POST", "/v1/exec", req)
				codes[i] = status
			}()
		}
		wg.Wait()
		ok, limited := 0, 0
		for _, c := range codes {
			switch c {
			case 200:
				ok++
			case 429:
				limited++
			default:
				t.Errorf("status %d", c)
			}
		}
		if ok+limited != 8 || ok < 3 {
			t.Fatalf("statuses %v: want every exec answered, most of them run", codes)
		}
		if took := time.Since(start); took > 20*time.Second {
			t.Fatalf("8 one-second execs took %v: something waited forever", took)
		}
		t.Logf("statuses %v", fmt.Sprint(codes))
	})
	if left := s.execCgroupsLeft(); len(left) > 0 {
		t.Fatalf("exec cgroups left behind: %v", left)
	}
}
