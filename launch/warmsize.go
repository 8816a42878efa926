package launch

import "time"

// How the warm pool sizes itself (docs/DESIGN.md "Warm pool"). Each key's
// target is
//
//	clamp(most takes within one build time, Min, Max)
//
// over the key's takes (served or missed) of the last warmRateWindow:
// the largest number of them that arrived less than one build time after
// the first of them, where the build time is the moving average of how
// long a build of the key takes, from its builder slot to bwrap running
// the stub. That many takes cannot be served by replacements started at
// the first of them, so the pool keeps that many built. For a steady rate
// it is ceil(rate × build time), Little's law for the sandboxes being
// rebuilt at once; unlike the mean rate it also sees a burst's clumps (at
// concurrency 4, four execs ending together take four sandboxes at once).
// A burst raises the target at its next take, and builds start then. Idle
// sandboxes above the target are retired once they have waited
// warmIdleRetire, oldest first, never below the target: a short lull does
// not throw away what the next burst needs. Once the window holds no take,
// the target is Min.
const (
	warmRateWindow = 10 * time.Second
	warmIdleRetire = 15 * time.Second
	// warmRetireEvery is how often Keep looks for sandboxes to retire.
	warmRetireEvery = 5 * time.Second
	// warmBuildSmoothing: a new build time moves the average by 1/4 of
	// the difference.
	warmBuildSmoothing = 4
)

// targetLocked is key's target size now (p.mu is held); it also forgets
// demand older than the window.
func (p *WarmPool) targetLocked(key WarmKey, st *warmKeyState) int {
	now := p.cfg.Now()
	cut := 0
	for cut < len(st.demand) && now.Sub(st.demand[cut]) >= warmRateWindow {
		cut++
	}
	st.demand = st.demand[cut:]
	if p.cfg.Min == p.cfg.Max || len(st.demand) == 0 || st.build <= 0 {
		return p.cfg.Min
	}
	peak, first := 0, 0
	for i, at := range st.demand { // in order: appended as taken
		for at.Sub(st.demand[first]) >= st.build {
			first++
		}
		peak = max(peak, i-first+1)
	}
	return min(max(peak, p.cfg.Min), p.cfg.Max)
}

// Target is key's current target size (metrics, tests).
func (p *WarmPool) Target(key WarmKey) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.targetLocked(key, p.key(key))
}

// Retire destroys idle sandboxes above each key's target that have waited
// at least warmIdleRetire, oldest first; it never goes below the target
// (so never below Min), counting builds in flight as sandboxes to come.
func (p *WarmPool) Retire() {
	now := p.cfg.Now()
	var drop []*warmEntry
	p.mu.Lock()
	for k, st := range p.state {
		excess := len(st.idle) + st.building - p.targetLocked(k, st)
		kept := st.idle[:0:0]
		for _, e := range st.idle { // oldest first: appended as built
			if excess > 0 && now.Sub(e.since) >= warmIdleRetire {
				p.cfg.Log.Debug("warm sandbox retired: idle above the pool's target", "launch_id", e.sb.ID())
				drop = append(drop, e)
				excess--
				continue
			}
			kept = append(kept, e)
		}
		st.idle = kept
	}
	p.mu.Unlock()
	p.retired.Add(int64(len(drop)))
	p.stop(drop)
}
