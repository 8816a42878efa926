//go:build bench

package cgroup

import (
	"fmt"
	"os/exec"
	"sort"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/internal/testutil"
)

// TestCgroupCost is part of `make bench`: what each cgroup operation of a
// launch costs on this host's v1 hierarchies (p50 of n), so the launch
// path's figures can be told apart: the move of a process (Add, the one
// the helper pool takes off the critical path), and what a launch still
// does with a pre-started helper's cgroup (Rename, SetLimits).
func TestCgroupCost(t *testing.T) {
	testutil.RequireRoot(t, "delegate a cgroup")
	m, _ := realV1Parent(t, "sandboxd-bench-")
	const n = 60
	cost := map[string][]time.Duration{}
	timed := func(name string, f func() error) {
		start := time.Now()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		cost[name] = append(cost[name], time.Since(start))
	}
	l := Limits{MemoryBytes: 2 << 30, Pids: 256, CPUs: 1}
	// Back to back, then one every 30 ms as launches come: a v1 move takes
	// cgroup_threadgroup_rwsem for writing, whose rcu_sync waits for an RCU
	// grace period unless a writer passed moments ago (the favordynmods
	// mount option of newer kernels, v2 only, avoids it).
	for i := 0; i < 2*n; i++ {
		gap := ""
		if i >= n {
			gap = ", 30 ms apart"
			time.Sleep(30 * time.Millisecond)
		}
		cmd := exec.Command("sleep", "10")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var e *Exec
		timed("Create (mkdir x3)", func() (err error) { e, err = m.Create(fmt.Sprintf("pool-%d", i), Limits{}); return err })
		timed("Add (move a process, x3)"+gap, func() error { return e.Add(cmd.Process.Pid) })
		timed("Rename (x3)", func() error { return e.Rename(fmt.Sprintf("exec-%d", i)) })
		timed("SetLimits (4 writes)", func() error { return e.SetLimits(l) })
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		e.KillAll()
		timed("Remove (rmdir x3)", e.Remove)
	}
	figs := map[string]any{}
	fmt.Printf("\ncgroup v1 operations, p50/p95 (ms):\n")
	for _, name := range []string{"Create (mkdir x3)", "Add (move a process, x3)", "Add (move a process, x3), 30 ms apart", "Rename (x3)", "SetLimits (4 writes)", "Remove (rmdir x3)"} {
		d := cost[name]
		sort.Slice(d, func(a, b int) bool { return d[a] < d[b] })
		p50, p95 := float64(d[len(d)/2].Microseconds())/1000, float64(d[len(d)*95/100].Microseconds())/1000
		fmt.Printf("  %-40s %7.3f %7.3f\n", name, p50, p95)
		figs[name] = map[string]float64{"p50_ms": p50, "p95_ms": p95}
	}
	testutil.WriteBenchPart(t, "cgroup_cost", figs)
}
