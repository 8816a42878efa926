package admission

import (
	"context"
	"testing"
	"time"
)

func TestSetMax(t *testing.T) {
	g := New(2, 4, 4)
	rel1, _ := g.Acquire(context.Background(), id(1))
	rel2, _ := g.Acquire(context.Background(), id(2))
	// Lowering under the running count stops nothing; a newcomer waits
	// until enough have finished.
	g.SetMax(1)
	got := make(chan func(), 1)
	go func() {
		rel, err := g.Acquire(context.Background(), id(3))
		if err != nil {
			t.Error(err)
		}
		got <- rel
	}()
	waitFor(t, func() bool { return g.Stats().Queued == 1 })
	rel1()
	select {
	case <-got:
		t.Fatal("admitted while 1 of max 1 still runs")
	case <-time.After(50 * time.Millisecond):
	}
	rel2()
	rel3 := <-got
	// Raising admits waiters at once.
	rel4c := make(chan func(), 1)
	go func() { r, _ := g.Acquire(context.Background(), id(4)); rel4c <- r }()
	waitFor(t, func() bool { return g.Stats().Queued == 1 })
	g.SetMax(3)
	select {
	case r := <-rel4c:
		r()
	case <-time.After(5 * time.Second):
		t.Fatal("raising max did not admit the waiter")
	}
	rel3()
	if g.Max() != 3 {
		t.Fatalf("max %d", g.Max())
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatal("condition not reached")
}
