package launch

import (
	"os"
	"sync"
)

// helperPipes are the helper's stdio and the fds of the nsinit/spec
// contract: the spec (fd 3), step reports (fd 4), bwrap's JSON status
// (fd 5) and the release pipe (fd 6). Each pipe has the helper's end and
// ours.
type helperPipes struct {
	// The helper's ends, closed here once it has started.
	specR, reportW, statusW, releaseR, stdinR, stdoutW, stderrW *os.File
	// Ours.
	specW, reportR, statusR, releaseW, stdinW, stdoutR, stderrR *os.File

	mu   sync.Mutex
	open []*os.File // every end not closed yet
}

// newPipes makes the seven pipes, or none.
func newPipes() (*helperPipes, error) {
	p := &helperPipes{}
	for _, ends := range [][2]**os.File{
		{&p.specR, &p.specW}, {&p.reportR, &p.reportW}, {&p.statusR, &p.statusW},
		{&p.releaseR, &p.releaseW}, {&p.stdinR, &p.stdinW}, {&p.stdoutR, &p.stdoutW},
		{&p.stderrR, &p.stderrW},
	} {
		r, w, err := os.Pipe() // O_CLOEXEC: no other launch's helper inherits them
		if err != nil {
			p.closeAll()
			return nil, err
		}
		*ends[0], *ends[1] = r, w
		p.open = append(p.open, r, w)
	}
	return p, nil
}

// extraFiles are the helper's fds 3, 4, 5 and 6, in that order.
func (p *helperPipes) extraFiles() []*os.File {
	return []*os.File{p.specR, p.reportW, p.statusW, p.releaseR}
}

// closeChildEnds closes the helper's ends once it holds its own copies, so
// that EOF on a read end of ours means the helper (and whatever inherited
// the fd) is done.
func (p *helperPipes) closeChildEnds() {
	for _, f := range []*os.File{p.specR, p.reportW, p.statusW, p.releaseR, p.stdinR, p.stdoutW, p.stderrW} {
		p.close(f)
	}
}

// close closes f and forgets it, so closeAll never closes it again. The
// spec and stdin writers close their ends from their own goroutines.
func (p *helperPipes) close(f *os.File) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, o := range p.open {
		if o == f {
			p.open = append(p.open[:i], p.open[i+1:]...)
			_ = f.Close()
			return
		}
	}
}

// isOpen reports whether f is still open (tests).
func (p *helperPipes) isOpen(f *os.File) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, o := range p.open {
		if o == f {
			return true
		}
	}
	return false
}

// closeAll closes every end still open. It runs once the helper has been
// reaped: only then does the release pipe's write end go, so a hang-up on
// fd 6 tells the helper that the supervisor died.
func (p *helperPipes) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.open {
		_ = f.Close()
	}
	p.open = nil
}
