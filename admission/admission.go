// Package admission decides when an exec may run: at most Max at once, at
// most MaxQueued waiting, and no caller able to starve another.
//
// The fairness rule: one caller (peer uid) never holds more than Max-1 slots
// (with Max > 1), so a slot is always left for somebody else, who gets it
// at once; and freed slots go to waiting callers in round-robin order of
// uid, FIFO within a uid, so a caller with a long queue cannot starve one
// with a single exec. The price: a deployment with a single caller uses at
// most Max-1 slots (raise --max-concurrent-execs by one for it).
//
// It owns only counting and ordering; it must never run, kill or time out
// an exec itself (the caller's context says how long it may wait).
package admission

import (
	"context"
	"errors"
	"sync"
)

// ErrQueueFull is returned at once when MaxQueued callers already wait.
var ErrQueueFull = errors.New("the exec queue is full")

// Gate admits execs.
type Gate struct {
	mu        sync.Mutex
	max       int
	maxQueued int
	running   map[int]int       // slots held, by uid
	total     int               // slots held in all
	waiting   map[int][]*waiter // FIFO per uid
	queued    int
	ring      []int // uids with waiters, in round-robin order
	next      int   // index in ring of the uid served next
}

type waiter struct {
	uid     int
	granted chan struct{}
	done    bool // granted or given up; guarded by Gate.mu
}

// New returns a gate for max concurrent execs and maxQueued waiting ones.
func New(max, maxQueued int) *Gate {
	if max < 1 {
		max = 1
	}
	if maxQueued < 0 {
		maxQueued = 0
	}
	return &Gate{max: max, maxQueued: maxQueued, running: map[int]int{}, waiting: map[int][]*waiter{}}
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
// function (idempotent) on success, ErrQueueFull when the queue is full, or
// ctx's error when the caller gave up waiting.
func (g *Gate) Acquire(ctx context.Context, uid int) (func(), error) {
	g.mu.Lock()
	if len(g.waiting[uid]) == 0 && g.canRun(uid) && !g.othersServable(uid) {
		g.grant(uid)
		g.mu.Unlock()
		return g.releaser(uid), nil
	}
	if g.queued >= g.maxQueued {
		g.mu.Unlock()
		return nil, ErrQueueFull
	}
	w := &waiter{uid: uid, granted: make(chan struct{})}
	if len(g.waiting[uid]) == 0 {
		g.ring = append(g.ring, uid)
	}
	g.waiting[uid] = append(g.waiting[uid], w)
	g.queued++
	g.dispatch()
	g.mu.Unlock()

	select {
	case <-w.granted:
		return g.releaser(uid), nil
	case <-ctx.Done():
		g.mu.Lock()
		defer g.mu.Unlock()
		if w.done { // granted while we gave up: hand the slot on
			g.releaseLocked(uid)
			return nil, ctx.Err()
		}
		w.done = true
		g.removeWaiter(w)
		g.dispatch()
		return nil, ctx.Err()
	}
}

// canRun reports whether uid may take a slot now.
func (g *Gate) canRun(uid int) bool {
	if g.total >= g.max {
		return false
	}
	if g.max > 1 && g.running[uid] >= g.max-1 {
		return false
	}
	return true
}

// othersServable reports whether a waiter of another uid could take a slot
// now; a newcomer must not jump ahead of it.
func (g *Gate) othersServable(uid int) bool {
	for u, ws := range g.waiting {
		if u != uid && len(ws) > 0 && g.canRun(u) {
			return true
		}
	}
	return false
}

func (g *Gate) grant(uid int) {
	g.running[uid]++
	g.total++
}

// dispatch hands free slots to waiters, round-robin over uids.
func (g *Gate) dispatch() {
	for g.total < g.max && len(g.ring) > 0 {
		served := false
		for i := 0; i < len(g.ring); i++ {
			idx := (g.next + i) % len(g.ring)
			uid := g.ring[idx]
			if !g.canRun(uid) {
				continue
			}
			w := g.waiting[uid][0]
			g.waiting[uid] = g.waiting[uid][1:]
			g.queued--
			w.done = true
			g.grant(uid)
			close(w.granted)
			if len(g.waiting[uid]) == 0 {
				delete(g.waiting, uid)
				g.ring = append(g.ring[:idx], g.ring[idx+1:]...)
				g.next = idx // the uid after it moved into idx
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
	ws := g.waiting[w.uid]
	for i, x := range ws {
		if x == w {
			g.waiting[w.uid] = append(ws[:i], ws[i+1:]...)
			g.queued--
			break
		}
	}
	if len(g.waiting[w.uid]) == 0 {
		delete(g.waiting, w.uid)
		for i, u := range g.ring {
			if u == w.uid {
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

func (g *Gate) releaser(uid int) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.releaseLocked(uid)
		})
	}
}

func (g *Gate) releaseLocked(uid int) {
	g.running[uid]--
	if g.running[uid] <= 0 {
		delete(g.running, uid)
	}
	g.total--
	g.dispatch()
}
