package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/launch"
	"github.com/sandboxd/sandboxd/session"
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
func (f *fakeWarm) Run(_ context.Context, ex launch.Request, _ []byte) (*launch.ExecResult, error) {
	if f.gone {
		return nil, launch.ErrWarmGone
	}
	if f.runs.Add(1) > 1 {
		return nil, errors.New("reused")
	}
	code := 0
	return &launch.ExecResult{ID: ex.ExecID, Stdout: "warm " + f.id, ExitCode: &code}, nil
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

func (b *fakeBuilder) build(key launch.WarmKey) (launch.WarmSandbox, error) {
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

func newTestPool(t *testing.T, size int, b *fakeBuilder, fp *atomic.Value) *launch.WarmPool {
	t.Helper()
	fp.Store("fp1")
	p := launch.NewWarmPool(size, b.build, func() string { return fp.Load().(string) }, slog.New(slog.DiscardHandler))
	t.Cleanup(p.Close)
	return p
}

// waitIdle waits until key has n idle sandboxes.
func waitIdle(t *testing.T, p *launch.WarmPool, rt string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for p.IdleCounts()[rt] != n {
		if time.Now().After(deadline) {
			t.Fatalf("%s idle %d, want %d", rt, p.IdleCounts()[rt], n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestWarmEligible(t *testing.T) {
	base := decision{mode: api.ModeProcess, launch: launch.Request{Runtime: "python", Network: api.NetworkNone}}
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
			var sess *session.Session
			if c.sess {
				sess = &session.Session{}
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
	p.SetKeys([]launch.WarmKey{launch.WarmKeyOf(launch.Request{Runtime: "python"})})
	waitIdle(t, p, "python", 1)
	s := &Server{}
	s.warm.Store(p)
	d := decision{mode: api.ModeProcess, launch: launch.Request{Runtime: "python", Network: api.NetworkNone}}
	if _, ok, err := s.runWarm(context.Background(), nil, d); ok || err != nil {
		t.Fatalf("a gone warm sandbox served the exec: ok %v err %v", ok, err)
	}
	b.mu.Lock()
	b.gone = false
	b.mu.Unlock()
	for _, w := range b.all() { // the gone ones end: recheck replaces them
		close(w.dead)
	}
	p.Recheck()
	waitIdle(t, p, "python", 1)
	res, ok, err := s.runWarm(context.Background(), nil, d)
	if !ok || err != nil || res == nil {
		t.Fatalf("warm run: ok %v err %v", ok, err)
	}
}
