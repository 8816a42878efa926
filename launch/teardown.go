package launch

import (
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/cgroup"
)

// helperRun is what one helper invocation produced, once every process of
// it is gone.
type helperRun struct {
	relayed
	stop    stopReason
	stopErr error // why supervise stopped, when it says more than stop
	// killed: the supervisor stopped the exec (timeout, ctx, quota, permit).
	killed bool
	// quotaExceeded: the workspace went over its quota (or could not be
	// measured), seen by the watcher or by the check after the run;
	// quotaErr says why when the measurement failed.
	quotaExceeded bool
	quotaErr      error
	helperExit    int // the helper/bwrap process's exit status, -1 if signalled
	bwrap         bwrapOutcome
	reaperGone    bool // waited until the sandbox's pid 1 had exited
	oomKilled     bool
	cgroupLeft    int // processes still in the exec's cgroup after the reaper was gone
	stdout        *capturedStream
	stderr        *capturedStream
	usage         Usage
	cgUsage       cgroup.Usage // the cgroup's own counters at the reap
	duration      time.Duration
	pooled        bool         // the launch took a pre-started helper
	times         *launchTimes // complete once teardown has returned
}

// teardown stops what supervise decided to stop and reaps everything of the
// exec (phase "teardown"): it returns only when the helper, the sandbox's
// pid namespace and every stream are done.
func (hp *helperProc) teardown(stop stopReason, stopErr error) *helperRun {
	hp.times.exited = time.Now()
	defer func() { hp.times.done = time.Now() }()
	hr := &helperRun{stop: stop, stopErr: stopErr, killed: stop != stopExited, stdout: &hp.stdout, stderr: &hp.stderr,
		pooled: hp.pooled, times: &hp.times}
	if stop == stopQuota {
		hr.quotaExceeded, hr.quotaErr = true, stopErr
	}
	pidfd, pidfdKnown := -1, false
	if hr.killed {
		pidfd, pidfdKnown = hp.kill()
	}
	hr.bwrap = <-hp.status
	if !pidfdKnown {
		pidfd = <-hp.pidfd
	}
	if pidfd >= 0 {
		hr.reaperGone = reapReaper(pidfd)
	}
	if hp.cg != nil {
		// Belt and braces: the pid namespace is gone with its reaper, but
		// anything that escaped it into the cgroup is killed here.
		hr.oomKilled = hp.cg.OOMKilled()
		hr.cgroupLeft = len(hp.cg.Procs())
		hp.cg.KillAll()
	}
	hr.relayed = <-hp.reports
	<-hp.outDone
	<-hp.outDone
	hr.duration = time.Since(hp.begin)
	hr.helperExit, hr.usage = exitAndUsage(hp.wait.state)
	if hp.cg != nil {
		// Every process of the exec is gone (the reaper, then KillAll):
		// the cgroup's counters are its totals.
		hr.cgUsage = hp.cg.Usage()
		hr.usage = mergeUsage(hr.cgUsage, hp.usageBase, hr.usage)
	}
	if hr.killed {
		hr.bwrap.exit = nil // a killed payload's status is the kill
	}
	return hr
}

// kill stops a running exec and waits for the helper. The sandbox's pid 1
// (bwrap's reaper) goes first: the kernel then kills every process of its
// pid namespace -- setsid, double fork and daemons included -- and bwrap,
// still alive, reaps it and exits, so no orphan is left for the host's init.
// If the reaper is not known yet (bwrap still setting up), the helper is
// asked with SIGTERM: it is bwrap's parent and shares the namespace
// owner's uid with bwrap and its not-yet-switched child, which the
// supervisor may not signal (I10), so it stops bwrap, kills its children
// and then bwrap (nsinit killSandbox) and exits. A SIGKILL of the helper
// here left that child behind: bwrap's monitor died of its parent-death
// signal while its freshly cloned child, whose own --die-with-parent was
// not armed yet, blocked for ever on the eventfd the monitor was to
// signal -- an orphan of the owner's uid that no supervisor could kill
// (seen in CI, and its cgroup made every later start-up sweep wait). A
// helper that has not reached its relay dies of the SIGTERM as of a
// SIGKILL (nothing of bwrap exists yet). Past the grace period, SIGKILL.
// It returns the reaper's pidfd if it knew it.
func (hp *helperProc) kill() (pidfd int, known bool) {
	pidfd = -1
	select {
	case pidfd = <-hp.pidfd:
		known = true
	default:
	}
	if pidfd >= 0 {
		_ = unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0)
	} else {
		_ = hp.cmd.Process.Signal(unix.SIGTERM)
	}
	timer := time.NewTimer(hp.grace)
	defer timer.Stop()
	select {
	case hp.wait = <-hp.waited:
	case <-timer.C:
		_ = hp.cmd.Process.Kill()
		hp.wait = <-hp.waited
	}
	return pidfd, known
}

// reapReaper makes sure the sandbox's pid 1 is gone, and with it its pid
// namespace, then reaps it and closes its pidfd. bwrap exits as soon as
// its reaper reports the payload's status, without waiting for the reaper
// itself: the reaper is then orphaned and re-parented to the supervisor (a
// child subreaper, see cmd/sandboxd), and would stay a zombie of ours.
func reapReaper(pidfd int) bool {
	_ = unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0)
	gone := waitPidfd(pidfd)
	var info unix.Siginfo
	_ = unix.Waitid(unix.P_PIDFD, pidfd, &info, unix.WEXITED|unix.WNOHANG, nil)
	unix.Close(pidfd)
	return gone
}

// waitPidfd blocks until the process behind pidfd has exited. For the
// sandbox's pid 1 that means every process of its pid namespace is gone:
// the kernel kills and reaps them before pid 1's exit completes.
func waitPidfd(fd int) bool {
	for {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, -1)
		if err == unix.EINTR {
			continue
		}
		return err == nil && n == 1
	}
}

// mergeUsage is an exec's usage from its cgroup, less base (what a warm
// sandbox's build used before the exec took it), each resource falling
// back to the helper's rusage where the kernel keeps no such counter; the
// source says which (API.md, usage). The helper's rusage sees only the
// processes it waited for, so the payload's forked children, reaped by the
// sandbox's pid 1, are missing from it; the cgroup sees them all.
func mergeUsage(cg, base cgroup.Usage, ru Usage) Usage {
	u := Usage{CPUMS: ru.CPUMS, MaxRSSKB: ru.MaxRSSKB}
	if cg.CPUKnown {
		u.CPUMS = max(cg.CPU-base.CPU, 0).Milliseconds()
	}
	if cg.PeakKnown {
		u.MaxRSSKB = cg.PeakBytes / 1024
	}
	switch {
	case cg.CPUKnown && cg.PeakKnown:
		u.Source = api.UsageSourceCgroup
	case cg.CPUKnown || cg.PeakKnown:
		u.Source = api.UsageSourceMixed
	default:
		u.Source = api.UsageSourceRusage
	}
	return u
}

// exitAndUsage reads the helper's exit status and the resource usage of
// everything it waited for (the payload included), from wait4's rusage.
func exitAndUsage(st *os.ProcessState) (int, Usage) {
	if st == nil {
		return -1, Usage{}
	}
	var u Usage
	if ru, ok := st.SysUsage().(*syscall.Rusage); ok && ru != nil {
		u = Usage{
			CPUMS:    (ru.Utime.Sec+ru.Stime.Sec)*1000 + (int64(ru.Utime.Usec)+int64(ru.Stime.Usec))/1000,
			MaxRSSKB: ru.Maxrss,
			Source:   api.UsageSourceRusage,
		}
	}
	return st.ExitCode(), u
}
