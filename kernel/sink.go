package kernel

import (
	"encoding/base64"
	"sync"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/kernel/protocol"
	"github.com/sandboxd/sandboxd/launch"
	"github.com/sandboxd/sandboxd/workspace"
)

// Output is one piece of an exec's output as it happens, for a streamed
// answer: a stdout or stderr chunk (Type "stdout"/"stderr", Data) or a
// display (Type "display", Display).
type Output struct {
	Type    string
	Data    string
	Display *api.Display
}

// sink collects one exec's frames, on the channel's driver goroutine:
// protocol.Conn has checked that each belongs to this exec.
type sink struct {
	id             string
	stdout, stderr *launch.Capture
	outLimit       int64
	limits         workspace.ArtifactLimits
	// emit streams output; it runs on the driver goroutine, so it must
	// not block for long (the streamer's write deadline).
	emit func(Output) bool

	mu        sync.Mutex
	displays  []api.Display
	dispBytes int64
	dispTrunc bool
	result    chan *protocol.Result // buffered 1
	failed    chan error            // buffered 1
}

func newSink(id string, outLimit int64, limits workspace.ArtifactLimits, emit func(Output) bool) *sink {
	return &sink{id: id, stdout: launch.NewCapture(outLimit), stderr: launch.NewCapture(outLimit), outLimit: outLimit,
		limits: limits, emit: emit,
		result: make(chan *protocol.Result, 1), failed: make(chan error, 1)}
}

func (s *sink) fail(err error) {
	select {
	case s.failed <- err:
	default:
	}
}

// record keeps a stream or display frame of the exec.
func (s *sink) record(f protocol.Frame) {
	switch f := f.(type) {
	case *protocol.Stream:
		s.stream(f)
	case *protocol.Display:
		s.display(f)
	}
}

// stream captures output (head and tail within the output limit) and
// streams what falls within the limit; the cut is the result's.
func (s *sink) stream(f *protocol.Stream) {
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
	s.emit(Output{Type: f.Name, Data: data})
}

// display keeps a display within the artifact limits (count, per-display
// and total size); one beyond them is dropped and flagged, never a crash.
func (s *sink) display(f *protocol.Display) {
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
		s.emit(Output{Type: "display", Display: &d})
	}
}
