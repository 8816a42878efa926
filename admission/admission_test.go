package admission

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func acquireNow(t *testing.T, g *Gate, uid int) func() {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	rel, err := g.Acquire(ctx, uid)
	if err != nil {
		t.Fatalf("uid %d: %v (stats %+v)", uid, err, g.Stats())
	}
	return rel
}

func TestOneCallerCannotHoldEverySlot(t *testing.T) {
	g := New(4, 16)
	var rels []func()
	for i := 0; i < 3; i++ {
		rels = append(rels, acquireNow(t, g, 1000))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := g.Acquire(ctx, 1000); !errors.Is(err, context.DeadlineExceeded) {
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
	g := New(1, 1)
	rel := acquireNow(t, g, 1)
	go func() { _, _ = g.Acquire(context.Background(), 2) }() // fills the queue
	deadline := time.Now().Add(time.Second)
	for g.Stats().Queued != 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	if _, err := g.Acquire(context.Background(), 3); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("got %v, want ErrQueueFull", err)
	}
	if time.Since(start) > 100*time.Millisecond {
		t.Fatal("a full queue must answer at once")
	}
	rel()
}

func TestRoundRobinAcrossCallers(t *testing.T) {
	g := New(2, 64) // one slot per caller at most
	first := acquireNow(t, g, 1)
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	enqueue := func(uid int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rel, err := g.Acquire(context.Background(), uid)
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
	g := New(1, 4)
	rel := acquireNow(t, g, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := g.Acquire(ctx, 2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
	if s := g.Stats(); s.Queued != 0 {
		t.Fatalf("a waiter that gave up is still queued: %+v", s)
	}
	rel()
	acquireNow(t, g, 2)()
}

func TestSingleSlotIsShared(t *testing.T) {
	g := New(1, 4)
	rel := acquireNow(t, g, 1)
	done := make(chan struct{})
	go func() {
		r, err := g.Acquire(context.Background(), 1)
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
