package integration

import (
	"syscall"
	"testing"
	"time"
)

// TestHelperPoolLeavesNothing: the supervisor keeps --helper-pool helpers
// pre-started, each in its own pool-* cgroup; each exec takes one (its
// cgroup then carries the exec's id); a SIGKILL of the supervisor takes
// the waiting helpers with it (parent-death signal), and the next
// supervisor's sweep removes their cgroups.
func TestHelperPoolLeavesNothing(t *testing.T) {
	in := setup(t)
	// No warm pool: its sandboxes take pre-started helpers too, and the
	// counts below are the helper pool's alone.
	s := in.startSupervisor(t, supervisorOpts{extra: []string{"--helper-pool", "2", "--warm-pool", "0"}})
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s after 10 s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	perCgroup := len(in.cgroupDirs) // one directory per v1 hierarchy (memory, pids, cpu, and cpuacct where apart), one on v2
	waitFor("the pool is not full", func() bool { return len(in.poolCgroups()) == 2*perCgroup })
	// Direct children only, once settled: a helper still in its C prelude
	// briefly has the namespace holder below it.
	var helpers map[int]string
	waitFor("the supervisor does not have exactly 2 pre-started helpers", func() bool {
		helpers = children(s.cmd.Process.Pid)
		return len(helpers) == 2
	})
	for i := 0; i < 3; i++ {
		if r := s.exec(py("print(open('/proc/self/cgroup').read().count('pool-'))")); r.Stdout != "0\n" {
			t.Fatalf("exec %d: %+v (its cgroup must carry the exec id, not pool-)", i, r)
		}
	}
	if left := s.execCgroupsLeft(); len(left) > 0 {
		t.Fatalf("exec cgroups left behind: %v", left)
	}
	waitFor("the pool did not refill", func() bool { return len(in.poolCgroups()) == 2*perCgroup })
	helpers = descendants(s.cmd.Process.Pid)
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	waitFor("pre-started helpers outlived their supervisor", func() bool { return len(alive(helpers)) == 0 })
	old := map[string]bool{}
	for _, d := range in.poolCgroups() {
		old[d] = true
	}
	s2 := in.startSupervisor(t, supervisorOpts{extra: []string{"--helper-pool", "1", "--warm-pool", "0"}})
	waitFor("the new pool is not full", func() bool { return len(in.poolCgroups()) == perCgroup })
	for _, d := range in.poolCgroups() {
		if old[d] {
			t.Fatalf("the killed supervisor's pool cgroup %s survived the restart", d)
		}
	}
	s2.stop()
	waitFor("pool cgroups left after a clean stop", func() bool { return len(in.poolCgroups()) == 0 })
}

// children are the processes whose parent is pid (pid to start time).
func children(pid int) map[int]string {
	out := map[int]string{}
	for p, start := range descendants(pid) {
		if pp, _, ok := procStat(p); ok && pp == pid {
			out[p] = start
		}
	}
	return out
}
