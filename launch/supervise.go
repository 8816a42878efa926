package launch

import (
	"context"
	"fmt"
	"time"
)

// quotaInterval is how often a running exec's workspace usage is checked.
const quotaInterval = 200 * time.Millisecond

// stopReason says why supervise stopped waiting for the helper.
type stopReason int

const (
	stopExited    stopReason = iota // the helper exited on its own
	stopTimeout                     // the exec's timeout passed
	stopCancelled                   // ctx was cancelled (client gone, session deleted, shutdown)
	stopQuota                       // the workspace went over its quota, or could not be measured
	stopPermit                      // the helper's reports broke the permit sequence
)

func (r stopReason) String() string {
	return [...]string{"exited", "timeout", "cancelled", "quota", "permit"}[r]
}

// usageMeter measures a workspace (*workspace.Workspace).
type usageMeter interface{ Usage() (int64, error) }

// quotaCheck holds a workspace to its disk quota.
type quotaCheck struct {
	ws    usageMeter // nil: no quota
	limit int64      // bytes; 0: no quota
}

func (q quotaCheck) enabled() bool { return q.ws != nil && q.limit > 0 }

// over reports whether the workspace is past its quota. It fails closed: a
// workspace whose usage cannot be measured counts as over, with the reason.
// A payload can make the measurement fail on purpose -- a mode-000
// directory, more than the walk's 100,000 entries, a path longer than
// PATH_MAX (4096) -- and would otherwise write up to RLIMIT_FSIZE per file
// as often as it liked.
func (q quotaCheck) over() (bool, error) {
	if !q.enabled() {
		return false, nil
	}
	used, err := q.ws.Usage()
	if err != nil {
		return true, fmt.Errorf("the workspace's disk use cannot be measured, so it counts as over the quota: %w", err)
	}
	return used > q.limit, nil
}

// supervise waits for the helper to exit, and stops waiting when the
// timeout passes, ctx is cancelled, the workspace goes over its quota
// (checked every quotaInterval) or the helper's reports break the permit
// sequence (phase "supervise"). It only decides; teardown kills.
func (hp *helperProc) supervise(ctx context.Context, timeout time.Duration, q quotaCheck) (stopReason, error) {
	var deadline <-chan time.Time // a kernel has none: it lives until stopped
	if timeout > 0 {
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		deadline = timer.C
	}
	var tick <-chan time.Time
	if q.enabled() {
		t := time.NewTicker(quotaInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case hp.wait = <-hp.waited:
			return stopExited, nil
		case <-deadline:
			return stopTimeout, nil
		case <-ctx.Done():
			return stopCancelled, context.Cause(ctx)
		case err := <-hp.violation:
			return stopPermit, err
		case <-tick:
			if over, err := q.over(); over {
				return stopQuota, err
			}
		}
	}
}
