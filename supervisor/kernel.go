package supervisor

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/kernel/protocol"
	"github.com/sandboxd/sandboxd/launch"
	"github.com/sandboxd/sandboxd/workspace"
)

// A kernel is a runner (package kernel/runners) running as the payload of a
// long-lived sandbox (launch.Sandbox), driven over the kernel channel. The
// channel is untrusted input (I12): every frame is decoded strictly and
// bounded by protocol.Decoder, the sequence is checked here (ready first;
// then frames only while an exec runs, carrying its id; result last), and
// the first violation kills the kernel. Output caps, display limits and
// timeouts are the supervisor's, as for a process exec.

// Kernel timings.
const (
	// kernelReadyTimeout bounds a runner's start (sandbox, interpreter,
	// the runner's imports) until its ready frame.
	kernelReadyTimeout = 30 * time.Second
	// interruptGrace is how long an interrupted exec may take to send its
	// result (its traceback) before the kernel is killed.
	interruptGrace = time.Second
	// onceExitGrace is how long a run-once runner may take to exit after
	// its result.
	onceExitGrace = 5 * time.Second
)

// errProtocol wraps every violation of the channel's sequence.
var errProtocol = protocol.ErrProtocol

// kernel is one running runner.
type kernel struct {
	id        string // the sandbox's launch id
	language  string
	sb        *launch.Sandbox
	enc       *protocol.Encoder
	startedAt time.Time
	restarted bool // started because an earlier kernel of the session ended
	ready     chan error
	egress    *kernelEgress // network "egress": the kernel's proxy; nil otherwise
	// environment is what the kernel was launched in ("": none); an exec
	// in it runs there (kernelEnvironmentConflict).
	environment string

	mu       sync.Mutex
	sink     *execSink // the running exec's, nil between execs
	broken   error     // the first protocol error or the channel's end
	count    int64
	reported bool // restarted has been reported by an exec
}

// newKernel returns a kernel for sb, not yet started: start reads its
// channel (the sandbox's stdout func).
func newKernel(language string) *kernel {
	return &kernel{language: language, ready: make(chan error, 1), startedAt: time.Now().UTC()}
}

// read decodes the channel until it ends or breaks (the sandbox's stdout
// func; it returns at the first error, the launch drains the rest).
func (k *kernel) read(r io.Reader) {
	dec := protocol.NewDecoder(r)
	f, err := dec.Next()
	if err == nil {
		if _, ok := f.(*protocol.Ready); !ok {
			err = fmt.Errorf("%w: the first frame is %T, not ready", errProtocol, f)
		}
	}
	k.ready <- err
	if err != nil {
		k.fail(err)
		return
	}
	for {
		f, err := dec.Next()
		if err == nil {
			err = k.deliver(f)
		}
		if err != nil {
			k.fail(err)
			return
		}
	}
}

// fail records why the channel ended and tells the running exec.
func (k *kernel) fail(err error) {
	if errors.Is(err, io.EOF) {
		err = io.EOF
	}
	k.mu.Lock()
	if k.broken == nil {
		k.broken = err
	}
	sink := k.sink
	k.mu.Unlock()
	if sink != nil {
		sink.fail(err)
	}
}

// deliver hands a frame to the running exec; a frame between execs breaks
// the sequence.
func (k *kernel) deliver(f protocol.Frame) error {
	k.mu.Lock()
	sink := k.sink
	k.mu.Unlock()
	if sink == nil {
		return fmt.Errorf("%w: a %T frame arrived while no exec was running", errProtocol, f)
	}
	return sink.frame(f)
}

// alive reports whether the kernel can take an exec.
func (k *kernel) alive() bool {
	select {
	case <-k.sb.Done():
		return false
	default:
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.broken == nil
}

// info is the API's kernel object.
func (k *kernel) info() api.Kernel {
	k.mu.Lock()
	defer k.mu.Unlock()
	return api.Kernel{ID: k.id, Language: k.language, ExecutionCount: k.count, StartedAt: k.startedAt,
		MemoryBytes: k.sb.MemoryBytes(), Restarted: k.restarted}
}

// execSink collects one exec's frames, on the channel's reader goroutine.
type execSink struct {
	id             string
	stdout, stderr *launch.Capture
	outLimit       int64
	limits         workspace.ArtifactLimits
	// emit streams an event; it runs on the channel's reader goroutine,
	// so it must not block for long (the streamer's write deadline).
	emit func(event) bool

	mu        sync.Mutex
	displays  []api.Display
	dispBytes int64
	dispTrunc bool
	done      bool
	result    chan *protocol.Result // buffered 1
	failed    chan error            // buffered 1
}

func newSink(id string, outLimit int64, limits workspace.ArtifactLimits, emit func(event) bool) *execSink {
	return &execSink{id: id, stdout: launch.NewCapture(outLimit), stderr: launch.NewCapture(outLimit), outLimit: outLimit,
		limits: limits, emit: emit,
		result: make(chan *protocol.Result, 1), failed: make(chan error, 1)}
}

func (s *execSink) fail(err error) {
	select {
	case s.failed <- err:
	default:
	}
}

// frame checks that f belongs to this exec and comes before its result,
// and records it.
func (s *execSink) frame(f protocol.Frame) error {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	if done {
		return fmt.Errorf("%w: a %T frame arrived after the exec's result", errProtocol, f)
	}
	switch f := f.(type) {
	case *protocol.Stream:
		if f.ID != s.id {
			return fmt.Errorf("%w: a stream frame of exec %q arrived during exec %q", errProtocol, f.ID, s.id)
		}
		s.stream(f)
	case *protocol.Display:
		if f.ID != s.id {
			return fmt.Errorf("%w: a display frame of exec %q arrived during exec %q", errProtocol, f.ID, s.id)
		}
		s.display(f)
	case *protocol.Result:
		if f.ID != s.id {
			return fmt.Errorf("%w: the result of exec %q arrived during exec %q", errProtocol, f.ID, s.id)
		}
		s.mu.Lock()
		s.done = true
		s.mu.Unlock()
		s.result <- f
	default:
		return fmt.Errorf("%w: a %T frame arrived during an exec", errProtocol, f)
	}
	return nil
}

// stream captures output (head and tail within the output limit) and
// streams what falls within the limit; the cut is the result's.
func (s *execSink) stream(f *protocol.Stream) {
	c := s.stdout
	if f.Name == protocol.StreamStderr {
		c = s.stderr
	}
	before := c.Total()
	_, _ = c.Write([]byte(f.Data))
	if s.emit == nil || before >= s.outLimit {
		return
	}
	data := f.Data
	if room := s.outLimit - before; int64(len(data)) > room {
		data = string([]byte(data)[:room])
	}
	s.emit(event{Type: f.Name, Data: data})
}

// display keeps a display within the artifact limits (count, per-display
// and total size); one beyond them is dropped and flagged, never a crash.
func (s *execSink) display(f *protocol.Display) {
	d := api.Display{MIME: f.MIME, Data: f.Data, DataBase64: f.DataBase64}
	size := int64(len(f.Data))
	if f.DataBase64 != "" {
		size = int64(base64.StdEncoding.DecodedLen(len(f.DataBase64)))
	}
	s.mu.Lock()
	l := s.limits
	keep := int64(len(s.displays)) < l.MaxFiles && size <= l.MaxFileBytes && s.dispBytes+size <= l.MaxTotalBytes
	if keep {
		s.displays = append(s.displays, d)
		s.dispBytes += size
	} else {
		s.dispTrunc = true
	}
	s.mu.Unlock()
	if keep && s.emit != nil {
		s.emit(event{Type: "display", Display: &d})
	}
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
// or the kernel's end. A timed-out or cancelled exec is interrupted, then
// the kernel is killed after interruptGrace: its state is not trusted
// after an exec that overran (the next exec says restarted: true).
func (k *kernel) execute(ctx context.Context, x protocol.Execute, timeout time.Duration, sink *execSink) outcome {
	start := time.Now()
	k.mu.Lock()
	if k.broken != nil {
		err := k.broken
		k.mu.Unlock()
		return outcome{broken: err, took: time.Since(start)}
	}
	k.sink = sink
	k.mu.Unlock()
	defer func() {
		k.mu.Lock()
		k.sink = nil
		k.mu.Unlock()
	}()
	var o outcome
	if err := k.enc.Execute(x); err != nil {
		o.broken = err
	} else {
		o = k.wait(ctx, x.ID, timeout, sink)
	}
	if o.result != nil {
		k.mu.Lock()
		k.count = o.result.ExecutionCount
		k.mu.Unlock()
	}
	if o.broken != nil && !errors.Is(o.broken, io.EOF) || o.timedOut || o.cancelled {
		o.killed = o.exit == nil
		ex := k.sb.Stop()
		o.exit = &ex
	}
	o.took = time.Since(start)
	return o
}

// wait is execute's wait for the result.
func (k *kernel) wait(ctx context.Context, id string, timeout time.Duration, sink *execSink) outcome {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var o outcome
	select {
	case o.result = <-sink.result:
		return o
	case o.broken = <-sink.failed:
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
		case o.result = <-sink.result:
		case o.broken = <-sink.failed:
		case <-k.sb.Done():
		case <-grace.C:
		}
		return o
	}
	// The channel ended or broke: a result may still be queued (the
	// runner wrote it, then exited).
	select {
	case o.result = <-sink.result:
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

// kernelStartError is the launch error of a kernel that did not get ready.
func kernelStartError(k *kernel, err error) error {
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
