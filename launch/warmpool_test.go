package launch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeWarm is a warm sandbox that records what happens to it.
type fakeWarm struct {
	id      string
	dead    chan struct{}
	ready   chan struct{}
	runs    atomic.Int32
	stopped atomic.Bool
	gone    bool // Run answers ErrWarmGone
}

func (f *fakeWarm) ID() string { return f.id }
func (f *fakeWarm) Run(_ context.Context, ex Request, _ []byte) (*ExecResult, error) {
	if f.gone {
		return nil, ErrWarmGone
	}
	if f.runs.Add(1) > 1 {
		return nil, errors.New("reused")
	}
	code := 0
	return &ExecResult{ID: ex.ExecID, Stdout: "warm " + f.id, ExitCode: &code}, nil
}
func (f *fakeWarm) Stop()                  { f.stopped.Store(true) }
func (f *fakeWarm) Dead() <-chan struct{}  { return f.dead }
func (f *fakeWarm) Ready() <-chan struct{} { return f.ready }

// fakeBuilder builds fakeWarms and counts them.
type fakeBuilder struct {
	mu      sync.Mutex
	built   []*fakeWarm
	fail    atomic.Bool
	gone    bool
	unready bool // sandboxes are not built yet (Ready open)
}

func (b *fakeBuilder) build(key WarmKey) (WarmSandbox, error) {
	if b.fail.Load() {
		return nil, errors.New("no helper")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	w := &fakeWarm{id: fmt.Sprintf("%s-%d", key.Runtime, len(b.built)), dead: make(chan struct{}), ready: make(chan struct{}), gone: b.gone}
	if !b.unready {
		close(w.ready)
	}
	b.built = append(b.built, w)
	return w, nil
}

func (b *fakeBuilder) all() []*fakeWarm {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*fakeWarm{}, b.built...)
}

var (
	pyKey = WarmKey{Runtime: "python", TmpSizeBytes: 1 << 20, NoFile: 1024}
	jsKey = WarmKey{Runtime: "javascript", TmpSizeBytes: 1 << 20, NoFile: 1024}
)

func newTestPool(t *testing.T, size int, b *fakeBuilder, fp *atomic.Value) *WarmPool {
	t.Helper()
	fp.Store("fp1")
	p := NewWarmPool(WarmPoolConfig{Min: size, Max: size, Builders: 2, Build: b.build,
		Fingerprint: func() string { return fp.Load().(string) }, Log: slog.New(slog.DiscardHandler)})
	t.Cleanup(p.Close)
	return p
}

// waitIdle waits until key has n idle sandboxes.
func waitIdle(t *testing.T, p *WarmPool, rt string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for p.IdleCounts()[rt] != n {
		if time.Now().After(deadline) {
			t.Fatalf("%s idle %d, want %d", rt, p.IdleCounts()[rt], n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestWarmPoolFillsEachKey(t *testing.T) {
	var fp atomic.Value
	b := &fakeBuilder{}
	p := newTestPool(t, 2, b, &fp)
	p.SetKeys([]WarmKey{pyKey, jsKey})
	waitIdle(t, p, "python", 2)
	waitIdle(t, p, "javascript", 2)
	if n := len(b.all()); n != 4 {
		t.Fatalf("built %d, want 4", n)
	}
}

func TestWarmPoolTakeReplacesAndNeverReuses(t *testing.T) {
	var fp atomic.Value
	b := &fakeBuilder{}
	p := newTestPool(t, 2, b, &fp)
	p.SetKeys([]WarmKey{pyKey})
	waitIdle(t, p, "python", 2)
	seen := map[WarmSandbox]bool{}
	for i := 0; i < 10; i++ {
		sb := p.Take(pyKey)
		if sb == nil {
			waitIdle(t, p, "python", 2)
			continue
		}
		if seen[sb] {
			t.Fatalf("take %d returned a sandbox already taken", i)
		}
		seen[sb] = true
	}
	waitIdle(t, p, "python", 2) // replaced
	if p.taken.Load() == 0 {
		t.Fatal("nothing taken")
	}
	if other := p.Take(jsKey); other != nil {
		t.Fatal("a key that is not kept warm gave a sandbox")
	}
}

func TestWarmPoolConcurrentTakesGetDistinctSandboxes(t *testing.T) {
	var fp atomic.Value
	b := &fakeBuilder{}
	p := newTestPool(t, 8, b, &fp)
	p.SetKeys([]WarmKey{pyKey})
	waitIdle(t, p, "python", 8)
	var mu sync.Mutex
	got := map[WarmSandbox]int{}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if sb := p.Take(pyKey); sb != nil {
				mu.Lock()
				got[sb]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for sb, n := range got {
		if n > 1 {
			t.Errorf("sandbox %s handed to %d callers", sb.ID(), n)
		}
	}
	if len(got) != 8 {
		t.Errorf("%d distinct sandboxes for 8 takes of a full pool of 8", len(got))
	}
}

func TestWarmPoolStaleAndDeadAreDestroyedNeverUsed(t *testing.T) {
	var fp atomic.Value
	b := &fakeBuilder{}
	p := newTestPool(t, 2, b, &fp)
	p.SetKeys([]WarmKey{pyKey})
	waitIdle(t, p, "python", 2)
	old := b.all()
	fp.Store("fp2") // the helper config (or profile, or an environment) changed
	sb := p.Take(pyKey)
	for _, w := range old {
		if sb == WarmSandbox(w) {
			t.Fatal("a sandbox built under the old fingerprint was used")
		}
	}
	waitFor(t, func() bool { return old[0].stopped.Load() && old[1].stopped.Load() })

	// recheck drains without a take, and a dead one is never handed out.
	waitIdle(t, p, "python", 2)
	fresh := b.all()[len(b.all())-2:]
	close(fresh[0].dead)
	fp.Store("fp3")
	p.Recheck()
	waitFor(t, func() bool { return fresh[0].stopped.Load() && fresh[1].stopped.Load() })
	waitIdle(t, p, "python", 2)
	for _, w := range b.all() {
		if w.stopped.Load() && w.runs.Load() > 0 {
			t.Errorf("%s both ran and was destroyed unused", w.id)
		}
	}
}

func TestWarmPoolSetKeysDropsUnwanted(t *testing.T) {
	var fp atomic.Value
	b := &fakeBuilder{}
	p := newTestPool(t, 1, b, &fp)
	p.SetKeys([]WarmKey{pyKey, jsKey})
	waitIdle(t, p, "javascript", 1)
	waitIdle(t, p, "python", 1)
	var py *fakeWarm
	for _, w := range b.all() {
		if strings.HasPrefix(w.id, "python-") {
			py = w
		}
	}
	p.SetKeys([]WarmKey{pyKey}) // e.g. the live tmp size changed javascript's key
	waitIdle(t, p, "javascript", 0)
	waitFor(t, func() bool {
		for _, w := range b.all() {
			if w.id == "javascript-0" || w.id == "javascript-1" {
				return w.stopped.Load()
			}
		}
		return false
	})
	// The wanted key keeps what it had: the same sandbox, not stopped and
	// not rebuilt, is the one a take gets.
	if py.stopped.Load() {
		t.Fatalf("%s, of a key still wanted, was stopped", py.id)
	}
	if n := len(b.all()); n != 2 {
		t.Fatalf("built %d sandboxes, want the 2 of the first fill (nothing rebuilt)", n)
	}
	if sb := p.Take(pyKey); sb != WarmSandbox(py) {
		t.Fatalf("took %v, want the wanted key's sandbox %s", sb, py.id)
	}
}

func TestWarmPoolBuildFailureRetriesAndFallsBack(t *testing.T) {
	var fp atomic.Value
	b := &fakeBuilder{}
	b.fail.Store(true)
	p := newTestPool(t, 1, b, &fp)
	p.SetKeys([]WarmKey{pyKey})
	waitFor(t, func() bool { return p.failed.Load() > 0 })
	if sb := p.Take(pyKey); sb != nil {
		t.Fatal("a failed build gave a sandbox")
	}
	b.fail.Store(false)
	waitIdle(t, p, "python", 1) // after warmRetry
}

func TestWarmPoolCloseStopsIdle(t *testing.T) {
	var fp atomic.Value
	b := &fakeBuilder{}
	p := newTestPool(t, 2, b, &fp)
	p.SetKeys([]WarmKey{pyKey})
	waitIdle(t, p, "python", 2)
	p.Close()
	for _, w := range b.all() {
		if !w.stopped.Load() {
			t.Errorf("%s not stopped at close", w.id)
		}
	}
	if sb := p.Take(pyKey); sb != nil {
		t.Fatal("a closed pool gave a sandbox")
	}
}

func TestWarmPoolPrefersBuiltSandboxes(t *testing.T) {
	var fp atomic.Value
	b := &fakeBuilder{unready: true}
	p := newTestPool(t, 2, b, &fp)
	p.SetKeys([]WarmKey{pyKey})
	waitFor(t, func() bool { return len(b.all()) == 2 })
	if n := p.IdleCounts()["python"]; n != 0 {
		t.Fatalf("idle gauge %d counts sandboxes not built yet", n)
	}
	second := b.all()[1]
	close(second.ready)
	if sb := p.Take(pyKey); sb != WarmSandbox(second) {
		t.Fatalf("took %v, want the built one %s", sb, second.id)
	}
	if sb := p.Take(pyKey); sb != WarmSandbox(b.all()[0]) {
		t.Fatal("with none built, the oldest is taken")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5 s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}
