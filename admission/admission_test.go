package admission

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"
)

func acquireNow(t *testing.T, g *Gate, uid int) func() {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	rel, err := g.Acquire(ctx, id(uid))
	if err != nil {
		t.Fatalf("uid %d: %v (stats %+v)", uid, err, g.Stats())
	}
	return rel
}

func TestOneCallerCannotHoldEverySlot(t *testing.T) {
	g := New(4, 16, 0)
	var rels []func()
	for i := 0; i < 3; i++ {
		rels = append(rels, acquireNow(t, g, 1000))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := g.Acquire(ctx, id(1000)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a 4th slot for the same caller: %v, want to wait until its deadline", err)
	}
	// Another caller gets the reserved slot at once.
	rels = append(rels, acquireNow(t, g, 2000))
	if s := g.Stats(); s.Running != 4 || s.Queued != 0 {
		t.Fatalf("stats %+v", s)
	}
	for _, r := range rels {
		r()
		r() // idempotent
	}
	if s := g.Stats(); s.Running != 0 {
		t.Fatalf("after release: %+v", s)
	}
}

func TestQueueFullAnswersAtOnce(t *testing.T) {
	g := New(1, 1, 0)
	rel := acquireNow(t, g, 1)
	go func() { _, _ = g.Acquire(context.Background(), id(2)) }() // fills the queue
	deadline := time.Now().Add(time.Second)
	for g.Stats().Queued != 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	if _, err := g.Acquire(context.Background(), id(3)); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("got %v, want ErrQueueFull", err)
	}
	if time.Since(start) > 100*time.Millisecond {
		t.Fatal("a full queue must answer at once")
	}
	rel()
}

func TestRoundRobinAcrossCallers(t *testing.T) {
	g := New(2, 64, 0) // one slot per caller at most
	first := acquireNow(t, g, 1)
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	enqueue := func(uid int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rel, err := g.Acquire(context.Background(), id(uid))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, uid)
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			rel()
		}()
		deadline := time.Now().Add(time.Second)
		for time.Now().Before(deadline) {
			if s := g.Stats(); s.Queued+s.Running > 0 {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	// uid 1 queues five more behind its running exec; uid 2 queues one.
	for i := 0; i < 5; i++ {
		enqueue(1)
	}
	enqueue(2)
	first()
	wg.Wait()
	// uid 2 must not wait for all of uid 1's queue.
	pos := -1
	for i, u := range order {
		if u == 2 {
			pos = i
		}
	}
	if pos < 0 || pos > 1 {
		t.Fatalf("grant order %v: uid 2 served at position %d, want 0 or 1", order, pos)
	}
}

func TestGivingUpFreesTheQueue(t *testing.T) {
	g := New(1, 4, 0)
	rel := acquireNow(t, g, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := g.Acquire(ctx, id(2)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
	if s := g.Stats(); s.Queued != 0 {
		t.Fatalf("a waiter that gave up is still queued: %+v", s)
	}
	rel()
	acquireNow(t, g, 2)()
}

func TestSingleSlotIsShared(t *testing.T) {
	g := New(1, 4, 0)
	rel := acquireNow(t, g, 1)
	done := make(chan struct{})
	go func() {
		r, err := g.Acquire(context.Background(), id(1))
		if err == nil {
			r()
		}
		close(done)
	}()
	time.Sleep(10 * time.Millisecond)
	rel()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("the waiter never got the freed slot")
	}
}

// outcome of one Acquire in the table tests.
const (
	ran       = "run"
	queued    = "queued"
	shareFull = "share full"
	queueFull = "queue full"
)

type pending struct {
	res    chan error
	cancel context.CancelFunc
}

// try calls Acquire for uid and reports what happened at once: it ran, it
// is waiting, or it was refused (and how). A waiting call is returned so
// the test can see later whether it was displaced.
func try(t *testing.T, g *Gate, uid int) (string, *pending) {
	t.Helper()
	before := g.waitingOf(uid)
	ctx, cancel := context.WithCancel(context.Background())
	p := &pending{res: make(chan error, 1), cancel: cancel}
	go func() {
		rel, err := g.Acquire(ctx, id(uid))
		if err == nil {
			_ = rel // held until the test ends: the gate's state is what it checks
		}
		p.res <- err
	}()
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-p.res:
			cancel()
			switch {
			case err == nil:
				return ran, nil
			case errors.Is(err, ErrShareFull):
				return shareFull, nil
			case errors.Is(err, ErrQueueFull):
				return queueFull, nil
			}
			t.Fatalf("uid %d: unexpected %v", uid, err)
		default:
		}
		if g.waitingOf(uid) > before {
			return queued, p
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("uid %d: Acquire neither returned nor queued (stats %+v)", uid, g.Stats())
	return "", nil
}

// waitingOf is the number of uid's waiting execs.
func (g *Gate) waitingOf(uid int) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.waiting[id(uid)])
}

// TestAdmissionRules walks the gate through one sequence of Acquire calls
// per rule of the package doc and checks each answer, the Admissible
// prediction before it, and which waiters a newcomer displaced.
func TestAdmissionRules(t *testing.T) {
	type step struct {
		uid  int
		want string
	}
	for _, tc := range []struct {
		name                  string
		max, maxQueued, share int
		steps                 []step
		displaced             []int // indices of steps whose waiter was displaced
	}{
		{name: "one caller keeps a running slot free for another", max: 2, maxQueued: 4, share: 4,
			steps: []step{{1, ran}, {1, queued}, {2, ran}}},
		{name: "a caller's queue share is bounded", max: 2, maxQueued: 8, share: 2,
			steps: []step{{1, ran}, {1, queued}, {1, queued}, {1, shareFull}, {2, ran}, {2, queued}}},
		{name: "the share bound holds even with room in the queue", max: 1, maxQueued: 16, share: 1,
			steps: []step{{1, ran}, {1, queued}, {1, shareFull}, {2, queued}, {2, shareFull}, {3, queued}}},
		{name: "a newcomer displaces the newest waiter of the longest queue", max: 1, maxQueued: 3, share: 3,
			steps:     []step{{1, ran}, {1, queued}, {1, queued}, {1, queued}, {2, queued}, {3, queued}, {4, queueFull}},
			displaced: []int{3, 2}},
		{name: "equal queues displace nobody", max: 1, maxQueued: 2, share: 2,
			steps: []step{{1, ran}, {2, queued}, {3, queued}, {4, queueFull}, {2, queueFull}}},
		{name: "a caller one longer than the newcomer keeps its place", max: 1, maxQueued: 3, share: 3,
			steps:     []step{{1, ran}, {2, queued}, {2, queued}, {3, queued}, {3, queueFull}, {4, queued}},
			displaced: []int{2}},
		{name: "no queue at all", max: 1, maxQueued: 0, share: 0,
			steps: []step{{1, ran}, {2, queueFull}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := New(tc.max, tc.maxQueued, tc.share)
			waiters := map[int]*pending{}
			for i, st := range tc.steps {
				checked := g.Check(id(st.uid))
				got, p := try(t, g, st.uid)
				if got != st.want {
					t.Fatalf("step %d (uid %d): %s, want %s (stats %+v)", i, st.uid, got, st.want, g.Stats())
				}
				wantCheck := map[string]error{ran: nil, queued: nil, shareFull: ErrShareFull, queueFull: ErrQueueFull}[st.want]
				if !errors.Is(checked, wantCheck) {
					t.Errorf("step %d (uid %d): Check = %v before an Acquire that got %s", i, st.uid, checked, got)
				}
				if p != nil {
					waiters[i] = p
					defer p.cancel()
				}
			}
			want := map[int]bool{}
			for _, i := range tc.displaced {
				want[i] = true
			}
			for i, p := range waiters {
				select {
				case err := <-p.res:
					if !want[i] || !errors.Is(err, ErrQueueFull) {
						t.Errorf("step %d: waiter ended with %v; displaced expected: %v", i, err, want[i])
					}
				default:
					if want[i] {
						t.Errorf("step %d: waiter still waits; want it displaced", i)
					}
				}
			}
			if s := g.Stats(); s.Queued > tc.maxQueued {
				t.Errorf("queue holds %d, above its bound %d", s.Queued, tc.maxQueued)
			}
		})
	}
}

// TestNewCallerFindsRoom is the I11 property: whatever one caller does
// with the queue, a second caller's exec is queued and then run.
func TestNewCallerFindsRoom(t *testing.T) {
	g := New(2, 16, 16)
	hold := acquireNow(t, g, 1) // uid 1 holds its max-1 running slot
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < 40; i++ { // far more than the queue holds
		wg.Add(1)
		go func() {
			defer wg.Done()
			if rel, err := g.Acquire(ctx, id(1)); err == nil {
				<-ctx.Done()
				rel()
			}
		}()
	}
	deadline := time.Now().Add(2 * time.Second)
	for g.Stats().Queued < 16 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if s := g.Stats(); s.Queued != 16 {
		t.Fatalf("uid 1 should have filled the queue: %+v", s)
	}
	// uid 2 gets the slot uid 1 may not take, at once.
	rel2 := acquireNow(t, g, 2)
	// A third caller is queued (displacing one of uid 1's) and runs when
	// uid 2's exec ends, before every one of uid 1's.
	got := make(chan error, 1)
	go func() {
		rel, err := g.Acquire(context.Background(), id(3))
		if err == nil {
			rel()
		}
		got <- err
	}()
	time.Sleep(20 * time.Millisecond)
	rel2()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("uid 3: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("uid 3 never ran")
	}
	hold()
	cancel()
	wg.Wait()
}

// id is the caller identity of a test uid, as the supervisor forms it.
func id(uid int) string { return "uid:" + strconv.Itoa(uid) }
