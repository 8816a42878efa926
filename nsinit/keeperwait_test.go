package nsinit

import (
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestAwaitPidfd: the wait for the keeper ends when the process exits, not
// on a polling tick, and never outlasts its deadline.
func TestAwaitPidfd(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sleep    string
		deadline time.Duration
		min, max time.Duration
	}{
		{"exits first", "0.05", time.Second, 40 * time.Millisecond, 500 * time.Millisecond},
		{"deadline first", "5", 100 * time.Millisecond, 90 * time.Millisecond, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("sleep", tc.sleep)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
			pfd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
			if err != nil {
				t.Fatalf("pidfd_open: %v", err)
			}
			defer unix.Close(pfd)
			start := time.Now()
			if !awaitPidfd(pfd, start.Add(tc.deadline)) {
				t.Fatal("awaitPidfd could not wait")
			}
			if took := time.Since(start); took < tc.min || took > tc.max {
				t.Fatalf("awaitPidfd returned after %v, want between %v and %v", took, tc.min, tc.max)
			}
		})
	}
}
