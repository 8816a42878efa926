package kernel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/kernel/protocol"
	"github.com/sandboxd/sandboxd/launch"
)

// Kernel timings.
const (
	// readyTimeout bounds a runner's start (sandbox, interpreter, the
	// runner's imports) until its ready frame.
	readyTimeout = 30 * time.Second
	// interruptGrace is how long an interrupted exec may take to send its
	// result (its traceback) before the kernel is killed.
	interruptGrace = time.Second
	// onceExitGrace is how long a run-once runner may take to exit after
	// its result.
	onceExitGrace = 5 * time.Second
)

// Kernel is one running runner.
type Kernel struct {
	id        string // the sandbox's launch id
	language  string
	sb        *launch.Sandbox
	enc       *protocol.Encoder
	startedAt time.Time
	ready     chan error
	begin     chan *sink       // execute hands the driver its exec
	driven    chan struct{}    // closed once the driver (read) has returned
	egress    Proxy            // network "egress": the kernel's proxy; nil otherwise
	budget    *protocol.Budget // the supervisor's budget for frames in flight; nil: none
	// environment is what the kernel was launched in ("": none); an exec
	// in another cannot run in it.
	environment string

	mu        sync.Mutex
	kill      func() // stops the sandbox without waiting (start sets it)
	broken    error  // the first protocol error or the channel's end
	count     int64
	restarted bool // started because an earlier kernel of the session ended
	reported  bool // restarted has been reported by an exec
}

func newKernel(language, environment string) *Kernel {
	return &Kernel{language: language, environment: environment, ready: make(chan error, 1),
		begin: make(chan *sink), driven: make(chan struct{}), startedAt: time.Now().UTC()}
}

// read is the channel's driver (the sandbox's stdout func): it reads the
// ready frame, then serves one exec at a time as execute hands them over,
// until the channel ends or breaks. It returns at the first error; the
// launch drains the rest.
func (k *Kernel) read(r io.Reader) {
	defer close(k.driven)
	g := newGate(r)
	defer g.close()
	conn := protocol.NewConn(g)
	if k.budget != nil {
		conn.Budget(k.budget)
	}
	defer conn.Close()
	_, err := conn.Ready()
	k.ready <- err
	for err == nil {
		var s *sink
		if s, err = k.idle(g); err == nil {
			err = serve(conn, s)
		}
	}
	if errors.Is(err, io.EOF) {
		err = io.EOF
	}
	k.mu.Lock()
	k.broken = err
	kill := k.kill
	k.mu.Unlock()
	// A kernel that broke the protocol is killed at once, not when its
	// session next uses it: until then it would keep its CPU, memory and
	// egress proxy (which ends with its sandbox).
	if !errors.Is(err, io.EOF) && kill != nil {
		kill()
	}
}

// idle waits for the next exec. The kernel speaks only when spoken to: a
// byte that arrives between execs breaks the channel at once, as its end
// does.
func (k *Kernel) idle(g *gate) (*sink, error) {
	for {
		if g.pending() {
			return nil, errBetweenExecs
		}
		select {
		case s := <-k.begin:
			return s, nil
		case c := <-g.chunks:
			g.take(c)
			g.release() // an empty read; a full one is pending
			if len(c.b) == 0 && c.err != nil {
				return nil, c.err
			}
		}
	}
}

var errBetweenExecs = fmt.Errorf("%w: the kernel wrote while no exec was running", protocol.ErrProtocol)

// serve reads one exec's frames into s until its result; an error is the
// exec's too.
func serve(conn *protocol.Conn, s *sink) error {
	if err := conn.Begin(s.id); err != nil {
		s.fail(err)
		return err
	}
	for {
		f, err := conn.Next()
		if err != nil {
			s.fail(err)
			return err
		}
		if r, done := f.(*protocol.Result); done {
			s.result <- r
			return nil
		}
		s.record(f)
	}
}

// setKill sets how the kernel is killed when it breaks the protocol.
func (k *Kernel) setKill(kill func()) {
	k.mu.Lock()
	k.kill = kill
	k.mu.Unlock()
}

// brokenErr is the channel's first error (nil: none yet).
func (k *Kernel) brokenErr() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.broken
}

// Alive reports whether the kernel can take an exec.
func (k *Kernel) Alive() bool {
	select {
	case <-k.sb.Done():
		return false
	default:
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.broken == nil
}

// Stop kills the kernel's sandbox and waits until it is reaped.
func (k *Kernel) Stop() { k.sb.Stop() }

// ID is the kernel's launch id.
func (k *Kernel) ID() string { return k.id }

// Language is the kernel's runtime.
func (k *Kernel) Language() string { return k.language }

// Environment is the environment the kernel was launched in ("": none).
func (k *Kernel) Environment() string { return k.environment }

// Info is the API's kernel object.
func (k *Kernel) Info() api.Kernel {
	k.mu.Lock()
	defer k.mu.Unlock()
	return api.Kernel{ID: k.id, Language: k.language, ExecutionCount: k.count, StartedAt: k.startedAt,
		MemoryBytes: k.sb.MemoryBytes(), Restarted: k.restarted}
}

// outcome is how an exec in a kernel ended.
type outcome struct {
	result    *protocol.Result // nil: no result (killed, crashed, broken)
	timedOut  bool
	cancelled bool
	killed    bool // the supervisor killed the kernel
	broken    error
	exit      *launch.SandboxExit // the kernel's end, if it ended
	took      time.Duration
}

// execute runs one exec in k and waits for its result, its timeout, ctx
// or the kernel's end. A timed-out or cancelled exec is interrupted. A
// timed-out one's kernel is then killed after interruptGrace: its state is
// not trusted after an exec that overran (the next exec says restarted:
// true). A cancelled one (its client went away) keeps its kernel when the
// interrupt ended it within interruptGrace, as a notebook's interrupt
// does: the next exec finds the kernel and its state; else it is killed.
func (k *Kernel) execute(ctx context.Context, x protocol.Execute, timeout time.Duration, s *sink) outcome {
	start := time.Now()
	if err := k.handOver(s); err != nil {
		return outcome{broken: err, took: time.Since(start)}
	}
	var o outcome
	if err := k.enc.Execute(x); err != nil {
		o.broken = err
	} else {
		o = k.wait(ctx, x.ID, timeout, s)
	}
	if o.result != nil {
		k.mu.Lock()
		k.count = o.result.ExecutionCount
		k.mu.Unlock()
	}
	if o.broken != nil && !errors.Is(o.broken, io.EOF) || o.timedOut || o.cancelled && o.result == nil {
		o.killed = o.exit == nil
		ex := k.sb.Stop()
		o.exit = &ex
	}
	o.took = time.Since(start)
	return o
}

// handOver gives the driver s, the running exec; an error says the channel
// has already ended or broken.
func (k *Kernel) handOver(s *sink) error {
	k.mu.Lock()
	err := k.broken
	k.mu.Unlock()
	if err != nil {
		return err
	}
	select {
	case k.begin <- s:
		return nil
	case <-k.driven:
	case <-k.sb.Done():
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.broken == nil {
		return io.EOF
	}
	return k.broken
}

// wait is execute's wait for the result.
func (k *Kernel) wait(ctx context.Context, id string, timeout time.Duration, s *sink) outcome {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var o outcome
	select {
	case o.result = <-s.result:
		return o
	case o.broken = <-s.failed:
	case <-k.sb.Done():
	case <-timer.C:
		o.timedOut = true
	case <-ctx.Done():
		o.cancelled = true
	}
	if o.timedOut || o.cancelled {
		// The runner turns this into a SIGINT; its result (the
		// KeyboardInterrupt's traceback) is kept if it comes in time.
		_ = k.enc.Interrupt(id)
		grace := time.NewTimer(interruptGrace)
		defer grace.Stop()
		select {
		case o.result = <-s.result:
		case o.broken = <-s.failed:
		case <-k.sb.Done():
		case <-grace.C:
		}
		return o
	}
	// The channel ended or broke: a result may still be queued (the
	// runner wrote it, then exited).
	select {
	case o.result = <-s.result:
		o.broken = nil
	default:
	}
	if o.broken == nil || errors.Is(o.broken, io.EOF) {
		ex := k.sb.Exit()
		o.exit = &ex
		o.broken = nil
	}
	return o
}

// startError is the launch error of a kernel that did not get ready.
func startError(k *Kernel, err error) error {
	ex := k.sb.Stop()
	if ex.Err != nil {
		return ex.Err
	}
	msg := fmt.Sprintf("the %s kernel did not start: %v", k.language, err)
	if ex.OOMKilled {
		msg += " (OOM-killed: the memory limit is too small for the interpreter)"
	}
	if ex.Stderr != "" {
		msg += "; its stderr: " + truncateText(ex.Stderr, 500)
	}
	return errdefs.New(errdefs.ErrUnavailable, msg, "check that the runtime runs in the sandbox (sandboxctl doctor)", nil)
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
