package protocol

import (
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
)

// Budget bounds the bytes of frame lines that every decoder sharing it
// holds at once: one budget per supervisor bounds what all its kernels'
// channels cost together. A decoder holds a line's buffer while it reads
// and decodes the frame and until the next frame is asked for (the frame's
// strings are live meanwhile); decoding a frame allocates up to about
// seven times its line on top, briefly. A line within FreeLineBytes is not
// charged: small frames, the runners' everyday traffic, never wait.
type Budget struct {
	max  int64
	wait time.Duration

	mu      sync.Mutex
	used    int64
	changed chan struct{} // closed and replaced at each release
}

// FreeLineBytes is the line buffer a decoder keeps between frames without
// charging its budget.
const FreeLineBytes = 4 * readChunk

// NewBudget returns a budget of max bytes (at least MaxFrameBytes+1, so a
// maximal frame can always be read once the others are done). A decoder
// that cannot get what its line needs within wait breaks its channel with
// an error of class errdefs.ErrResourceExhausted.
func NewBudget(max int64, wait time.Duration) *Budget {
	return &Budget{max: max, wait: wait, changed: make(chan struct{})}
}

// acquire charges n bytes, waiting up to the budget's wait for them.
// Waiting is bounded, not open-ended: decoders that each hold part of the
// budget and wait for more would otherwise wait for each other forever.
func (b *Budget) acquire(n int64) error {
	deadline := time.NewTimer(b.wait)
	defer deadline.Stop()
	for {
		b.mu.Lock()
		if b.used+n <= b.max {
			b.used += n
			b.mu.Unlock()
			return nil
		}
		changed := b.changed
		b.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			return protoErr(errdefs.ErrResourceExhausted,
				"the supervisor's budget for kernel frames in flight (%d MiB across all kernels) stayed exhausted for %s; a frame of this kernel needed %d bytes more",
				b.max>>20, b.wait, n)
		}
	}
}

// release returns n charged bytes.
func (b *Budget) release(n int64) {
	b.mu.Lock()
	b.used -= n
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}

// Used is the bytes charged now.
func (b *Budget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
