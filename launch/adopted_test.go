package launch

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestReapAdoptedSparesOwnForks: a scan reaps a zombie child nobody waits
// for (as a killed helper's keeper is), and never one of our own forks
// whose Wait is still to come: that Wait gets its status.
func TestReapAdoptedSparesOwnForks(t *testing.T) {
	c := &children{pids: map[int]struct{}{}}
	own := exec.Command("/bin/true")
	if err := c.forked(func() (int, error) {
		if err := own.Start(); err != nil {
			return 0, err
		}
		return own.Process.Pid, nil
	}); err != nil {
		t.Fatal(err)
	}
	// Not registered: stands for an adopted child.
	adopted, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	waitZombie(t, own.Process.Pid)
	waitZombie(t, adopted)

	n, err := c.reapAdopted()
	if err != nil || n != 1 {
		t.Fatalf("reapAdopted: %d reaped, %v; want 1 (the unregistered child)", n, err)
	}
	if zombie(adopted) {
		t.Fatalf("the adopted child %d is still a zombie", adopted)
	}
	if err := own.Wait(); err != nil {
		t.Fatalf("our own fork's Wait after a scan: %v (its status was taken)", err)
	}
	c.waited(own.Process.Pid)
	if c.own(own.Process.Pid) {
		t.Fatal("still registered after its Wait")
	}
}

func waitZombie(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if zombie(pid) {
			return
		}
	}
	t.Fatalf("child %d never became a zombie", pid)
}
