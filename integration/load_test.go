//go:build load

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestLoad is `make load`: SANDBOXD_LOAD_N one-shot execs (default 10000;
// `make load-reduced` runs 1000) at concurrency 4 on loopback only,
// bounded by SANDBOXD_LOAD_MAX (default 15 minutes), then a before/after
// census of everything an exec could leak. The warm pool's idle sandboxes
// and the pre-started helpers are counted apart from the execs' (census):
// before each census the pools are left to settle, and a pool counts as
// settled only when the metrics, the audit log, the processes, the
// cgroups and the workspaces agree on it. Anything of an exec left over
// fails the test.
//
// The audit log rotates every 1 MiB here, so that a reduced run crosses
// rotations and retention as the full one does at the default 64 MiB: an
// idle warm sandbox whose prepare record is in a rotated (or deleted)
// file is still a warm sandbox.
func TestLoad(t *testing.T) {
	in := setup(t)
	// 5 slots so that one client (one uid, at most slots-1) runs 4 at once.
	s := in.startSupervisor(t, supervisorOpts{extra: []string{"--max-concurrent-execs", "5", "--audit-fsync=false",
		"--audit-rotate-bytes", "1MiB"}})
	n, maxDur := envInt("SANDBOXD_LOAD_N", 10000), 15*time.Minute
	if v, err := time.ParseDuration(os.Getenv("SANDBOXD_LOAD_MAX")); err == nil && v > 0 {
		maxDur = v
	}
	ledger := newWarmLedger(s.audit)
	stop := ledger.follow(t, 500*time.Millisecond)
	defer stop()
	// Warm up, so lazily created runtime state is in the baseline.
	for i := 0; i < 20; i++ {
		s.exec(py("print(1)"))
	}
	before, why := settle(s, ledger, time.Minute)
	if why != "" {
		t.Fatalf("the pools never settled before the load: %s", why)
	}
	res := runLoad(t, s, n, maxDur)
	after, why := settle(s, ledger, time.Minute)
	res.bare = bareInterpreter(t, in)
	res.print(n)
	compareCensus(t, before, after, why)
	if res.failed > 0 {
		t.Errorf("%d execs failed", res.failed)
	}
}

// loadResult is what the load's execs did.
type loadResult struct {
	done, failed      int64
	elapsed           time.Duration
	lat               []time.Duration
	warmHit, warmMiss float64       // sandboxd_warm_execs_total, _misses_total
	auditFiles        int           // rotated audit files retained at the end
	bare              time.Duration // p50 of a bare python3 -c 'print(1)' right after
}

// bareInterpreter is the p50 of 20 bare python3 -c 'print(1)' as the
// service user with an empty environment: the yardstick of this host's
// speed at the time, for comparing rates across runs and hosts.
func bareInterpreter(t *testing.T, in *installation) time.Duration {
	var d []time.Duration
	for i := 0; i < 20; i++ {
		cmd := exec.Command("/usr/bin/env", "-i", "PATH=/usr/bin:/bin", "/usr/bin/python3", "-c", "print(1)")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(in.uid), Gid: uint32(in.gid), Groups: []uint32{}}}
		cmd.Dir = "/"
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil || string(out) != "1\n" {
			t.Fatalf("bare python3: %v %q", err, out)
		}
		d = append(d, time.Since(start))
	}
	return pct(d, 0.5)
}

// runLoad sends n one-shot execs from 4 clients, until maxDur at most.
func runLoad(t *testing.T, s *supervisor, n int, maxDur time.Duration) loadResult {
	var done, failed atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	hit0, miss0 := metricValue(s, "sandboxd_warm_execs_total"), metricValue(s, "sandboxd_warm_misses_total")
	deadline := time.Now().Add(maxDur)
	start := time.Now()
	next := make(chan int)
	go func() {
		for i := 0; i < n && time.Now().Before(deadline); i++ {
			next <- i
		}
		close(next)
	}()
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				t0 := time.Now()
				status, body := s.do("POST", "/v1/exec", py("print(1)"))
				took := time.Since(t0)
				if status != 200 || !strings.Contains(string(body), `"stdout":"1\n"`) {
					if failed.Add(1) <= 5 {
						t.Errorf("exec failed: %d %s", status, body)
					}
				}
				mu.Lock()
				lat = append(lat, took)
				mu.Unlock()
				if d := done.Add(1); d%1000 == 0 {
					fmt.Printf("  %d execs, %.1f/s\n", d, float64(d)/time.Since(start).Seconds())
				}
			}
		}()
	}
	wg.Wait()
	r := loadResult{done: done.Load(), failed: failed.Load(), elapsed: time.Since(start), lat: lat}
	r.warmHit = metricValue(s, "sandboxd_warm_execs_total") - hit0
	r.warmMiss = metricValue(s, "sandboxd_warm_misses_total") - miss0
	rotated, _ := filepath.Glob(s.audit + ".[0-9]*") // the head file is .head
	r.auditFiles = len(rotated)
	return r
}

// print writes the figures a closing note needs, and one LOAD_JSON line.
func (r loadResult) print(n int) {
	rate := float64(r.done) / r.elapsed.Seconds()
	cores := runtime.NumCPU()
	fmt.Printf("\nsandboxd load: %d of %d one-shot execs (%d failed) at concurrency 4 in %v: %.1f/s, %.1f/s per core (%d cores)\n",
		r.done, n, r.failed, r.elapsed.Round(time.Second), rate, rate/float64(cores), cores)
	fmt.Printf("  bare python3 -c 'print(1)' as the service user, p50 after the load: %s ms\n", msf(r.bare))
	fmt.Printf("  latency p50 %s ms, p95 %s ms, p99 %s ms, max %s ms; warm pool hits %.0f, misses %.0f; rotated audit files kept: %d\n",
		msf(pct(r.lat, 0.5)), msf(pct(r.lat, 0.95)), msf(pct(r.lat, 0.99)), msf(pct(r.lat, 1)), r.warmHit, r.warmMiss, r.auditFiles)
	fmt.Printf("LOAD_JSON {\"execs\":%d,\"requested\":%d,\"failed\":%d,\"seconds\":%.1f,\"execs_per_s\":%.2f,\"execs_per_s_per_core\":%.2f,\"cores\":%d,"+
		"\"p50_ms\":%s,\"p95_ms\":%s,\"p99_ms\":%s,\"warm_hits\":%.0f,\"warm_misses\":%.0f,\"bare_python_p50_ms\":%s}\n",
		r.done, n, r.failed, r.elapsed.Seconds(), rate, rate/float64(cores), cores,
		msf(pct(r.lat, 0.5)), msf(pct(r.lat, 0.95)), msf(pct(r.lat, 0.99)), r.warmHit, r.warmMiss, msf(r.bare))
}

// compareCensus prints both censuses and fails on anything of an exec
// left over. The pools' own counts may differ (a pool that adapts its
// size), but only in step: the supervisor's fds are compared exactly when
// both pools have the size they had before.
func compareCensus(t *testing.T, before, after census, unsettled string) {
	b, a := before.counts(), after.counts()
	fmt.Printf("  %-26s %10s %10s\n", "", "before", "after")
	for _, k := range censusRows {
		fmt.Printf("  %-26s %10d %10d\n", k, b[k], a[k])
	}
	if d := fdDiff(before.fds, after.fds); d != "" {
		fmt.Printf("  supervisor fds by kind that changed: %s\n", d)
	}
	if unsettled != "" {
		t.Errorf("the pools never settled after the load: %s", unsettled)
	}
	for _, k := range []string{"exec processes", "exec cgroups", "exec workspaces", "host mounts"} {
		if a[k] != b[k] {
			t.Errorf("%s: %d before, %d after", k, b[k], a[k])
		}
	}
	for _, l := range [][]string{after.execProcs, after.execCgroups, after.execWorkspaces} {
		for i, x := range l {
			if i < 10 {
				t.Logf("left over: %s", x)
			}
		}
	}
	samePools := a["warm pool sandboxes"] == b["warm pool sandboxes"] && a["helper pool processes"] == b["helper pool processes"]
	switch {
	case samePools && a["supervisor fds"] != b["supervisor fds"]:
		t.Errorf("supervisor fds: %d before, %d after, with the pools as they were (%s)", b["supervisor fds"], a["supervisor fds"],
			fdDiff(before.fds, after.fds))
	case !samePools:
		fmt.Printf("  the pools changed size: supervisor fds not compared\n")
	}
	if a["supervisor rss KiB"] > b["supervisor rss KiB"]+32<<10 {
		t.Errorf("supervisor RSS grew from %d to %d KiB", b["supervisor rss KiB"], a["supervisor rss KiB"])
	}
}
