package launch

import (
	"fmt"
	"io"
	"strings"
)

// capturedStream holds at most limit bytes of one output stream of a
// payload while it runs, so that a payload writing gigabytes costs the
// supervisor a fixed amount of memory. When the stream fits, it is kept
// whole. When it does not, the result is its head, a marker saying how many
// bytes were cut, and its tail -- exactly limit bytes in all -- because the
// end of a failing program's output (the traceback) matters as much as the
// start. It reads to EOF whatever it keeps, so the writer never blocks.
type capturedStream struct {
	limit     int64
	head      []byte // the first headCap() bytes
	ring      []byte // the last tailCap() bytes seen after the head, circular
	ringPos   int    // where the next byte goes in ring
	ringLen   int    // bytes in ring
	total     int64
	truncated bool
	onChunk   func([]byte) // sees every chunk read (streaming); may be nil
}

func (c *capturedStream) headCap() int64 { return c.limit / 2 }
func (c *capturedStream) tailCap() int64 { return c.limit - c.limit/2 }

func (c *capturedStream) drain(r io.Reader) {
	chunk := make([]byte, 64<<10)
	for {
		n, err := r.Read(chunk)
		if n > 0 {
			if c.onChunk != nil {
				c.onChunk(chunk[:n])
			}
			c.write(chunk[:n])
		}
		if err != nil {
			return
		}
	}
}

func (c *capturedStream) write(p []byte) {
	c.total += int64(len(p))
	if c.total > c.limit {
		c.truncated = true
	}
	if room := c.headCap() - int64(len(c.head)); room > 0 {
		take := min(room, int64(len(p)))
		c.head = append(c.head, p[:take]...)
		p = p[take:]
	}
	tc := int(c.tailCap())
	if tc == 0 || len(p) == 0 {
		return
	}
	if c.ring == nil {
		c.ring = make([]byte, tc)
	}
	if len(p) >= tc { // only the last tc bytes can survive
		copy(c.ring, p[len(p)-tc:])
		c.ringPos, c.ringLen = 0, tc
		return
	}
	n := copy(c.ring[c.ringPos:], p)
	copy(c.ring, p[n:])
	c.ringPos = (c.ringPos + len(p)) % tc
	c.ringLen = min(c.ringLen+len(p), tc)
}

// tail returns the last n bytes of the ring, in order.
func (c *capturedStream) tail(n int) []byte {
	n = min(n, c.ringLen)
	out := make([]byte, 0, n)
	start := (c.ringPos - n + len(c.ring)) % max(len(c.ring), 1)
	if start+n <= len(c.ring) {
		return append(out, c.ring[start:start+n]...)
	}
	out = append(out, c.ring[start:]...)
	return append(out, c.ring[:n-(len(c.ring)-start)]...)
}

// Bytes returns what is kept: the whole stream, or head + marker + tail.
func (c *capturedStream) Bytes() []byte {
	if !c.truncated {
		return append(append([]byte{}, c.head...), c.tail(c.ringLen)...)
	}
	// The marker says how many bytes it replaces, which depends on the
	// marker's own length: iterate to the fixed point (two or three steps).
	marker, tailLen := "", int64(0)
	for i := 0; i < 4; i++ {
		tailLen = c.limit - int64(len(c.head)) - int64(len(marker))
		next := fmt.Sprintf("\n[... sandboxd: %d bytes cut ...]\n", c.total-int64(len(c.head))-max(tailLen, 0))
		if next == marker {
			break
		}
		marker = next
	}
	tailLen = c.limit - int64(len(c.head)) - int64(len(marker))
	if tailLen < 0 { // a limit too small for a marker: the head alone
		return append([]byte{}, c.head[:min(int64(len(c.head)), c.limit)]...)
	}
	out := append(append([]byte{}, c.head...), marker...)
	return append(out, c.tail(int(tailLen))...)
}

// String returns Bytes as valid UTF-8 (invalid sequences, including a
// character cut at the head or tail boundary, become U+FFFD).
func (c *capturedStream) String() string { return strings.ToValidUTF8(string(c.Bytes()), "\uFFFD") }

// Head returns up to n bytes of the start of the stream, as valid UTF-8.
func (c *capturedStream) Head(n int) string {
	b := c.Bytes()
	n = max(n, 0)
	if len(b) > n {
		b = b[:n]
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// Capture is the bounded head-and-tail capture of one output stream that
// an exec's result carries, for output that reaches the supervisor as
// kernel frames rather than through a pipe: the same caps, the same marker.
type Capture struct{ c capturedStream }

// NewCapture keeps at most limit bytes.
func NewCapture(limit int64) *Capture { return &Capture{c: capturedStream{limit: limit}} }

// Write keeps what fits; it never fails.
func (c *Capture) Write(p []byte) (int, error) { c.c.write(p); return len(p), nil }

// String is what is kept, as valid UTF-8.
func (c *Capture) String() string { return c.c.String() }

// Truncated reports whether the limit cut the stream.
func (c *Capture) Truncated() bool { return c.c.truncated }

// Total is every byte written, kept or not.
func (c *Capture) Total() int64 { return c.c.total }
