package nsinit

import (
	"encoding/json"
	"os"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/nsinit/spec"
)

// reporter writes one spec.Report per line on the helper's report fd, with
// the step's typed facts (package audit/facts). A failed write is not fatal
// to the launch order itself: the supervisor's relay checks the reports
// against its permit sequence (enter → network → seccomp → drop → exec,
// each once; spec.ParseReport decodes each strictly) and refuses a launch
// whose sequence is incomplete or out of order.
type reporter struct {
	f *os.File
	// start is the prelude's CLOCK_MONOTONIC start, so every report says
	// how far into the helper's life it was written (t_us).
	start int64
}

func (r *reporter) ok(f facts.Helper) {
	r.write(spec.Report{Step: f.Step(), OK: true}, f)
}

// fail reports a failed step and returns its exit status, so a step reads
// `return r.fail(...)`. The record's step is f.Step(): a prelude failure at
// network or drop is a facts.Network or facts.Drop carrying the enter facts
// (facts.PreludeFailure).
func (r *reporter) fail(f facts.Helper, status int, err error, fix string) int {
	r.write(spec.Report{Step: f.Step(), OK: false, Error: err.Error(), Fix: fix}, f)
	return status
}

func (r *reporter) write(rep spec.Report, f facts.Helper) {
	if r.f == nil {
		return
	}
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) == nil && r.start > 0 {
		f.Stamp((ts.Nano() - r.start) / 1000)
	}
	b, err := json.Marshal(f)
	if err != nil {
		return
	}
	rep.Facts = b
	line, err := json.Marshal(rep)
	if err != nil {
		return
	}
	_, _ = r.f.Write(append(line, '\n'))
}
