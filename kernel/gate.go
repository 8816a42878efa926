package kernel

import "io"

// gate sits between the channel's pipe and protocol.Conn so that the
// driver can watch the channel while no exec runs without reading a frame:
// a pump goroutine reads the pipe one chunk at a time, and the chunk goes
// either to Conn (through Read, during an exec) or to the driver's idle
// wait, where any byte is a violation. The pump reuses one buffer, which
// the consumer frees once it has copied all of it.
type gate struct {
	r      io.Reader
	chunks chan chunk
	free   chan struct{}
	quit   chan struct{}

	// The consumer's side, touched only by the driver goroutine.
	cur  []byte
	err  error
	held bool // cur is the pump's buffer: free it once copied
}

type chunk struct {
	b   []byte
	err error
}

// gateChunk is the pump's read size.
const gateChunk = 64 << 10

func newGate(r io.Reader) *gate {
	g := &gate{r: r, chunks: make(chan chunk), free: make(chan struct{}), quit: make(chan struct{})}
	go g.pump()
	return g
}

func (g *gate) pump() {
	buf := make([]byte, gateChunk)
	for {
		n, err := g.r.Read(buf)
		select {
		case g.chunks <- chunk{buf[:n], err}:
		case <-g.quit:
			return
		}
		if err != nil {
			return
		}
		select {
		case <-g.free:
		case <-g.quit:
			return
		}
	}
}

// take makes c the consumer's current chunk.
func (g *gate) take(c chunk) {
	g.cur, g.err, g.held = c.b, c.err, c.err == nil
}

// Read is Conn's: it copies from the current chunk, then waits for the
// next one.
func (g *gate) Read(p []byte) (int, error) {
	for len(g.cur) == 0 {
		if g.err != nil {
			return 0, g.err
		}
		g.take(<-g.chunks)
		g.release()
	}
	n := copy(p, g.cur)
	g.cur = g.cur[n:]
	g.release()
	return n, nil
}

// release hands the pump its buffer back once all of it is copied: the
// pump reads on while the driver waits between execs.
func (g *gate) release() {
	if g.held && len(g.cur) == 0 {
		g.held = false
		g.free <- struct{}{}
	}
}

// pending reports whether bytes Conn has not read are waiting.
func (g *gate) pending() bool { return len(g.cur) > 0 }

// close stops the pump; the launch drains what is left of the pipe.
func (g *gate) close() { close(g.quit) }
