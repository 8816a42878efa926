package launch

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// The warm pool (docs/DESIGN.md "Warm pool") keeps a number of sandboxes
// per key fully built and waiting: helper, bwrap, interpreter started,
// empty one-shot workspace, own cgroup (Warm). An ordinary one-shot exec
// takes one (Warm.Run), which is never reused: it is reaped after the exec
// and a replacement is built in the background, up to Builders builds at
// once over all keys. Each key's size follows its recent demand between a
// floor and a cap (warmsize.go). A request the pool cannot
// serve launches cold, with the same result and the same trail. A warm
// sandbox is never shared: taking removes it from the pool under the lock,
// and Run refuses a second owner. Which requests may take one is the
// supervisor's decision; what makes one stale (the helper, its config, the
// profile, an environment: HelperFingerprint) is this package's.

// warmRecheck is how often idle warm sandboxes are checked against the
// current fingerprint and keys (besides the check at every take).
const warmRecheck = 30 * time.Second

// warmRetry is how long a key waits after a failed build before the next.
const warmRetry = 5 * time.Second

// WarmKey is what a warm sandbox was built for. Everything the helper
// fixes at launch is in it: the runtime, the environment, the /tmp size
// and the rlimits. A request takes a warm sandbox only if its decision has
// exactly this key; memory, pids and CPU are set per request (cgroup).
type WarmKey struct {
	Runtime       string
	Environment   string
	TmpSizeBytes  int64
	NoFile        uint64
	FileSizeBytes uint64
}

func WarmKeyOf(r Request) WarmKey {
	return WarmKey{Runtime: r.Runtime, Environment: r.Environment, TmpSizeBytes: r.Limits.TmpSizeBytes,
		NoFile: r.Limits.NoFile, FileSizeBytes: r.Limits.FileSizeBytes}
}

// WarmSandbox is a built warm sandbox (*launch.Warm).
type WarmSandbox interface {
	ID() string
	Run(ctx context.Context, ex Request, header []byte) (*ExecResult, error)
	Stop()
	Dead() <-chan struct{}
	Ready() <-chan struct{}
}

// warmEntry is an idle warm sandbox, the fingerprint it was built under,
// and since when it waits (retire).
type warmEntry struct {
	sb    WarmSandbox
	fp    string
	since time.Time
	gone  chan struct{} // closed once it leaves the pool (taken or destroyed)
}

// unusable says why e must not be used under fingerprint fp ("": usable).
func (e *warmEntry) unusable(fp string) string {
	switch {
	case e.fp != fp:
		return "stale: the helper, its config, the profile or an environment changed since it was built"
	case isClosed(e.sb.Dead()):
		return "dead: it ended while idle"
	}
	return ""
}

// leave marks e as out of the pool (its builder's slot, if still held
// waiting for it to be built, is let go).
func (e *warmEntry) leave() { close(e.gone) }

// warmKeyState is one key's part of the pool: its idle sandboxes, the
// builds in flight, the recent demand and how long a build takes.
type warmKeyState struct {
	idle     []*warmEntry
	building int
	demand   []time.Time   // the takes (served or missed) within warmRateWindow
	build    time.Duration // moving average of a build's duration; 0: none measured
}

// WarmPoolConfig is how a WarmPool sizes and builds.
type WarmPoolConfig struct {
	// Min and Max bound each key's target size (Min = Max: a fixed size).
	Min, Max int
	// Builders is the most builds in flight at once, over all keys (at
	// least 1): the CPUs the operator gives sandboxd, so builds never take
	// more than the host's share from running execs.
	Builders int
	// Build starts one warm sandbox for a key.
	Build func(key WarmKey) (WarmSandbox, error)
	// Fingerprint is the current HelperFingerprint.
	Fingerprint func() string
	Log         *slog.Logger
	// Now is the clock of the rate, the build times and retirement (nil:
	// time.Now; tests use a fake one).
	Now func() time.Time
}

// WarmPool holds the idle warm sandboxes by key.
type WarmPool struct {
	cfg WarmPoolConfig

	mu       sync.Mutex
	keys     map[WarmKey]bool // the keys kept warm
	state    map[WarmKey]*warmKeyState
	closed   bool
	quit     chan struct{} // closed by Close: builders waiting for a build let go
	builders sync.WaitGroup
	slots    chan struct{} // one per build in flight (cfg.Builders)

	taken, missed, built, failed, stale, retired atomic.Int64
}

// NewWarmPool makes a pool; nothing is built before SetKeys (or Keep).
func NewWarmPool(cfg WarmPoolConfig) *WarmPool {
	cfg.Min, cfg.Max = max(cfg.Min, 0), max(cfg.Max, cfg.Min, 0)
	cfg.Builders = max(cfg.Builders, 1)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &WarmPool{cfg: cfg, keys: map[WarmKey]bool{}, state: map[WarmKey]*warmKeyState{},
		quit: make(chan struct{}), slots: make(chan struct{}, cfg.Builders)}
}

// key returns key's state, made on first use. p.mu is held.
func (p *WarmPool) key(key WarmKey) *warmKeyState {
	st := p.state[key]
	if st == nil {
		st = &warmKeyState{}
		p.state[key] = st
	}
	return st
}

// SetKeys sets the keys kept warm; idle sandboxes of other keys are
// destroyed, and every key is filled.
func (p *WarmPool) SetKeys(keys []WarmKey) {
	want := map[WarmKey]bool{}
	for _, k := range keys {
		want[k] = true
	}
	p.mu.Lock()
	var drop []*warmEntry
	for k, st := range p.state {
		if !want[k] {
			drop = append(drop, st.idle...)
			st.idle = nil
			if st.building == 0 {
				delete(p.state, k)
			}
		}
	}
	p.keys = want
	p.mu.Unlock()
	p.stale.Add(int64(len(drop)))
	p.stop(drop)
	for _, k := range keys {
		p.fill(k)
	}
}

// fill starts the builds that bring key back to its target.
func (p *WarmPool) fill(key WarmKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || !p.keys[key] {
		return
	}
	st := p.key(key)
	for n := p.targetLocked(key, st) - len(st.idle) - st.building; n > 0; n-- {
		st.building++
		p.builders.Add(1)
		go p.buildFor(key)
	}
}

// buildFor builds one warm sandbox for key and adds it to the pool. It
// holds a builder slot until the sandbox is built (Ready), not only
// started: the build's CPU is spent in between.
func (p *WarmPool) buildFor(key WarmKey) {
	defer p.builders.Done()
	select {
	case p.slots <- struct{}{}:
	case <-p.quit:
		p.mu.Lock()
		p.key(key).building--
		p.mu.Unlock()
		return
	}
	defer func() { <-p.slots }()
	start := p.cfg.Now()
	fp := p.cfg.Fingerprint()
	var sb WarmSandbox
	var err error
	if p.wanted(key) {
		sb, err = p.cfg.Build(key)
	} else {
		err = errors.New("the pool no longer wants this key")
	}
	e, closed := p.add(key, sb, err, fp)
	switch {
	case e != nil:
		p.built.Add(1)
		p.awaitBuilt(key, e, start)
	case err == nil:
		sb.Stop()
	case !closed && p.wanted(key):
		p.failed.Add(1)
		p.cfg.Log.Warn("warm sandbox build failed; one-shot execs launch cold meanwhile", "runtime", key.Runtime, "err", err)
		time.AfterFunc(warmRetry, func() { p.fill(key) })
	}
}

// add ends a build of key: the sandbox joins the idle ones if the build
// succeeded and the key is still wanted (the entry; nil: not kept).
func (p *WarmPool) add(key WarmKey, sb WarmSandbox, err error, fp string) (*warmEntry, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.key(key)
	st.building--
	if !p.keys[key] && st.building == 0 && len(st.idle) == 0 {
		delete(p.state, key) // the last build of a key no longer kept
	}
	if err != nil || p.closed || !p.keys[key] {
		return nil, p.closed
	}
	e := &warmEntry{sb: sb, fp: fp, since: p.cfg.Now(), gone: make(chan struct{})}
	st.idle = append(st.idle, e)
	return e, false
}

// awaitBuilt waits until e is built, dead, or out of the pool, and records
// how long its build took. A sandbox taken before it was built (its exec
// waits for the rest) gives only a lower bound, the time to the take: it
// may raise the estimate, never lower it, so a pool whose every sandbox is
// taken unbuilt still learns that builds are slow.
func (p *WarmPool) awaitBuilt(key WarmKey, e *warmEntry, start time.Time) {
	built := true
	select {
	case <-e.sb.Ready():
	case <-e.gone:
		built = isClosed(e.sb.Ready())
		if !built && isClosed(e.sb.Dead()) {
			return
		}
	case <-e.sb.Dead():
		return
	case <-p.quit:
		return
	}
	d := p.cfg.Now().Sub(start)
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.key(key)
	switch {
	case st.build == 0:
		st.build = d
	case built || d > st.build:
		st.build += (d - st.build) / warmBuildSmoothing
	}
}

func (p *WarmPool) wanted(key WarmKey) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.closed && p.keys[key]
}

// Take removes and returns an idle sandbox of key built under the current
// fingerprint, or nil (the exec launches cold). Stale and dead ones met on
// the way are destroyed, never used; a replacement build starts either way.
// Every take counts as demand for key (Target).
func (p *WarmPool) Take(key WarmKey) WarmSandbox {
	fp := p.cfg.Fingerprint()
	var drop []*warmEntry
	var got *warmEntry
	p.mu.Lock()
	if !p.keys[key] {
		p.mu.Unlock()
		p.missed.Add(1)
		return nil
	}
	st := p.key(key)
	st.demand = append(st.demand, p.cfg.Now())
	kept := st.idle[:0:0]
	for _, e := range st.idle {
		switch why := e.unusable(fp); {
		case why != "":
			p.cfg.Log.Info("warm sandbox destroyed unused", "launch_id", e.sb.ID(), "reason", why)
			drop = append(drop, e)
		case got == nil && isClosed(e.sb.Ready()):
			got = e
		default:
			kept = append(kept, e)
		}
	}
	if got == nil && len(kept) > 0 {
		// None is built yet: the oldest is the nearest to it, and still
		// ahead of a cold launch.
		got, kept = kept[0], kept[1:]
	}
	st.idle = kept
	if got != nil {
		got.leave()
	}
	p.mu.Unlock()
	p.stale.Add(int64(len(drop)))
	p.stop(drop)
	p.fill(key)
	if got == nil {
		p.missed.Add(1)
		return nil
	}
	p.taken.Add(1)
	return got.sb
}

// Recheck destroys idle sandboxes built under another fingerprint (the
// helper, its config, the profile or an environment changed) or dead,
// and refills.
func (p *WarmPool) Recheck() {
	fp := p.cfg.Fingerprint()
	var drop []*warmEntry
	p.mu.Lock()
	for _, st := range p.state {
		kept := st.idle[:0:0]
		for _, e := range st.idle {
			if why := e.unusable(fp); why != "" {
				p.cfg.Log.Info("warm sandbox destroyed unused", "launch_id", e.sb.ID(), "reason", why)
				drop = append(drop, e)
			} else {
				kept = append(kept, e)
			}
		}
		st.idle = kept
	}
	keys := p.keyList()
	p.mu.Unlock()
	p.stale.Add(int64(len(drop)))
	p.stop(drop)
	for _, k := range keys {
		p.fill(k)
	}
}

// keyList is the keys kept warm. p.mu is held.
func (p *WarmPool) keyList() []WarmKey {
	keys := make([]WarmKey, 0, len(p.keys))
	for k := range p.keys {
		keys = append(keys, k)
	}
	return keys
}

// stop destroys entries (stale, dead, unwanted or retired) in the background.
func (p *WarmPool) stop(drop []*warmEntry) {
	for _, e := range drop {
		e.leave()
		go e.sb.Stop()
	}
}

// Close stops every idle sandbox and waits for builds in flight, whose
// sandboxes are stopped too.
func (p *WarmPool) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.builders.Wait()
		return
	}
	p.closed = true
	close(p.quit)
	var all []*warmEntry
	for _, st := range p.state {
		all = append(all, st.idle...)
		st.idle = nil
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, e := range all {
		e.leave()
		wg.Add(1)
		go func() { defer wg.Done(); e.sb.Stop() }()
	}
	wg.Wait()
	p.builders.Wait()
}

// IdleCounts is the number of idle sandboxes per runtime that are built
// and alive (metrics).
func (p *WarmPool) IdleCounts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for k, st := range p.state {
		for _, e := range st.idle {
			if !isClosed(e.sb.Dead()) && isClosed(e.sb.Ready()) {
				out[k.Runtime]++
			}
		}
	}
	return out
}

// Targets is the current target size and build-time estimate per runtime
// of the keys kept warm (metrics).
func (p *WarmPool) Targets() (target map[string]int, build map[string]time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	target, build = map[string]int{}, map[string]time.Duration{}
	for k := range p.keys {
		st := p.key(k)
		target[k.Runtime], build[k.Runtime] = p.targetLocked(k, st), st.build
	}
	return target, build
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Keep fills the pool with keys() now, and again with the keys of the
// moment every warmRecheck (live settings change them), destroying idle
// sandboxes gone stale or dead in between; every warmRetireEvery it
// retires idle sandboxes above the target (Retire). It runs until the
// returned func is called: it stops the loop, then closes the pool (Close).
func (p *WarmPool) Keep(ctx context.Context, keys func() []WarmKey) (stop func()) {
	p.SetKeys(keys())
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		recheck := time.NewTicker(warmRecheck)
		defer recheck.Stop()
		retire := time.NewTicker(warmRetireEvery)
		defer retire.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-recheck.C:
				p.SetKeys(keys())
				p.Recheck()
			case <-retire.C:
				p.Retire()
			}
		}
	}()
	return func() {
		cancel()
		<-done
		p.Close()
	}
}

// WarmPoolStats are the pool's counters since it started.
type WarmPoolStats struct {
	Taken, Missed, Built, Failed, DestroyedUnused, Retired int64
}

// Stats returns the pool's counters (metrics).
func (p *WarmPool) Stats() WarmPoolStats {
	return WarmPoolStats{Taken: p.taken.Load(), Missed: p.missed.Load(), Built: p.built.Load(),
		Failed: p.failed.Load(), DestroyedUnused: p.stale.Load(), Retired: p.retired.Load()}
}
