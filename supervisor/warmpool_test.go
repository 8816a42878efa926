package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/launch"
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
func (f *fakeWarm) Run(_ context.Context, ex launch.Request, _ []byte) (*ExecResult, error) {
	if f.gone {
		return nil, launch.ErrWarmGone
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

func (b *fakeBuilder) build(key warmKey) (warmSandbox, error) {
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
	pyKey = warmKey{Runtime: "python", TmpSizeBytes: 1 << 20, NoFile: 1024}
	jsKey = warmKey{Runtime: "javascript", TmpSizeBytes: 1 << 20, NoFile: 1024}
)

func newTestPool(t *testing.T, size int, b *fakeBuilder, fp *atomic.Value) *warmPool {
	t.Helper()
	fp.Store("fp1")
	p := newWarmPool(size, b.build, func() string { return fp.Load().(string) }, slog.New(slog.DiscardHandler))
	t.Cleanup(p.close)
	return p
}

// waitIdle waits until key has n idle sandboxes.
func waitIdle(t *testing.T, p *warmPool, rt string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for p.idleCounts()[rt] != n {
		if time.Now().After(deadline) {
			t.Fatalf("%s idle %d, want %d", rt, p.idleCounts()[rt], n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestWarmPoolFillsEachKey(t *testing.T) {
	var fp atomic.Value
	b := &fakeBuilder{}
	p := newTestPool(t, 2, b, &fp)
	p.setKeys([]warmKey{pyKey, jsKey})
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
	p.setKeys([]warmKey{pyKey})
	waitIdle(t, p, "python", 2)
	seen := map[warmSandbox]bool{}
	for i := 0; i < 10; i++ {
		sb := p.take(pyKey)
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
	if other := p.take(jsKey); other != nil {
		t.Fatal("a key that is not kept warm gave a sandbox")
	}
}

func TestWarmPoolConcurrentTakesGetDistinctSandboxes(t *testing.T) {
	var fp atomic.Value
	b := &fakeBuilder{}
	p := newTestPool(t, 8, b, &fp)
	p.setKeys([]warmKey{pyKey})
	waitIdle(t, p, "python", 8)
	var mu sync.Mutex
	got := map[warmSandbox]int{}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if sb := p.take(pyKey); sb != nil {
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
	p.setKeys([]warmKey{pyKey})
	waitIdle(t, p, "python", 2)
	old := b.all()
	fp.Store("fp2") // the helper config (or profile, or an environment) changed
	sb := p.take(pyKey)
	for _, w := range old {
		if sb == warmSandbox(w) {
			t.Fatal("a sandbox built under the old fingerprint was used")
		}
	}
	waitFor(t, func() bool { return old[0].stopped.Load() && old[1].stopped.Load() })

	// recheck drains without a take, and a dead one is never handed out.
	waitIdle(t, p, "python", 2)
	fresh := b.all()[len(b.all())-2:]
	close(fresh[0].dead)
	fp.Store("fp3")
	p.recheck()
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
	p.setKeys([]warmKey{pyKey, jsKey})
	waitIdle(t, p, "javascript", 1)
	waitIdle(t, p, "python", 1)
	p.setKeys([]warmKey{pyKey}) // e.g. the live tmp size changed javascript's key
	waitIdle(t, p, "javascript", 0)
	waitFor(t, func() bool {
		for _, w := range b.all() {
			if w.id == "javascript-0" || w.id == "javascript-1" {
				return w.stopped.Load()
			}
		}
		return false
	})
}

func TestWarmPoolBuildFailureRetriesAndFallsBack(t *testing.T) {
	var fp atomic.Value
	b := &fakeBuilder{}
	b.fail.Store(true)
	p := newTestPool(t, 1, b, &fp)
	p.setKeys([]warmKey{pyKey})
	waitFor(t, func() bool { return p.failed.Load() > 0 })
	if sb := p.take(pyKey); sb != nil {
		t.Fatal("a failed build gave a sandbox")
	}
	b.fail.Store(false)
	waitIdle(t, p, "python", 1) // after warmRetry
}

func TestWarmPoolCloseStopsIdle(t *testing.T) {
	var fp atomic.Value
	b := &fakeBuilder{}
	p := newTestPool(t, 2, b, &fp)
	p.setKeys([]warmKey{pyKey})
	waitIdle(t, p, "python", 2)
	p.close()
	for _, w := range b.all() {
		if !w.stopped.Load() {
			t.Errorf("%s not stopped at close", w.id)
		}
	}
	if sb := p.take(pyKey); sb != nil {
		t.Fatal("a closed pool gave a sandbox")
	}
}

func TestWarmEligible(t *testing.T) {
	base := decision{mode: api.ModeProcess, launch: LaunchRequest{Runtime: "python", Network: api.NetworkNone}}
	for _, c := range []struct {
		name string
		mod  func(*decision)
		sess bool
		want bool
	}{
		{"ordinary one-shot", func(*decision) {}, false, true},
		{"session", func(*decision) {}, true, false},
		{"kernel mode", func(d *decision) { d.mode = api.ModeKernel }, false, false},
		{"entrypoint", func(d *decision) { d.entrypoint = "main" }, false, false},
		{"egress", func(d *decision) { d.launch.Network = api.NetworkEgress }, false, false},
		{"env", func(d *decision) { d.launch.Env = map[string]string{"A": "1"} }, false, false},
		{"probe", func(d *decision) { d.launch.Probe = true }, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := base
			c.mod(&d)
			var sess *Session
			if c.sess {
				sess = &Session{}
			}
			if _, got := warmEligible(sess, d); got != c.want {
				t.Errorf("eligible %v, want %v", got, c.want)
			}
		})
	}
}

func TestRunWarmFallsBackWhenGone(t *testing.T) {
	var fp atomic.Value
	b := &fakeBuilder{gone: true}
	p := newTestPool(t, 1, b, &fp)
	p.setKeys([]warmKey{keyOf(LaunchRequest{Runtime: "python"})})
	waitIdle(t, p, "python", 1)
	s := &Server{}
	s.warm.Store(p)
	d := decision{mode: api.ModeProcess, launch: LaunchRequest{Runtime: "python", Network: api.NetworkNone}}
	if _, ok, err := s.runWarm(context.Background(), nil, d); ok || err != nil {
		t.Fatalf("a gone warm sandbox served the exec: ok %v err %v", ok, err)
	}
	b.mu.Lock()
	b.gone = false
	b.mu.Unlock()
	for _, w := range b.all() { // the gone ones end: recheck replaces them
		close(w.dead)
	}
	p.recheck()
	waitIdle(t, p, "python", 1)
	res, ok, err := s.runWarm(context.Background(), nil, d)
	if !ok || err != nil || res == nil {
		t.Fatalf("warm run: ok %v err %v", ok, err)
	}
}

func TestWarmPoolPrefersBuiltSandboxes(t *testing.T) {
	var fp atomic.Value
	b := &fakeBuilder{unready: true}
	p := newTestPool(t, 2, b, &fp)
	p.setKeys([]warmKey{pyKey})
	waitFor(t, func() bool { return len(b.all()) == 2 })
	if n := p.idleCounts()["python"]; n != 0 {
		t.Fatalf("idle gauge %d counts sandboxes not built yet", n)
	}
	second := b.all()[1]
	close(second.ready)
	if sb := p.take(pyKey); sb != warmSandbox(second) {
		t.Fatalf("took %v, want the built one %s", sb, second.id)
	}
	if sb := p.take(pyKey); sb != warmSandbox(b.all()[0]) {
		t.Fatal("with none built, the oldest is taken")
	}
}

func TestFingerprintFollowsTheFiles(t *testing.T) {
	dir := t.TempDir()
	helper, cfg := filepath.Join(dir, "helper"), filepath.Join(dir, "nsinit.json")
	for _, f := range []string{helper, cfg} {
		if err := os.WriteFile(f, []byte("v1"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c := &fingerprintCache{helperPath: helper, configPath: cfg}
	first := c.get()
	if again := c.get(); again != first {
		t.Fatal("the fingerprint changed with no file changed")
	}
	// A config replaced by rename (new inode), and one rewritten in place
	// with another size: both change the fingerprint.
	tmp := cfg + ".new"
	if err := os.WriteFile(tmp, []byte("v2"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, cfg); err != nil {
		t.Fatal(err)
	}
	second := c.get()
	if second == first {
		t.Fatal("a replaced config kept the fingerprint")
	}
	if err := os.WriteFile(helper, []byte("a new helper binary"), 0o700); err != nil {
		t.Fatal(err)
	}
	if third := c.get(); third == second {
		t.Fatal("a rewritten helper kept the fingerprint")
	}
}
