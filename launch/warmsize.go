package launch

import (
	"math"
	"time"
)

// How the warm pool sizes itself (docs/DESIGN.md "Warm pool"). Each key's
// target is
//
//	clamp(ceil(rate × build), Min, Max)
//
// where rate is the key's takes (served or missed) in the last
// warmRateWindow divided by the time since the oldest of them (at least
// warmRateMinSpan, so two takes a millisecond apart are not a thousand a
// second), and build is the moving average of how long a build of the key
// takes, from its builder slot to bwrap running the stub. By Little's law
// that is how many sandboxes are being rebuilt at once when takes come at
// that rate: with as many waiting, a take finds one built. A burst raises
// the target at once (the rate is over the burst's own span); builds start
// at the next take. Idle sandboxes above the target are retired once they
// have waited warmIdleRetire, oldest first, never below Min: a short lull
// does not throw away what the next burst needs.
const (
	warmRateWindow  = 10 * time.Second
	warmRateMinSpan = time.Second
	warmIdleRetire  = 15 * time.Second
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
	span := max(now.Sub(st.demand[0]), warmRateMinSpan)
	rate := float64(len(st.demand)) / span.Seconds()
	want := math.Ceil(rate * st.build.Seconds())
	return int(min(max(want, float64(p.cfg.Min)), float64(p.cfg.Max)))
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
