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
// and a replacement is built in the background. A request the pool cannot
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

// warmEntry is an idle warm sandbox and the fingerprint it was built under.
type warmEntry struct {
	sb WarmSandbox
	fp string
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

// WarmPool holds the idle warm sandboxes by key.
type WarmPool struct {
	size        int
	build       func(key WarmKey) (WarmSandbox, error)
	fingerprint func() string
	log         *slog.Logger

	mu       sync.Mutex
	keys     map[WarmKey]bool // the keys kept warm
	idle     map[WarmKey][]*warmEntry
	building map[WarmKey]int
	closed   bool
	builders sync.WaitGroup
	buildOne chan struct{} // one build at a time: builds compete with execs for CPU

	taken, missed, built, failed, stale atomic.Int64
}

func NewWarmPool(size int, build func(WarmKey) (WarmSandbox, error), fingerprint func() string, log *slog.Logger) *WarmPool {
	return &WarmPool{size: size, build: build, fingerprint: fingerprint, log: log,
		keys: map[WarmKey]bool{}, idle: map[WarmKey][]*warmEntry{}, building: map[WarmKey]int{},
		buildOne: make(chan struct{}, 1)}
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
	for k, list := range p.idle {
		if !want[k] {
			drop = append(drop, list...)
			delete(p.idle, k)
		}
	}
	p.keys = want
	p.mu.Unlock()
	p.stop(drop)
	for _, k := range keys {
		p.fill(k)
	}
}

// fill starts the builds that bring key back to size.
func (p *WarmPool) fill(key WarmKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || !p.keys[key] {
		return
	}
	for n := p.size - len(p.idle[key]) - p.building[key]; n > 0; n-- {
		p.building[key]++
		p.builders.Add(1)
		go p.buildFor(key)
	}
}

// buildFor builds one warm sandbox for key and adds it to the pool.
func (p *WarmPool) buildFor(key WarmKey) {
	defer p.builders.Done()
	p.buildOne <- struct{}{}
	fp := p.fingerprint()
	var sb WarmSandbox
	var err error
	if p.wanted(key) {
		sb, err = p.build(key)
	} else {
		err = errors.New("the pool no longer wants this key")
	}
	<-p.buildOne
	p.mu.Lock()
	p.building[key]--
	keep := err == nil && !p.closed && p.keys[key]
	if keep {
		p.idle[key] = append(p.idle[key], &warmEntry{sb: sb, fp: fp})
	}
	closed := p.closed
	p.mu.Unlock()
	switch {
	case keep:
		p.built.Add(1)
	case err == nil:
		sb.Stop()
	case !closed && p.wanted(key):
		p.failed.Add(1)
		p.log.Warn("warm sandbox build failed; one-shot execs launch cold meanwhile", "runtime", key.Runtime, "err", err)
		time.AfterFunc(warmRetry, func() { p.fill(key) })
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
func (p *WarmPool) Take(key WarmKey) WarmSandbox {
	fp := p.fingerprint()
	var drop []*warmEntry
	var got WarmSandbox
	p.mu.Lock()
	kept := p.idle[key][:0:0]
	for _, e := range p.idle[key] {
		switch why := e.unusable(fp); {
		case why != "":
			p.log.Info("warm sandbox destroyed unused", "launch_id", e.sb.ID(), "reason", why)
			drop = append(drop, e)
		case got == nil && isClosed(e.sb.Ready()):
			got = e.sb
		default:
			kept = append(kept, e)
		}
	}
	if got == nil && len(kept) > 0 {
		// None is built yet: the oldest is the nearest to it, and still
		// ahead of a cold launch.
		got, kept = kept[0].sb, kept[1:]
	}
	p.idle[key] = kept
	p.mu.Unlock()
	p.stop(drop)
	if got == nil {
		p.missed.Add(1)
	} else {
		p.taken.Add(1)
	}
	p.fill(key)
	return got
}

// Recheck destroys idle sandboxes built under another fingerprint (the
// helper, its config, the profile or an environment changed) or dead,
// and refills.
func (p *WarmPool) Recheck() {
	fp := p.fingerprint()
	var drop []*warmEntry
	p.mu.Lock()
	keys := make([]WarmKey, 0, len(p.keys))
	for k := range p.keys {
		keys = append(keys, k)
	}
	for k, list := range p.idle {
		kept := list[:0:0]
		for _, e := range list {
			if why := e.unusable(fp); why != "" {
				p.log.Info("warm sandbox destroyed unused", "launch_id", e.sb.ID(), "reason", why)
				drop = append(drop, e)
			} else {
				kept = append(kept, e)
			}
		}
		p.idle[k] = kept
	}
	p.mu.Unlock()
	p.stop(drop)
	for _, k := range keys {
		p.fill(k)
	}
}

// stop destroys entries (stale, dead or unwanted) in the background.
func (p *WarmPool) stop(drop []*warmEntry) {
	if len(drop) == 0 {
		return
	}
	p.stale.Add(int64(len(drop)))
	for _, e := range drop {
		go e.sb.Stop()
	}
}

// Close stops every idle sandbox and waits for builds in flight, whose
// sandboxes are stopped too.
func (p *WarmPool) Close() {
	p.mu.Lock()
	p.closed = true
	var all []WarmSandbox
	for _, list := range p.idle {
		for _, e := range list {
			all = append(all, e.sb)
		}
	}
	p.idle = map[WarmKey][]*warmEntry{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, sb := range all {
		wg.Add(1)
		go func() { defer wg.Done(); sb.Stop() }()
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
	for k, list := range p.idle {
		for _, e := range list {
			if !isClosed(e.sb.Dead()) && isClosed(e.sb.Ready()) {
				out[k.Runtime]++
			}
		}
	}
	return out
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
// sandboxes gone stale or dead in between, until the returned func is
// called: it stops the loop, then closes the pool (Close).
func (p *WarmPool) Keep(ctx context.Context, keys func() []WarmKey) (stop func()) {
	p.SetKeys(keys())
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(warmRecheck)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				p.SetKeys(keys())
				p.Recheck()
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
	Taken, Missed, Built, Failed, DestroyedUnused int64
}

// Stats returns the pool's counters (metrics).
func (p *WarmPool) Stats() WarmPoolStats {
	return WarmPoolStats{Taken: p.taken.Load(), Missed: p.missed.Load(), Built: p.built.Load(),
		Failed: p.failed.Load(), DestroyedUnused: p.stale.Load()}
}
