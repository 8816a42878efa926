package supervisor

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/launch"
)

// streamWriteTimeout bounds one event's write: a client that stops reading
// must not hold the exec's output (and through it the kernel's channel)
// longer than this; it counts as gone.
const streamWriteTimeout = 10 * time.Second

// event is one line of a streamed exec: stdout, stderr, display, result,
// or error (an API error after the stream had started).
type event struct {
	Type    string
	Data    string
	Display *api.Display
	Result  *launch.ExecResult
	Error   *APIError
}

// line renders the event as one NDJSON line: the type first, then the
// payload's fields (a display's, the whole result's, an error body's).
func (e event) line() []byte {
	var body any
	switch {
	case e.Display != nil:
		body = e.Display
	case e.Result != nil:
		body = e.Result
	case e.Error != nil:
		body = api.ErrorBody{Error: api.ErrorDetail{Code: e.Error.Code, Message: e.Error.Message}}
	default:
		body = struct {
			Data string `json:"data"`
		}{e.Data}
	}
	inner, err := json.Marshal(body)
	if err != nil || len(inner) < 2 {
		inner = []byte("{}")
	}
	typ, _ := json.Marshal(e.Type)
	out := append([]byte(`{"type":`), typ...)
	if len(inner) > 2 {
		out = append(append(out, ','), inner[1:]...)
	} else {
		out = append(out, '}')
	}
	return append(out, '\n')
}

// wantsStream reports whether the request asked for an NDJSON stream.
func wantsStream(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
			if strings.EqualFold(strings.TrimSpace(mt), api.NDJSONType) {
				return true
			}
		}
	}
	return false
}

// streamer writes an exec's events as they happen, flushing each, so the
// first byte is not delayed. The 200 and its headers go out with the first
// event; until then a refusal can still be an ordinary error answer.
type streamer struct {
	w  http.ResponseWriter
	rc *http.ResponseController

	mu      sync.Mutex
	started bool
	gone    bool
}

func newStreamer(w http.ResponseWriter) *streamer {
	return &streamer{w: w, rc: http.NewResponseController(w)}
}

// emit writes one event; false once the client is gone.
func (s *streamer) emit(e event) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone {
		return false
	}
	if !s.started {
		s.started = true
		s.w.Header().Set("Content-Type", api.NDJSONType)
		s.w.Header().Set("X-Content-Type-Options", "nosniff")
		s.w.WriteHeader(http.StatusOK)
	}
	_ = s.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	if _, err := s.w.Write(e.line()); err != nil {
		s.gone = true
		return false
	}
	if err := s.rc.Flush(); err != nil {
		s.gone = true
		return false
	}
	return true
}

// hasStarted reports whether the 200 went out.
func (s *streamer) hasStarted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}
