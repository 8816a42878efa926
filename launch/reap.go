package launch

import (
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/policy"
)

// ReapFacts are the facts of a successful reap of any kind of exec (cold,
// warm, a session kernel's exec, a run-once call), from its result: the one
// builder of what every reap says, so that the four cannot drift apart.
// Each kind adds what only it knows (a launch its process facts, a kernel
// exec its kernel, a warm exec its sandbox).
func ReapFacts(res *ExecResult) *facts.Reap {
	return &facts.Reap{
		ExitCode: res.ExitCode, Signal: res.Signal, TimedOut: res.TimedOut, DurationMS: res.DurationMS,
		Usage:           &facts.Usage{CPUMS: res.Usage.CPUMS, MaxRSSKB: res.Usage.MaxRSSKB, Source: res.Usage.Source},
		StdoutTruncated: res.StdoutTruncated, StderrTruncated: res.StderrTruncated,
		OOMKilled: res.OOMKilled, QuotaExceeded: res.QuotaExceeded,
	}
}

// LimitsFacts are limits as the audit facts record them (facts.Limits
// mirrors policy.Limits field for field; a test in audit/facts keeps them
// equal, so this is a conversion, not a copy).
func LimitsFacts(l policy.Limits) *facts.Limits {
	f := facts.Limits(l)
	return &f
}

// reapFacts are the facts of a successful reap record of a launch: what
// every reap says, and what the helper's run adds.
func reapFacts(res *ExecResult, hr *helperRun) *facts.Reap {
	f := ReapFacts(res)
	f.BwrapChildPID = hr.bwrap.childPID
	f.StdoutBytes, f.StderrBytes = hr.stdout.total, hr.stderr.total
	// The reaper's pidfd became readable: the kernel had killed and
	// reaped every process of the sandbox's pid namespace by then.
	f.PIDNamespaceGone = hr.reaperGone
	f.OOMKilled, f.CgroupProcessesLeft = hr.oomKilled, hr.cgroupLeft
	f.Stopped = hr.stop.String()
	if hr.quotaErr != nil {
		f.QuotaError = hr.quotaErr.Error()
	}
	f.HelperPooled = hr.pooled
	if hr.times != nil {
		f.LaunchUS = hr.times.us()
	}
	return f
}

// markProbe marks a record of the health probe's exec as such (facts
// probe); a record without facts gets its step's, empty but for that.
func markProbe(r *audit.Record) {
	if r.Facts == nil {
		r.Facts = facts.New(r.Step)
	}
	switch f := r.Facts.(type) {
	case *facts.Accept:
		f.Probe = true
	case *facts.Decide:
		f.Probe = true
	case *facts.Prepare:
		f.Probe = true
	case *facts.Reap:
		f.Probe = true
	case *facts.Artifacts:
		f.Probe = true
	}
}
