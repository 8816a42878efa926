package supervisor

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/cgroup"
	"github.com/sandboxd/sandboxd/launch"
	"github.com/sandboxd/sandboxd/session"
)

// goneWarm is a built warm sandbox for runWarm's tests (the pool's own
// tests, with a fuller fake, are launch's): while gone, Run answers
// launch.ErrWarmGone, as a sandbox that died before it was handed the exec.
type goneWarm struct {
	dead, ready chan struct{}
	gone        bool
}

func (w *goneWarm) ID() string { return "warm" }
func (w *goneWarm) Run(_ context.Context, ex launch.Request, _ []byte) (*launch.ExecResult, error) {
	if w.gone {
		return nil, launch.ErrWarmGone
	}
	code := 0
	return &launch.ExecResult{ID: ex.ExecID, ExitCode: &code}, nil
}
func (w *goneWarm) Stop()                  {}
func (w *goneWarm) Dead() <-chan struct{}  { return w.dead }
func (w *goneWarm) Ready() <-chan struct{} { return w.ready }

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
	var mu sync.Mutex
	var built []*goneWarm
	gone := true
	build := func(launch.WarmKey) (launch.WarmSandbox, error) {
		mu.Lock()
		defer mu.Unlock()
		w := &goneWarm{dead: make(chan struct{}), ready: make(chan struct{}), gone: gone}
		close(w.ready)
		built = append(built, w)
		return w, nil
	}
	p := launch.NewWarmPool(launch.WarmPoolConfig{Min: 1, Max: 1, Build: build,
		Fingerprint: func() string { return "fp1" }, Log: slog.New(slog.DiscardHandler)})
	t.Cleanup(p.Close)
	idle := func() bool { return p.IdleCounts()["python"] == 1 }
	p.SetKeys([]launch.WarmKey{launch.WarmKeyOf(launch.Request{Runtime: "python"})})
	waitFor(t, idle)
	s := &Server{}
	s.warm.Store(p)
	d := decision{mode: api.ModeProcess, launch: launch.Request{Runtime: "python", Network: api.NetworkNone}}
	if _, ok, err := s.runWarm(context.Background(), nil, d); ok || err != nil {
		t.Fatalf("a gone warm sandbox served the exec: ok %v err %v", ok, err)
	}
	mu.Lock()
	gone = false
	for _, w := range built { // the gone ones end: recheck replaces them
		close(w.dead)
	}
	mu.Unlock()
	p.Recheck()
	waitFor(t, idle)
	res, ok, err := s.runWarm(context.Background(), nil, d)
	if !ok || err != nil || res == nil {
		t.Fatalf("warm run: ok %v err %v", ok, err)
	}
}

func TestWarmBuilders(t *testing.T) {
	quota := func(q float64, ok bool) func(cgroup.Host) (float64, bool) {
		return func(cgroup.Host) (float64, bool) { return q, ok }
	}
	for _, tc := range []struct {
		name     string
		affinity int
		quota    float64
		set      bool
		want     int
	}{
		{"affinity only", 4, 0, false, 4},
		{"quota below affinity", 8, 2.5, true, 2},
		{"quota above affinity", 2, 16, true, 2},
		{"quota below one CPU", 4, 0.5, true, 1},
		{"affinity unreadable", 0, 0, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := warmBuilders(tc.affinity, quota(tc.quota, tc.set)); got != tc.want {
				t.Fatalf("warmBuilders = %d, want %d", got, tc.want)
			}
		})
	}
}
