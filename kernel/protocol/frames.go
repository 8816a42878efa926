package protocol

import (
	"encoding/json"
)

// MaxFrameBytes bounds one frame line (without its newline). 32 MiB holds
// a 20 MiB PNG (the per-file artifact limit) base64-encoded (4/3, 26.7 MiB)
// plus the JSON around it; the runners never write a longer frame.
const MaxFrameBytes = 32 << 20

// Field bounds the decoder enforces besides the frame limit.
const (
	MaxIDBytes       = 128 // an exec id: the supervisor's ids are far shorter
	MaxVersionBytes  = 256 // the ready frame's interpreter version
	MaxTypeBytes     = 256 // an exception's type name
	MaxExecutionCnt  = 1<<53 - 1
	maxExitCode      = 255
	maxEntrypointLen = 64
)

// Frame types (kernel to host).
const (
	TypeReady   = "ready"
	TypeStream  = "stream"
	TypeDisplay = "display"
	TypeResult  = "result"
)

// Request types (host to kernel).
const (
	TypeExecute   = "execute"
	TypeInterrupt = "interrupt"
	TypeShutdown  = "shutdown"
)

// Languages a ready frame may name.
const (
	LanguagePython     = "python"
	LanguageJavaScript = "javascript"
)

// Stream names.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// Display MIME types and how each carries its data.
const (
	MIMEPNG      = "image/png"                      // data_base64
	MIMEJPEG     = "image/jpeg"                     // data_base64
	MIMESVG      = "image/svg+xml"                  // data: string
	MIMEHTML     = "text/html"                      // data: string
	MIMEMarkdown = "text/markdown"                  // data: string
	MIMELatex    = "text/latex"                     // data: string
	MIMEText     = "text/plain"                     // data: string
	MIMEJSON     = "application/json"               // data: object
	MIMEPlotly   = "application/vnd.plotly.v1+json" // data: object (a plotly figure)
)

// Frame is one decoded, validated frame: *Ready, *Stream, *Display or
// *Result.
type Frame interface{ frameType() string }

// Ready is sent once, first, when the runner is ready for requests.
type Ready struct {
	Language string `json:"language"`
	Version  string `json:"version"`
}

// Stream is a chunk of the exec's stdout or stderr, decoded as UTF-8 by
// the runner (undecodable bytes arrive as U+FFFD).
type Stream struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Data string `json:"data"`
}

// Display is one rich output. Exactly one of Data (a JSON string for the
// text MIME types and image/svg+xml, a JSON object for application/json
// and application/vnd.plotly.v1+json) and DataBase64 (image/png and
// image/jpeg: standard base64, padded) is set.
type Display struct {
	ID         string          `json:"id"`
	MIME       string          `json:"mime"`
	Data       json.RawMessage `json:"data,omitempty"`
	DataBase64 string          `json:"data_base64,omitempty"`
}

// Result is the last frame of every execute.
type Result struct {
	ID             string          `json:"id"`
	ExitCode       int             `json:"exit_code"`
	ExecutionCount int64           `json:"execution_count"`
	ReturnValue    json.RawMessage `json:"return_value,omitempty"`
	Exception      *Exception      `json:"exception,omitempty"`
}

// Exception describes an uncaught exception (Python) or error (JavaScript).
type Exception struct {
	Type      string `json:"type"`
	Message   string `json:"message"`
	Traceback string `json:"traceback"`
}

func (*Ready) frameType() string   { return TypeReady }
func (*Stream) frameType() string  { return TypeStream }
func (*Display) frameType() string { return TypeDisplay }
func (*Result) frameType() string  { return TypeResult }

// Text returns a text display's string (text/*, image/svg+xml); "" for
// the others.
func (d *Display) Text() string {
	var s string
	if d.DataBase64 != "" || json.Unmarshal(d.Data, &s) != nil {
		return ""
	}
	return s
}
