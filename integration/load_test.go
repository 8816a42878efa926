//go:build load

package integration

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestLoad is `make load`: SANDBOXD_LOAD_N one-shot execs (default 10000)
// at concurrency 4 on loopback only, bounded by SANDBOXD_LOAD_MAX (default
// 15 minutes), then a before/after comparison of everything an exec could
// leak. It fails if anything did not come back to its baseline.
func TestLoad(t *testing.T) {
	in := setup(t)
	// 5 slots so that one client (one uid, at most slots-1) runs 4 at once.
	s := in.startSupervisor(t, supervisorOpts{extra: []string{"--max-concurrent-execs", "5", "--audit-fsync=false"}})
	n, maxDur := 10000, 15*time.Minute
	if v, err := strconv.Atoi(os.Getenv("SANDBOXD_LOAD_N")); err == nil && v > 0 {
		n = v
	}
	if v, err := time.ParseDuration(os.Getenv("SANDBOXD_LOAD_MAX")); err == nil && v > 0 {
		maxDur = v
	}
	pid := s.cmd.Process.Pid
	snap := func() map[string]int {
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		mounts, _ := os.ReadFile("/proc/self/mountinfo")
		// The idle warm pool sandboxes are no exec's: they are left out
		// of the process, cgroup and workspace counts.
		idle := s.idleWarm()
		ents, _ := os.ReadDir(in.path("state/workspaces"))
		ws := 0
		for _, e := range ents {
			if !idle[e.Name()] {
				ws++
			}
		}
		threads := statusField(t, pid, "Threads")
		th, _ := strconv.Atoi(threads)
		return map[string]int{
			"supervisor fds":         len(fds),
			"supervisor rss KiB":     int(rssKB(t, pid)),
			"supervisor threads":     th,
			"service-user processes": len(s.execProcesses()),
			"host mounts":            strings.Count(string(mounts), "\n"),
			"exec cgroups":           len(s.execCgroupsLeft()),
			"helper pool cgroups":    len(in.poolCgroups()), // --helper-pool: full again
			"workspace directories":  ws,
		}
	}
	// Warm up, so lazily created runtime state is in the baseline.
	for i := 0; i < 20; i++ {
		s.exec(py("print(1)"))
	}
	time.Sleep(500 * time.Millisecond) // the warm-up's connections close
	waitPoolFull(t, s)                 // its sandboxes hold supervisor fds
	before := snap()
	var done, failed atomic.Int64
	deadline := time.Now().Add(maxDur)
	start := time.Now()
	var wg sync.WaitGroup
	next := make(chan int)
	go func() {
		for i := 0; i < n && time.Now().Before(deadline); i++ {
			next <- i
		}
		close(next)
	}()
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				status, body := s.do("POST", "/v1/exec", py("print(1)"))
				if status != 200 || !strings.Contains(string(body), `"stdout":"1\n"`) {
					if failed.Add(1) <= 5 {
						t.Errorf("exec failed: %d %s", status, body)
					}
				}
				if d := done.Add(1); d%1000 == 0 {
					fmt.Printf("  %d execs, %.1f/s\n", d, float64(d)/time.Since(start).Seconds())
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	time.Sleep(500 * time.Millisecond) // let the last answers' cleanup settle
	waitPoolFull(t, s)
	after := snap()
	fmt.Printf("\nsandboxd load: %d one-shot execs (%d failed) at concurrency 4 in %v (%.1f/s)\n",
		done.Load(), failed.Load(), elapsed.Round(time.Second), float64(done.Load())/elapsed.Seconds())
	fmt.Printf("  %-24s %10s %10s\n", "", "before", "after")
	for _, k := range []string{"supervisor fds", "supervisor rss KiB", "supervisor threads", "service-user processes", "host mounts", "exec cgroups", "helper pool cgroups", "workspace directories"} {
		fmt.Printf("  %-24s %10d %10d\n", k, before[k], after[k])
	}
	for _, k := range []string{"supervisor fds", "service-user processes", "host mounts", "exec cgroups", "helper pool cgroups", "workspace directories"} {
		if after[k] != before[k] {
			t.Errorf("%s: %d before, %d after", k, before[k], after[k])
		}
	}
	if after["supervisor rss KiB"] > before["supervisor rss KiB"]+32<<10 {
		t.Errorf("supervisor RSS grew from %d to %d KiB", before["supervisor rss KiB"], after["supervisor rss KiB"])
	}
	if failed.Load() > 0 {
		t.Errorf("%d execs failed", failed.Load())
	}
}

// waitPoolFull waits until the warm pool holds its default two built
// sandboxes of each language (each holds a few supervisor fds), unless the
// suite runs without a pool.
func waitPoolFull(t *testing.T, s *supervisor) {
	t.Helper()
	if os.Getenv("SANDBOXD_IT_WARM_POOL") == "0" {
		return
	}
	waitWarm(t, s, "python", 2)
	waitWarm(t, s, "javascript", 2)
}
