package nsinit

import (
	"encoding/json"
	"os"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/nsinit/spec"
)

// reporter writes one spec.Report per line on the helper's report fd. A
// failed write is not fatal to the launch order itself -- the supervisor
// refuses a launch whose helper records are missing.
type reporter struct {
	f *os.File
	// start is the prelude's CLOCK_MONOTONIC start, so every report says
	// how far into the helper's life it was written (t_us).
	start int64
}

func (r *reporter) ok(step string, facts map[string]any) {
	r.write(spec.Report{Step: step, OK: true, Facts: facts})
}

// fail reports a failed step and returns its exit status, so a step reads
// `return r.fail(...)`.
func (r *reporter) fail(step string, status int, err error, fix string, facts map[string]any) int {
	r.write(spec.Report{Step: step, OK: false, Error: err.Error(), Fix: fix, Facts: facts})
	return status
}

func (r *reporter) write(rep spec.Report) {
	if r.f == nil {
		return
	}
	if rep.Facts == nil {
		rep.Facts = map[string]any{}
	}
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) == nil && r.start > 0 {
		rep.Facts["t_us"] = (ts.Nano() - r.start) / 1000
	}
	line, err := json.Marshal(rep)
	if err != nil {
		return
	}
	_, _ = r.f.Write(append(line, '\n'))
}
