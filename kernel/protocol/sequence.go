package protocol

import (
	"fmt"
	"io"

	"github.com/sandboxd/sandboxd/errdefs"
)

// Conn applies the channel's sequence rules on top of a Decoder: the first
// frame is ready and comes once; after it, frames arrive only while an exec
// runs, each carries that exec's id, and a result ends the exec. The
// decoder checks each frame alone; Conn checks that the kernel speaks only
// when spoken to, so that nothing it sends between execs, or under another
// exec's id, is attributed to a caller. Like the decoder it is poisoned by
// the first violation.
type Conn struct {
	dec     *Decoder
	ready   *Ready
	current string // the running exec's id; "" between execs
	err     error
}

// NewConn returns a Conn reading frames from r.
func NewConn(r io.Reader) *Conn { return &Conn{dec: NewDecoder(r)} }

// Budget makes the connection's decoder charge its frames to b, the
// supervisor's budget for frames in flight. Call it before Ready.
func (c *Conn) Budget(b *Budget) { c.dec.Budget(b) }

// Close returns what the connection holds of its budget.
func (c *Conn) Close() { c.dec.Close() }

// Ready reads and returns the ready frame; it must be the first frame.
func (c *Conn) Ready() (*Ready, error) {
	if c.ready != nil {
		return c.ready, nil
	}
	f, err := c.read()
	if err != nil {
		return nil, err
	}
	r, ok := f.(*Ready)
	if !ok {
		return nil, c.fail("first frame is %s, not ready", f.frameType())
	}
	c.ready = r
	return r, nil
}

// Begin records that the supervisor sent execute id: frames of that exec
// are expected until its result.
func (c *Conn) Begin(id string) error {
	if c.err != nil {
		return c.err
	}
	if c.ready == nil || c.current != "" {
		return errdefs.New(errdefs.ErrInternal, fmt.Sprintf("kernel exec %q begun before ready or while %q runs", id, c.current), "", nil)
	}
	if err := CheckID(id); err != nil {
		return err
	}
	c.current = id
	return nil
}

// Next returns the running exec's next frame (*Stream, *Display or
// *Result). After a *Result the exec is over and Begin must come first.
// A frame read while no exec runs is a protocol error, found at the next
// Next call after Begin at the latest.
func (c *Conn) Next() (Frame, error) {
	if c.err != nil {
		return nil, c.err
	}
	if c.current == "" {
		return nil, errdefs.New(errdefs.ErrInternal, "kernel frame read with no exec running", "", nil)
	}
	f, err := c.read()
	if err != nil {
		return nil, err
	}
	var id string
	switch v := f.(type) {
	case *Stream:
		id = v.ID
	case *Display:
		id = v.ID
	case *Result:
		id = v.ID
	default:
		return nil, c.fail("%s frame inside exec %q", f.frameType(), c.current)
	}
	if id != c.current {
		return nil, c.fail("frame for exec %.64q inside exec %q", id, c.current)
	}
	if _, done := f.(*Result); done {
		c.current = ""
	}
	return f, nil
}

func (c *Conn) read() (Frame, error) {
	f, err := c.dec.Next()
	if err != nil {
		c.err = err
		return nil, err
	}
	return f, nil
}

func (c *Conn) fail(format string, args ...any) error {
	c.err = protoErr(errdefs.ErrInvalid, format, args...)
	return c.err
}
