package e2b

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/sandboxd/sandboxd/api"
)

// resultKey maps a sandboxd display MIME type to the key of an E2B result.
var resultKey = map[string]string{
	api.DisplayPNG:      "png",
	api.DisplayJPEG:     "jpeg",
	api.DisplaySVG:      "svg",
	api.DisplayHTML:     "html",
	api.DisplayMarkdown: "markdown",
	api.DisplayLatex:    "latex",
	api.DisplayJSON:     "json",
	api.DisplayPlotly:   "plotly",
	api.DisplayText:     "text",
}

// bundleOrder is the order in which the Python runner sends one object's
// representations (text/plain last); a display that does not come later
// in it than the previous one starts a new object.
var bundleOrder = []string{api.DisplayPNG, api.DisplayJPEG, api.DisplaySVG, api.DisplayHTML, api.DisplayMarkdown,
	api.DisplayLatex, api.DisplayJSON, api.DisplayPlotly, api.DisplayText}

// apiEvent is one line of sandboxd's NDJSON exec stream.
type apiEvent struct {
	Type       string           `json:"type"`
	Data       json.RawMessage  `json:"data"`
	DataBase64 string           `json:"data_base64"`
	MIME       string           `json:"mime"`
	Exception  *api.Exception   `json:"exception"`
	Kernel     *api.KernelInfo  `json:"kernel"`
	TimedOut   bool             `json:"timed_out"`
	Signal     *string          `json:"signal"`
	Error      *api.ErrorDetail `json:"error"`
}

// translator turns sandboxd's exec stream into the code interpreter's:
// stdout/stderr lines, results (the displays of one object grouped into
// one result; the last one, when it has text, the main result), the error,
// and the execution count.
type translator struct {
	emit    func([]byte)
	pending map[string]any    // the displays of the current object
	last    int               // bundleOrder index of its last display
	partial map[string]string // by stream: output after its last newline
	ended   bool
}

// maxPartialLine is how much of a line without a newline is held back
// before it is sent as it is.
const maxPartialLine = 64 << 10

func newTranslator(emit func([]byte)) *translator {
	return &translator{emit: emit, partial: map[string]string{}}
}

// output sends a stream's complete lines, one message each, as the code
// interpreter does (a print may reach sandboxd in pieces), and holds the
// rest until its newline or the next event of another kind.
func (t *translator) output(stream, data string) {
	data = t.partial[stream] + data
	for {
		i := strings.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		t.send(map[string]any{"type": stream, "text": data[:i+1]})
		data = data[i+1:]
	}
	t.partial[stream] = data
	if len(data) > maxPartialLine {
		t.flushOutput()
	}
}

// flushOutput sends what output holds back.
func (t *translator) flushOutput() {
	for _, stream := range []string{"stdout", "stderr"} {
		if d := t.partial[stream]; d != "" {
			t.send(map[string]any{"type": stream, "text": d})
			t.partial[stream] = ""
		}
	}
}

func (t *translator) send(v map[string]any) {
	b, err := json.Marshal(v)
	if err != nil {
		return // every value is plain JSON; only a bug gets here
	}
	t.emit(append(b, '\n'))
}

// flush sends the pending object as a result.
func (t *translator) flush(main bool) {
	if t.pending == nil {
		return
	}
	r := t.pending
	r["type"] = "result"
	r["is_main_result"] = main && r["text"] != nil
	t.pending = nil
	t.send(r)
}

// line translates one line of the API's stream.
func (t *translator) line(b []byte) {
	var ev apiEvent
	if err := json.Unmarshal(b, &ev); err != nil {
		t.fail("StreamError", fmt.Sprintf("bad line in the exec stream: %v", err))
		return
	}
	switch ev.Type {
	case "stdout", "stderr":
		var text string
		_ = json.Unmarshal(ev.Data, &text)
		t.flush(false)
		t.output(ev.Type, text)
	case "display":
		t.flushOutput()
		t.display(ev)
	case "result":
		t.flushOutput()
		t.result(ev)
	case "error":
		t.flushOutput()
		t.flush(false)
		if ev.Error != nil {
			t.fail(string(ev.Error.Code), ev.Error.Message)
		}
	}
}

func (t *translator) display(ev apiEvent) {
	key, ok := resultKey[ev.MIME]
	if !ok {
		return // a type this mapping does not know: left out
	}
	idx := slices.Index(bundleOrder, ev.MIME)
	if t.pending != nil && (idx <= t.last || t.pending[key] != nil) {
		t.flush(false)
	}
	if t.pending == nil {
		t.pending = map[string]any{}
	}
	t.last = idx
	switch {
	case ev.DataBase64 != "":
		t.pending[key] = ev.DataBase64
	case key == "json" || key == "plotly":
		t.pending[key] = ev.Data
	default:
		var s string
		_ = json.Unmarshal(ev.Data, &s)
		t.pending[key] = s
	}
}

func (t *translator) result(ev apiEvent) {
	t.flush(true)
	switch {
	case ev.Exception != nil:
		t.send(map[string]any{"type": "error", "name": ev.Exception.Type, "value": ev.Exception.Message,
			"traceback": ev.Exception.Traceback})
	case ev.TimedOut:
		t.fail("TimeoutError", "the execution ran past its timeout and was killed")
	case ev.Signal != nil:
		t.fail("KilledError", "the execution was killed by "+*ev.Signal)
	}
	if ev.Kernel != nil {
		t.send(map[string]any{"type": "number_of_executions", "execution_count": ev.Kernel.ExecutionCount})
	}
	t.end()
}

// fail sends an error that is not the code's own exception.
func (t *translator) fail(name, value string) {
	t.send(map[string]any{"type": "error", "name": name, "value": value, "traceback": ""})
}

// end closes the stream as the code interpreter does.
func (t *translator) end() {
	if t.ended {
		return
	}
	t.flushOutput()
	t.flush(false)
	t.ended = true
	t.send(map[string]any{"type": "end_of_execution"})
}
