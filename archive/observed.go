package archive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"
)

// Observed wraps a Store and counts its operations, failures and bytes
// (the archive metrics), and remembers whether the last operation that
// reached the backend failed (the health check's "degraded"). A missing
// archive is an answer, not a failure.
type Observed struct {
	Store
	mu *sync.Mutex // shared with the counters: one lock for both
	*counters
	lastErr  string
	lastFail time.Time
	degraded bool
	lastPing time.Time
}

// counters are an Observed's operation counts; a store opened again for
// the same backend (an admin changed its S3 parameters) continues them, so
// a Prometheus counter never goes back.
type counters struct {
	mu       sync.Mutex
	ops      map[string]int64 // by operation
	fails    map[string]int64
	archived int64 // bytes put
	restored int64 // bytes got
}

// Pinger is a store that can check it is reachable without moving an
// archive (S3).
type Pinger interface {
	Ping(ctx context.Context) error
}

// pingEvery bounds how often Recheck contacts the backend.
const pingEvery = 10 * time.Second

// Observe wraps s.
func Observe(s Store) *Observed {
	c := &counters{ops: map[string]int64{}, fails: map[string]int64{}}
	return &Observed{Store: s, mu: &c.mu, counters: c}
}

// ObserveAfter wraps s, continuing prev's counters when prev observed the
// same backend (nil prev: Observe). The health state starts afresh: it is
// the new store's.
func ObserveAfter(s Store, prev *Observed) *Observed {
	if prev == nil || prev.Backend() != s.Backend() {
		return Observe(s)
	}
	return &Observed{Store: s, mu: prev.mu, counters: prev.counters}
}

func (o *Observed) note(op string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ops[op]++
	if err != nil && !errors.Is(err, ErrNotFound) {
		o.fails[op]++
		o.lastErr = err.Error() // scrubbed by the backend
		o.lastFail = time.Now()
		o.degraded = true
		return
	}
	o.degraded = false
}

// Put implements Store.
func (o *Observed) Put(ctx context.Context, k Key, write WriteFunc) (Info, error) {
	var werr error
	info, err := o.Store.Put(ctx, k, func(w io.Writer) (int64, error) {
		n, err := write(w)
		werr = err
		return n, err
	})
	if werr != nil {
		// The workspace could not be archived (too large, shrinking
		// file): not the backend's failure.
		o.mu.Lock()
		o.ops["put"]++
		o.fails["put_source"]++
		o.mu.Unlock()
		return info, err
	}
	o.note("put", err)
	if err == nil {
		o.mu.Lock()
		o.archived += info.Size
		o.mu.Unlock()
	}
	return info, err
}

// Get implements Store.
func (o *Observed) Get(ctx context.Context, k Key) (*Reader, error) {
	r, err := o.Store.Get(ctx, k)
	o.note("get", err)
	if err == nil {
		o.mu.Lock()
		o.restored += r.Info.Size
		o.mu.Unlock()
	}
	return r, err
}

// Touch implements Store.
func (o *Observed) Touch(ctx context.Context, k Key) error {
	err := o.Store.Touch(ctx, k)
	o.note("touch", err)
	return err
}

// Delete implements Store.
func (o *Observed) Delete(ctx context.Context, k Key) error {
	err := o.Store.Delete(ctx, k)
	o.note("delete", err)
	return err
}

// List implements Store.
func (o *Observed) List(ctx context.Context, owner string) ([]Info, error) {
	l, err := o.Store.List(ctx, owner)
	o.note("list", err)
	return l, err
}

// Recheck clears the degraded state once the backend answers again, so
// the health check does not stay degraded until the next archive: while
// degraded, at most every 10 s, it pings a Pinger store within ctx.
func (o *Observed) Recheck(ctx context.Context) {
	p, ok := o.Store.(Pinger)
	o.mu.Lock()
	due := o.degraded && ok && time.Since(o.lastPing) >= pingEvery
	if due {
		o.lastPing = time.Now()
	}
	o.mu.Unlock()
	if !due {
		return
	}
	if err := p.Ping(ctx); err == nil {
		o.mu.Lock()
		o.degraded = false
		o.mu.Unlock()
	}
}

// Health reports whether the last backend operation failed, and its
// (credential-free) error.
func (o *Observed) Health() (degraded bool, lastErr string, since time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.degraded, o.lastErr, o.lastFail
}

// WriteMetrics writes the Prometheus text lines of the archive metrics.
func (o *Observed) WriteMetrics(w io.Writer) { WriteMetrics(w, o) }

// WriteMetrics writes the archive metrics of several stores (one per
// backend), each metric family once, as the text format requires.
func WriteMetrics(w io.Writer, obs ...*Observed) {
	if len(obs) == 0 {
		return
	}
	family := func(name, typ, help string, line func(o *Observed, b string)) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
		for _, o := range obs {
			o.mu.Lock()
			line(o, o.Backend())
			o.mu.Unlock()
		}
	}
	family("sandboxd_archive_operations_total", "counter", "Archive store operations, by backend and operation.", func(o *Observed, b string) {
		for _, op := range sortedKeys(o.ops) {
			fmt.Fprintf(w, "sandboxd_archive_operations_total{backend=%q,op=%q} %d\n", b, op, o.ops[op])
		}
	})
	family("sandboxd_archive_failures_total", "counter", "Failed archive store operations, by backend and operation (put_source: the workspace could not be archived).", func(o *Observed, b string) {
		for _, op := range []string{"put", "put_source", "get", "touch", "delete", "list"} {
			fmt.Fprintf(w, "sandboxd_archive_failures_total{backend=%q,op=%q} %d\n", b, op, o.fails[op])
		}
	})
	family("sandboxd_archive_bytes_total", "counter", "Bytes archived (put) and restored (get), by backend.", func(o *Observed, b string) {
		fmt.Fprintf(w, "sandboxd_archive_bytes_total{backend=%q,direction=\"put\"} %d\n", b, o.archived)
		fmt.Fprintf(w, "sandboxd_archive_bytes_total{backend=%q,direction=\"get\"} %d\n", b, o.restored)
	})
	family("sandboxd_archive_degraded", "gauge", "1 while the last archive store operation failed.", func(o *Observed, b string) {
		d := 0
		if o.degraded {
			d = 1
		}
		fmt.Fprintf(w, "sandboxd_archive_degraded{backend=%q} %d\n", b, d)
	})
}

func sortedKeys(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
