// Package admission decides when an exec may run: at most Max at once, at
// most MaxQueued waiting, and no caller able to starve another (DESIGN.md
// I11).
//
// The fairness rules, each a property a test in this package checks:
//
//   - Running: one caller (an identity: "uid:N" for a Unix-socket peer, "key:<name>" for an API key) never holds more than Max-1 slots
//     (with Max > 1), so a slot is always left for somebody else, who gets
//     it at once. The price: a deployment with a single caller uses at most
//     Max-1 slots (raise --max-concurrent-execs by one for it).
//   - Order: freed slots go to waiting callers in round-robin order of caller,
//     FIFO within a caller, so a caller with a long queue cannot starve one
//     with a single exec.
//   - Queue share: one caller has at most Share execs waiting; beyond it
//     ErrShareFull at once, whatever room the queue has.
//   - Room for newcomers: when the queue is full, a caller with fewer
//     waiting execs than the longest queue takes the newest waiting exec
//     of that longest queue's place (that exec gets ErrQueueFull, the same
//     answer it would have had arriving a moment later). So a new caller
//     always finds room while another caller has two or more waiting; only
//     when MaxQueued distinct callers wait with one exec each is the queue
//     full for everyone.
//
// It owns only counting and ordering; it must never run, kill or time out
// an exec itself (the caller's context says how long it may wait).
package admission

import (
	"context"
	"sync"

	"github.com/sandboxd/sandboxd/errdefs"
)

// ErrQueueFull is returned at once when MaxQueued execs already wait and
// none can make room, and to a waiting exec a newcomer displaced.
var ErrQueueFull error = errdefs.New(errdefs.ErrResourceExhausted, "the exec queue is full", "", nil)

// ErrShareFull is returned at once when the caller already has its share of
// the queue waiting.
var ErrShareFull error = errdefs.New(errdefs.ErrResourceExhausted, "the caller's share of the exec queue is full", "", nil)

// Gate admits execs.
type Gate struct {
	mu        sync.Mutex
	max       int
	maxQueued int
	share     int                  // waiting execs of one who, at most
	running   map[string]int       // slots held, by who
	total     int                  // slots held in all
	waiting   map[string][]*waiter // FIFO per who
	queued    int
	ring      []string // callers with waiters, in round-robin order
	next      int      // index in ring of the who served next
}

type waiter struct {
	who  string
	wake chan struct{} // closed when granted or displaced
	err  error         // nil: granted; ErrQueueFull: displaced
	done bool          // granted, displaced or given up; guarded by Gate.mu
}

// New returns a gate for max concurrent execs and maxQueued waiting ones,
// of which one caller may have at most share (clamped to 1..maxQueued).
func New(max, maxQueued, share int) *Gate {
	if max < 1 {
		max = 1
	}
	if maxQueued < 0 {
		maxQueued = 0
	}
	if share < 1 || share > maxQueued {
		share = maxQueued
	}
	return &Gate{max: max, maxQueued: maxQueued, share: share, running: map[string]int{}, waiting: map[string][]*waiter{}}
}

// Stats is a snapshot for metrics and tests.
type Stats struct {
	Running, Queued int
}

// Stats returns the current counts.
func (g *Gate) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return Stats{Running: g.total, Queued: g.queued}
}

// Acquire waits for a slot for uid until ctx is done. It returns a release
// function (idempotent) on success; ErrShareFull or ErrQueueFull at once
// when uid may not wait (or later, ErrQueueFull, when a newcomer displaced
// it); or ctx's error when the caller gave up waiting.
func (g *Gate) Acquire(ctx context.Context, who string) (func(), error) {
	g.mu.Lock()
	if len(g.waiting[who]) == 0 && g.canRun(who) && !g.othersServable(who) {
		g.grant(who)
		g.mu.Unlock()
		return g.releaser(who), nil
	}
	if err := g.makeRoom(who); err != nil {
		g.mu.Unlock()
		return nil, err
	}
	w := &waiter{who: who, wake: make(chan struct{})}
	if len(g.waiting[who]) == 0 {
		g.ring = append(g.ring, who)
	}
	g.waiting[who] = append(g.waiting[who], w)
	g.queued++
	g.dispatch()
	g.mu.Unlock()

	select {
	case <-w.wake:
		if w.err != nil {
			return nil, w.err
		}
		return g.releaser(who), nil
	case <-ctx.Done():
		g.mu.Lock()
		defer g.mu.Unlock()
		if w.done {
			if w.err == nil { // granted while we gave up: hand the slot on
				g.releaseLocked(who)
			}
			return nil, ctx.Err()
		}
		w.done = true
		g.removeWaiter(w)
		g.dispatch()
		return nil, ctx.Err()
	}
}

// Check reports whether an exec of uid would be taken now (run or queued,
// possibly displacing another caller's): nil, or the ErrShareFull or
// ErrQueueFull that Acquire would answer at once. The server asks before it
// reads a request's body, so a caller over its share costs no memory; the
// answer may be stale by the time Acquire runs, which decides for itself.
func (g *Gate) Check(who string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.waiting[who]) == 0 && g.canRun(who) && !g.othersServable(who) {
		return nil
	}
	switch {
	case g.maxQueued == 0:
		return ErrQueueFull
	case len(g.waiting[who]) >= g.share:
		return ErrShareFull
	case g.queued < g.maxQueued || g.longest(who) != "":
		return nil
	}
	return ErrQueueFull
}

// makeRoom checks that uid may add a waiter, displacing the newest waiter
// of the longest queue when the queue is full and uid's is shorter.
func (g *Gate) makeRoom(who string) error {
	if g.maxQueued == 0 {
		return ErrQueueFull
	}
	if len(g.waiting[who]) >= g.share {
		return ErrShareFull
	}
	if g.queued < g.maxQueued {
		return nil
	}
	v := g.longest(who)
	if v == "" {
		return ErrQueueFull
	}
	ws := g.waiting[v]
	w := ws[len(ws)-1]
	w.done, w.err = true, ErrQueueFull
	g.removeWaiter(w)
	close(w.wake)
	return nil
}

// longest returns the caller with the most waiters, if it has at least two
// more than who (so taking one of its places leaves it no shorter than
// who's queue), or "". Callers are identities ("uid:N", "key:<name>"). Ties go
// to the caller that is later in the ring, which queued most recently.
func (g *Gate) longest(who string) string {
	best, n := "", len(g.waiting[who])+1
	for _, u := range g.ring {
		if u != who && len(g.waiting[u]) > n {
			best, n = u, len(g.waiting[u])
		} else if u != who && best != "" && len(g.waiting[u]) == n {
			best = u
		}
	}
	return best
}

// canRun reports whether uid may take a slot now.
func (g *Gate) canRun(who string) bool {
	if g.total >= g.max {
		return false
	}
	if g.max > 1 && g.running[who] >= g.max-1 {
		return false
	}
	return true
}

// othersServable reports whether a waiter of another uid could take a slot
// now; a newcomer must not jump ahead of it.
func (g *Gate) othersServable(who string) bool {
	for u, ws := range g.waiting {
		if u != who && len(ws) > 0 && g.canRun(u) {
			return true
		}
	}
	return false
}

func (g *Gate) grant(who string) {
	g.running[who]++
	g.total++
}

// dispatch hands free slots to waiters, round-robin over uids.
func (g *Gate) dispatch() {
	for g.total < g.max && len(g.ring) > 0 {
		served := false
		for i := 0; i < len(g.ring); i++ {
			idx := (g.next + i) % len(g.ring)
			who := g.ring[idx]
			if !g.canRun(who) {
				continue
			}
			w := g.waiting[who][0]
			g.waiting[who] = g.waiting[who][1:]
			g.queued--
			w.done = true
			g.grant(who)
			close(w.wake)
			if len(g.waiting[who]) == 0 {
				delete(g.waiting, who)
				g.ring = append(g.ring[:idx], g.ring[idx+1:]...)
				g.next = idx // the who after it moved into idx
			} else {
				g.next = idx + 1
			}
			if len(g.ring) > 0 {
				g.next %= len(g.ring)
			} else {
				g.next = 0
			}
			served = true
			break
		}
		if !served {
			return
		}
	}
}

func (g *Gate) removeWaiter(w *waiter) {
	ws := g.waiting[w.who]
	for i, x := range ws {
		if x == w {
			g.waiting[w.who] = append(ws[:i], ws[i+1:]...)
			g.queued--
			break
		}
	}
	if len(g.waiting[w.who]) == 0 {
		delete(g.waiting, w.who)
		for i, u := range g.ring {
			if u == w.who {
				g.ring = append(g.ring[:i], g.ring[i+1:]...)
				if g.next > i {
					g.next--
				}
				break
			}
		}
		if len(g.ring) > 0 {
			g.next %= len(g.ring)
		} else {
			g.next = 0
		}
	}
}

func (g *Gate) releaser(who string) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.releaseLocked(who)
		})
	}
}

func (g *Gate) releaseLocked(who string) {
	g.running[who]--
	if g.running[who] <= 0 {
		delete(g.running, who)
	}
	g.total--
	g.dispatch()
}
