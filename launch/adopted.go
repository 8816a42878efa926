package launch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The supervisor is a child subreaper (cmd/sandboxd): what a sandbox leaves
// orphaned is re-parented to it rather than to the host's init. Most of it
// is reaped where it is expected -- the sandbox's pid 1 by its pidfd at
// teardown -- but not all: a helper that is SIGKILLed (by the supervisor's
// kill after its grace, the OOM killer, an operator) leaves its keeper,
// which ends the namespace and exits, and anything else the helper had
// adopted as a subreaper itself, as zombies nobody waits for. Each holds a
// pid until reaped.
//
// ReapAdopted reaps them. It must never take the exit status of a child a
// launch waits for (os/exec's Wait would then fail and the launch would
// lose its helper's status), so it reaps only zombies whose pid is not
// one of the supervisor's own forks: every fork of a helper registers its
// pid (ownChildren) before the fork's lock is released, and a scan holds
// that lock, so no scan sees a child of ours before it is registered.

// children is the set of the supervisor's own forks that a Wait is
// pending for. It is process-wide by nature, as the kernel's list of a
// process's children is: one per process, shared by every launcher.
type children struct {
	fork sync.RWMutex // read: a fork and its registration; write: a scan
	mu   sync.Mutex
	pids map[int]struct{}
}

var ownChildren = &children{pids: map[int]struct{}{}}

// forked runs start (which forks a child and returns its pid, or an
// error) so that no scan runs between the fork and the registration.
func (c *children) forked(start func() (int, error)) error {
	c.fork.RLock()
	defer c.fork.RUnlock()
	pid, err := start()
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.pids[pid] = struct{}{}
	c.mu.Unlock()
	return nil
}

// waited unregisters pid once its Wait returned (it has been reaped).
func (c *children) waited(pid int) {
	c.mu.Lock()
	delete(c.pids, pid)
	c.mu.Unlock()
}

func (c *children) own(pid int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.pids[pid]
	return ok
}

// ReapAdopted reaps, every interval until ctx ends, the zombies re-parented
// to this process that no launch waits for.
func ReapAdopted(ctx context.Context, interval time.Duration, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n, err := ownChildren.reapAdopted(); err != nil {
			log.Warn("reap adopted children", "err", err, "reaped", n)
		} else if n > 0 {
			log.Debug("reaped adopted children", "n", n)
		}
	}
}

// reapAdopted is one scan: it reaps every zombie child that is not one of
// our own forks and returns how many.
func (c *children) reapAdopted() (int, error) {
	c.fork.Lock()
	defer c.fork.Unlock()
	pids, err := childPIDs()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, pid := range pids {
		if c.own(pid) || !zombie(pid) {
			continue
		}
		var info unix.Siginfo
		// P_PID with WNOHANG on a zombie that is ours and not waited for:
		// no one else may wait for it, so this cannot race a Wait.
		if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG, nil); err != nil && !errors.Is(err, unix.ECHILD) {
			return n, fmt.Errorf("waitid %d: %w", pid, err)
		}
		n++
	}
	return n, nil
}

// childPIDs lists this process's children, over all its threads (a
// child's parent is the thread that forked it, or any thread after a
// re-parenting).
func childPIDs() ([]int, error) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, fmt.Errorf("list threads: %w", err)
	}
	var pids []int
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		if err != nil {
			continue // the thread exited meanwhile
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids, nil
}

// zombie reports whether pid has exited and waits to be reaped.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// "pid (comm) S ...": comm may hold anything but ends at the last ')'.
	s := string(b)
	k := strings.LastIndexByte(s, ')')
	return k >= 0 && k+2 < len(s) && s[k+2] == 'Z'
}
