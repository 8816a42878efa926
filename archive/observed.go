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
	mu       sync.Mutex
	ops      map[string]int64 // by operation
	fails    map[string]int64
	archived int64 // bytes put
	restored int64 // bytes got
	lastErr  string
	lastFail time.Time
	degraded bool
	lastPing time.Time
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
	return &Observed{Store: s, ops: map[string]int64{}, fails: map[string]int64{}}
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
func (o *Observed) WriteMetrics(w io.Writer) {
	o.mu.Lock()
	defer o.mu.Unlock()
	b := o.Backend()
	fmt.Fprintln(w, "# HELP sandboxd_archive_operations_total Archive store operations, by backend and operation.")
	fmt.Fprintln(w, "# TYPE sandboxd_archive_operations_total counter")
	for _, op := range sortedKeys(o.ops) {
		fmt.Fprintf(w, "sandboxd_archive_operations_total{backend=%q,op=%q} %d\n", b, op, o.ops[op])
	}
	fmt.Fprintln(w, "# HELP sandboxd_archive_failures_total Failed archive store operations, by backend and operation (put_source: the workspace could not be archived).")
	fmt.Fprintln(w, "# TYPE sandboxd_archive_failures_total counter")
	for _, op := range []string{"put", "put_source", "get", "touch", "delete", "list"} {
		fmt.Fprintf(w, "sandboxd_archive_failures_total{backend=%q,op=%q} %d\n", b, op, o.fails[op])
	}
	fmt.Fprintln(w, "# HELP sandboxd_archive_bytes_total Bytes archived (put) and restored (get), by backend.")
	fmt.Fprintln(w, "# TYPE sandboxd_archive_bytes_total counter")
	fmt.Fprintf(w, "sandboxd_archive_bytes_total{backend=%q,direction=\"put\"} %d\n", b, o.archived)
	fmt.Fprintf(w, "sandboxd_archive_bytes_total{backend=%q,direction=\"get\"} %d\n", b, o.restored)
	fmt.Fprintln(w, "# HELP sandboxd_archive_degraded 1 while the last archive store operation failed.")
	fmt.Fprintln(w, "# TYPE sandboxd_archive_degraded gauge")
	d := 0
	if o.degraded {
		d = 1
	}
	fmt.Fprintf(w, "sandboxd_archive_degraded{backend=%q} %d\n", b, d)
}

func sortedKeys(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
