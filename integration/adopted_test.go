package integration

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestKilledHelperLeavesNoZombie: a helper SIGKILLed -- one waiting in the
// helper pool, and one in the middle of a launch -- leaves its keeper
// (and whatever else it had adopted) to the supervisor, a child subreaper;
// the supervisor reaps them: no zombie child of it remains after a
// bounded wait.
func TestKilledHelperLeavesNoZombie(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{extra: []string{"--warm-pool", "0", "--helper-pool", "1"}})
	sup := s.cmd.Process.Pid

	pooled := waitChild(t, sup, func(pid int) bool { return preStarted(strconv.Itoa(pid)) })
	if err := syscall.Kill(pooled, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the pre-started helper %d: %v", pooled, err)
	}

	// One exec first: it finds the killed helper in the pool (discarded,
	// or failing that launch); the next one runs in a live helper.
	time.Sleep(200 * time.Millisecond)
	if status, body := s.do("POST", "/v1/exec", py("print(1)")); status != 200 {
		t.Logf("the exec after the pooled helper's kill: %d %s", status, body)
	}
	done := make(chan int, 1)
	go func() {
		status, _ := s.do("POST", "/v1/exec", py("import time; time.sleep(30)"))
		done <- status
	}()
	// The launch's helper is the one relaying a bwrap (a helper just
	// pre-started may not be in its pool cgroup yet).
	running := waitChild(t, sup, func(pid int) bool { return pid != pooled && len(zombies(pid)) == 0 && hasBwrap(pid) })
	time.Sleep(100 * time.Millisecond) // bwrap and the payload up
	if err := syscall.Kill(running, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the launch's helper %d: %v", running, err)
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the exec whose helper was killed did not end")
	}

	var left []string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if left = zombies(childrenOf(sup)...); len(left) == 0 {
			return
		}
	}
	t.Fatalf("zombie children of the supervisor %d after its helpers were killed:\n%s", sup, strings.Join(left, "\n"))
}

// waitChild waits for a helper child (sandboxd-nsinit, installed as nsinit) of pid for which ok holds.
func waitChild(t *testing.T, pid int, ok func(int) bool) int {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, c := range childrenOf(pid) {
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", c)); strings.HasSuffix(strings.TrimSpace(string(comm)), "nsinit") && ok(c) {
				return c
			}
		}
	}
	t.Fatalf("no such helper child of %d", pid)
	return 0
}

func hasBwrap(pid int) bool {
	for _, c := range childrenOf(pid) {
		if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", c)); strings.TrimSpace(string(comm)) == "bwrap" {
			return true
		}
	}
	return false
}

// zombies lists those of pids that have exited and wait to be reaped.
func zombies(pids ...int) []string {
	var out []string
	for _, c := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c))
		s := string(b)
		if k := strings.LastIndexByte(s, ')'); err == nil && k >= 0 && k+2 < len(s) && s[k+2] == 'Z' {
			out = append(out, s[:k+3])
		}
	}
	return out
}
