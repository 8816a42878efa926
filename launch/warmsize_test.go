package launch

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestWarmPoolBuildsInParallelWithinTheBound: builds run at once up to
// Builders and never beyond it. Each build blocks until the test lets it
// go, so a pool without the bound would start all six at once.
func TestWarmPoolBuildsInParallelWithinTheBound(t *testing.T) {
	for _, bound := range []int{1, 2, 3} {
		t.Run("", func(t *testing.T) {
			var inflight, peak atomic.Int32
			started, release := make(chan struct{}), make(chan struct{})
			b := &fakeBuilder{}
			build := func(key WarmKey) (WarmSandbox, error) {
				n := inflight.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				started <- struct{}{}
				<-release
				inflight.Add(-1)
				return b.build(key)
			}
			p := NewWarmPool(WarmPoolConfig{Min: 6, Max: 6, Builders: bound, Build: build,
				Fingerprint: func() string { return "fp" }, Log: slog.New(slog.DiscardHandler)})
			t.Cleanup(p.Close)
			p.SetKeys([]WarmKey{pyKey})
			for range bound { // the first `bound` start without any release
				<-started
			}
			for range 6 - bound { // each further one only after one ended
				release <- struct{}{}
				<-started
			}
			for range bound {
				release <- struct{}{}
			}
			waitIdle(t, p, "python", 6)
			if got := peak.Load(); got != int32(bound) {
				t.Fatalf("at most %d builds at once, want exactly the bound %d", got, bound)
			}
		})
	}
}

// TestWarmPoolBuilderSlotHeldUntilBuilt: a sandbox started but not built
// yet (Ready open) keeps its builder slot: its build still spends CPU.
func TestWarmPoolBuilderSlotHeldUntilBuilt(t *testing.T) {
	b := &fakeBuilder{unready: true}
	p := NewWarmPool(WarmPoolConfig{Min: 2, Max: 2, Builders: 1, Build: b.build,
		Fingerprint: func() string { return "fp" }, Log: slog.New(slog.DiscardHandler)})
	t.Cleanup(p.Close)
	p.SetKeys([]WarmKey{pyKey})
	building := func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.state[pyKey].building
	}
	waitFor(t, func() bool { return len(b.all()) == 1 && building() == 1 })
	if n := len(b.all()); n != 1 {
		t.Fatalf("%d started while the first is not built, want 1", n)
	}
	close(b.all()[0].ready)
	waitFor(t, func() bool { return len(b.all()) == 2 })
}

// TestWarmPoolTargetFollowsDemand: the target grows under a burst of
// takes, the pool fills to it, and once the demand is over the idle
// sandboxes above the floor are retired back to it.
func TestWarmPoolTargetFollowsDemand(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	b := &fakeBuilder{}
	var first atomic.Bool
	build := func(key WarmKey) (WarmSandbox, error) {
		if first.CompareAndSwap(false, true) {
			clock.Advance(100 * time.Millisecond) // the first build takes 100 ms, later ones less
		}
		return b.build(key)
	}
	p := NewWarmPool(WarmPoolConfig{Min: 1, Max: 4, Builders: 2, Build: build,
		Fingerprint: func() string { return "fp" }, Log: slog.New(slog.DiscardHandler), Now: clock.Now})
	t.Cleanup(p.Close)
	p.SetKeys([]WarmKey{pyKey})
	waitIdle(t, p, "python", 1)
	if got := p.Target(pyKey); got != 1 {
		t.Fatalf("target %d with no demand, want the floor 1", got)
	}
	// A take a second: each is rebuilt long before the next.
	for range 5 {
		p.Take(pyKey)
		clock.Advance(time.Second)
		if got := p.Target(pyKey); got != 1 {
			t.Fatalf("target %d at one take a second, want 1", got)
		}
	}
	clock.Advance(warmRateWindow) // that demand is over
	// Three takes at once: three sandboxes are needed within one build.
	for range 3 {
		p.Take(pyKey)
	}
	if got := p.Target(pyKey); got != 3 {
		t.Fatalf("target %d after 3 takes at once, want 3", got)
	}
	for range 20 { // a burst beyond the cap
		p.Take(pyKey)
	}
	if got := p.Target(pyKey); got != 4 {
		t.Fatalf("target %d under a burst, want the cap 4", got)
	}
	waitIdle(t, p, "python", 4)

	// Demand stops: nothing is retired before it has waited warmIdleRetire.
	clock.Advance(warmRateWindow)
	if got := p.Target(pyKey); got != 1 {
		t.Fatalf("target %d once idle, want the floor 1", got)
	}
	p.Retire() // every sandbox was built under the burst: none waited long enough
	if n := p.IdleCounts()["python"]; n != 4 {
		t.Fatalf("idle %d after retiring sandboxes that waited less than %v, want 4", n, warmIdleRetire)
	}
	clock.Advance(warmIdleRetire)
	p.Retire()
	if n := p.IdleCounts()["python"]; n != 1 {
		t.Fatalf("idle %d after the idle period, want the floor 1", n)
	}
	if got := p.Stats().Retired; got != 3 {
		t.Fatalf("retired %d, want 3", got)
	}
	waitFor(t, func() bool { // retired ones are stopped, not leaked
		n := 0
		for _, w := range b.all() {
			if w.stopped.Load() {
				n++
			}
		}
		return n >= 3
	})
}

// TestWarmPoolFixedSizeIgnoresDemand: Min = Max is a fixed size, and the
// demand it records is forgotten after the window (no growth).
func TestWarmPoolFixedSizeIgnoresDemand(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	b := &fakeBuilder{}
	p := NewWarmPool(WarmPoolConfig{Min: 2, Max: 2, Builders: 2, Build: b.build,
		Fingerprint: func() string { return "fp" }, Log: slog.New(slog.DiscardHandler), Now: clock.Now})
	t.Cleanup(p.Close)
	p.SetKeys([]WarmKey{pyKey})
	for range 100 {
		p.Take(pyKey)
	}
	if got := p.Target(pyKey); got != 2 {
		t.Fatalf("fixed pool's target %d, want 2", got)
	}
	clock.Advance(warmRateWindow)
	p.Target(pyKey)
	p.mu.Lock()
	n := len(p.state[pyKey].demand)
	p.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d takes older than the window still held", n)
	}
}
