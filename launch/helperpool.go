package launch

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/cgroup"
)

// The helper pool takes the helper's start-up off a launch's critical path.
// A pre-started helper is an ordinary sandboxd-nsinit run started ahead of
// time: its C prelude has made the namespaces and dropped every capability
// (that part depends on nothing of a request), the Go runtime is up, and it
// is blocked reading its spec on fd 3. On cgroup v1 it was moved into its
// own fresh cgroup when it was started, so the move (5-7 ms on this kind of
// host: cgroup_threadgroup_rwsem and an RCU grace period) is no longer
// paid by the request; on v2 it was born in it (CLONE_INTO_CGROUP).
//
// What a launch does with it is what it does with a helper it has just
// started: it writes the request's limits to the helper's cgroup, hands
// over the spec and stdin, makes the records so far durable, and releases
// it; until the release byte the helper cannot exec bwrap, so the limits
// hold before anything of the payload runs. A pre-started helper holds
// exactly the privileges of any helper (none after its prelude), is the
// supervisor's child (parent-death signal, release-pipe hang-up), is
// taken by one launch only and never returns to the pool, and is replaced
// after maxAge so that a replaced helper binary or owner file is picked up.

// poolMaxAge is how long a pre-started helper waits for a launch before it
// is replaced.
const poolMaxAge = 30 * time.Second

// helperPool keeps up to size pre-started helpers.
type helperPool struct {
	start func() (*helperProc, error) // starts one helper in a fresh cgroup
	size  int
	log   *slog.Logger

	mu     sync.Mutex
	ready  []*helperProc
	closed bool
	wake   chan struct{} // a helper was taken: refill
	done   chan struct{}
	wg     sync.WaitGroup
}

// newHelperPool starts a pool of size helpers (size > 0); start makes one.
func newHelperPool(size int, start func() (*helperProc, error), log *slog.Logger) *helperPool {
	p := &helperPool{start: start, size: size, log: log, wake: make(chan struct{}, 1), done: make(chan struct{})}
	p.wg.Add(1)
	p.kick() // fill at once
	go p.fill()
	return p
}

// take returns a pre-started helper that is still waiting for its spec,
// or nil when the pool is empty (then it refills at once). The launch that
// took one calls kick once it has released its helper: a refill (the
// helper's start-up, a netns, the v1 move) then competes for the CPU with
// the payload, not with the launch's own critical path.
func (p *helperPool) take() *helperProc {
	for {
		p.mu.Lock()
		if p.closed || len(p.ready) == 0 {
			p.mu.Unlock()
			p.kick()
			return nil
		}
		hp := p.ready[0]
		p.ready = p.ready[1:]
		p.mu.Unlock()
		if !hp.exited() {
			return hp
		}
		// It died waiting (its prelude failed, or it was killed): a cold
		// launch runs the prelude again and reports what happens.
		p.log.Warn("helper pool: a pre-started helper died while it waited; the launch starts its own", "pid", hp.cmd.Process.Pid)
		hp.discard()
	}
}

func (p *helperPool) kick() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// fill keeps the pool full and replaces helpers older than poolMaxAge.
func (p *helperPool) fill() {
	defer p.wg.Done()
	tick := time.NewTicker(poolMaxAge / 3)
	defer tick.Stop()
	backoff := time.Duration(0)
	for {
		select {
		case <-p.done:
			return
		case <-p.wake:
		case <-tick.C:
			p.expire()
		}
		if backoff > 0 {
			select {
			case <-p.done:
				return
			case <-time.After(backoff):
			}
		}
		backoff = p.topUp(backoff)
	}
}

// topUp starts helpers until the pool is full. A helper that cannot be
// started (a broken install, the cgroup subtree gone) is logged and retried
// with a growing delay: launches fall back to starting their own, which
// report the failure to their callers.
func (p *helperPool) topUp(backoff time.Duration) time.Duration {
	for {
		p.mu.Lock()
		n, closed := len(p.ready), p.closed
		p.mu.Unlock()
		if closed || n >= p.size {
			return 0
		}
		hp, err := p.start()
		if err != nil {
			p.log.Warn("helper pool: cannot pre-start a helper; launches start their own", "err", err)
			return min(max(2*backoff, 100*time.Millisecond), 10*time.Second)
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			hp.discard()
			return 0
		}
		p.ready = append(p.ready, hp)
		p.mu.Unlock()
	}
}

// expire discards the helpers that have waited longer than poolMaxAge.
func (p *helperPool) expire() {
	p.mu.Lock()
	var old []*helperProc
	keep := p.ready[:0]
	for _, hp := range p.ready {
		if time.Since(hp.begin) > poolMaxAge {
			old = append(old, hp)
		} else {
			keep = append(keep, hp)
		}
	}
	p.ready = keep
	p.mu.Unlock()
	for _, hp := range old {
		hp.discard()
	}
}

// close stops filling and kills every helper still waiting.
func (p *helperPool) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	ready := p.ready
	p.ready = nil
	p.mu.Unlock()
	close(p.done)
	p.wg.Wait()
	for _, hp := range ready {
		hp.discard()
	}
}

// len is how many helpers wait (tests, the benchmark).
func (p *helperPool) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ready)
}

// exited reports whether the helper has already exited, leaving its wait
// status for teardown.
func (hp *helperProc) exited() bool {
	select {
	case ws := <-hp.waited:
		hp.waited <- ws
		return true
	default:
		return false
	}
}

// discard stops a helper that was never released (nothing of a payload
// ran in it), reaps it and removes its pipes and cgroup. SIGTERM first:
// the helper then ends and reaps its keeper (SECURITY.md, "A helper killed
// at any moment") before it dies, where a SIGKILL would leave the keeper
// to us, a child subreaper, as a zombie for ReapAdopted (adopted.go) to
// reap. SIGKILL after a second.
func (hp *helperProc) discard() {
	_ = hp.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-hp.waited:
	case <-time.After(time.Second):
		_ = hp.cmd.Process.Kill()
		<-hp.waited
	}
	hp.pipes.closeAll()
	if hp.cg != nil {
		hp.cg.KillAll()
		_ = hp.cg.Remove() // what is left, Sweep removes at the next start
	}
}

// poolCgroupName names a pre-started helper's cgroup: no exec id exists
// yet. Sweep removes it with the exec cgroups after a crash.
func poolCgroupName() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "pool-" + hex.EncodeToString(b)
}

// preStart starts one helper for the pool: in a fresh cgroup without
// limits yet (the launch that takes it writes its request's), moved there
// now on v1, and in the background (the lowest CPU weight, until the
// launch that takes it gives the default back): its start-up yields the
// CPU to the execs running now.
func (h *HelperLauncher) preStart() (*helperProc, error) {
	var cg *cgroup.Exec
	if h.cgroupMode() != cgroup.ModeNone {
		var err error
		if cg, err = h.cfg.Cgroups.Create(poolCgroupName(), cgroup.Limits{Background: true}); err != nil {
			return nil, err
		}
	}
	hp, err := newHelperProc(h.cfg.HelperPath, cg, 0)
	if err != nil {
		if cg != nil {
			_ = cg.Remove()
		}
		return nil, err
	}
	if err := hp.start(); err != nil {
		hp.pipes.closeAll()
		if cg != nil {
			_ = cg.Remove()
		}
		return nil, err
	}
	if cg != nil && !hp.placed {
		if err := cg.Add(hp.cmd.Process.Pid); err != nil {
			hp.discard()
			return nil, err
		}
	}
	hp.placed = true
	return hp, nil
}
