package mcp

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/sandboxd/sandboxd/api"
)

// Backend is what the tools need of sandboxd; *client.Client is one.
type Backend interface {
	Exec(ctx context.Context, req api.ExecRequest) (*api.ExecResult, []byte, error)
	SessionExec(ctx context.Context, session string, req api.ExecRequest) (*api.ExecResult, []byte, error)
	CreateSession(ctx context.Context, ttl *int64, key string) (*api.Session, []byte, error)
	DeleteSession(ctx context.Context, id string) error
	ListFiles(ctx context.Context, id string) ([]api.FileInfo, []byte, error)
	PutFile(ctx context.Context, id, path string, body io.Reader, size int64) (*api.Uploaded, error)
	GetFile(ctx context.Context, id, path string, w io.Writer) (int64, error)
}

// maxDownload bounds a file download_file returns. It travels in one
// message, base64-encoded when binary (4/3 of its size), and that message
// must stay under maxAnswer.
const maxDownload = 6 << 20

type tool struct {
	Name        string         `json:"name"`
	Title       string         `json:"title,omitempty"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"inputSchema"`
	run         func(ctx context.Context, b Backend, args json.RawMessage) (*toolResult, error)
}

// content is one MCP content item: text, image, or an embedded resource.
type content struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	Data     string    `json:"data,omitempty"`
	MimeType string    `json:"mimeType,omitempty"`
	Resource *resource `json:"resource,omitempty"`
}

type resource struct {
	URI      string `json:"uri"`
	MimeType string `json:"mimeType,omitempty"`
	Text     string `json:"text,omitempty"`
	Blob     string `json:"blob,omitempty"`
}

type toolResult struct {
	Content           []content `json:"content"`
	StructuredContent any       `json:"structuredContent,omitempty"`
	IsError           bool      `json:"isError"`
}

func textResult(s string) *toolResult {
	return &toolResult{Content: []content{{Type: "text", Text: s}}}
}

// errorResult is a tool failure, reported to the model as a result (so it
// can read and react), not as a protocol error.
func errorResult(err error) *toolResult {
	return &toolResult{Content: []content{{Type: "text", Text: "error: " + err.Error()}}, IsError: true}
}

func obj(required []string, props map[string]any) map[string]any {
	m := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		m["required"] = required
	}
	return m
}

func str(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }

var sessionProp = str("a session id from create_session")

func toolList() []tool {
	return []tool{
		{Name: "run_code", Title: "Run code in a sandbox",
			Description: "Run Python, JavaScript or shell in an isolated sandbox (no network; CPU, memory and time limits) and return its exit status, stdout, stderr, " +
				"rich displays (charts come back as PNG images), an entrypoint's return value and an uncaught exception. " +
				"Without a session each run starts from an empty /workspace; with one, files and (python, javascript) interpreter state persist between runs. PNG files named in artifacts come back as images. " +
				"Python and JavaScript run in a kernel by default, also without a session (a throwaway kernel, so that plt.show() and display() come back); mode \"process\" runs a plain interpreter instead.",
			InputSchema: obj([]string{"language", "code"}, map[string]any{
				"language":   map[string]any{"type": "string", "enum": []string{"python", "javascript", "shell"}, "description": "the runtime"},
				"code":       str("the program's source"),
				"session":    sessionProp,
				"stdin":      str("standard input of the program"),
				"timeout_ms": map[string]any{"type": "integer", "minimum": 1, "description": "wall-clock limit in ms (default: the server's)"},
				"artifacts":  map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "glob patterns of files in /workspace to return after the run (e.g. \"*.png\")"},
				"entrypoint": str("python/javascript: a function the code defines, called after it runs with inputs; its JSON return value comes back"),
				"mode": map[string]any{"type": "string", "enum": []string{api.ModeKernel, api.ModeProcess},
					"description": "python/javascript: \"kernel\" (the default: the session's kernel, or without a session a throwaway one, with displays) or \"process\" (a plain interpreter: the code's own stdin/stdout)"},
				"inputs": map[string]any{"type": "object", "description": "the JSON object passed to entrypoint"},
			}),
			run: runCode},
		{Name: "create_session", Title: "Create a session",
			Description: "Create a session: a persistent /workspace that run_code, upload_file, download_file and list_files can use until it is deleted or idles out.",
			InputSchema: obj(nil, map[string]any{
				"ttl_seconds": map[string]any{"type": "integer", "minimum": 1, "description": "idle time-to-live in seconds (default: the server's)"},
			}),
			run: createSession},
		{Name: "upload_file", Title: "Upload a file",
			Description: "Write a file into a session's /workspace. Give content as text, or content_base64 for binary data.",
			InputSchema: obj([]string{"session", "path"}, map[string]any{
				"session":        sessionProp,
				"path":           str("path relative to /workspace, e.g. data/input.csv"),
				"content":        str("the file's content as UTF-8 text"),
				"content_base64": str("the file's content, base64-encoded (instead of content)"),
			}),
			run: uploadFile},
		{Name: "download_file", Title: "Download a file",
			Description: "Read a file from a session's /workspace (at most 6 MiB, so that the answer fits in one MCP message): text as text, PNG as an image, anything else as a base64 resource. For a larger file, have run_code split or summarise it first.",
			InputSchema: obj([]string{"session", "path"}, map[string]any{
				"session": sessionProp,
				"path":    str("path relative to /workspace"),
			}),
			run: downloadFile},
		{Name: "list_files", Title: "List files",
			Description: "List the files of a session's /workspace with their sizes.",
			InputSchema: obj([]string{"session"}, map[string]any{"session": sessionProp}),
			run:         listFiles},
		{Name: "delete_session", Title: "Delete a session",
			Description: "Delete a session and its /workspace.",
			InputSchema: obj([]string{"session"}, map[string]any{"session": sessionProp}),
			run:         deleteSession},
	}
}

func toolByName(name string) (tool, bool) {
	for _, t := range toolList() {
		if t.Name == name {
			return t, true
		}
	}
	return tool{}, false
}

// decodeArgs decodes a tool's arguments strictly: an unknown argument is a
// mistake the model should hear about.
func decodeArgs(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid arguments: %w", err)
	}
	return nil
}

func require(fields map[string]string) error {
	for k, v := range fields {
		if v == "" {
			return fmt.Errorf("invalid arguments: %s is required", k)
		}
	}
	return nil
}

func runCode(ctx context.Context, b Backend, raw json.RawMessage) (*toolResult, error) {
	var a struct {
		Language   string          `json:"language"`
		Code       string          `json:"code"`
		Session    string          `json:"session"`
		Stdin      string          `json:"stdin"`
		TimeoutMS  *int64          `json:"timeout_ms"`
		Artifacts  []string        `json:"artifacts"`
		Entrypoint string          `json:"entrypoint"`
		Inputs     json.RawMessage `json:"inputs"`
		Mode       string          `json:"mode"`
	}
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	if err := require(map[string]string{"language": a.Language, "code": a.Code}); err != nil {
		return nil, err
	}
	req := api.ExecRequest{Language: a.Language, Code: a.Code, Stdin: a.Stdin, TimeoutMS: a.TimeoutMS, Artifacts: a.Artifacts,
		Entrypoint: a.Entrypoint, Inputs: a.Inputs, Mode: runCodeMode(a.Mode, a.Language, a.Session)}
	var res *api.ExecResult
	var err error
	if a.Session != "" {
		res, _, err = b.SessionExec(ctx, a.Session, req)
	} else {
		res, _, err = b.Exec(ctx, req)
	}
	if err != nil {
		return nil, err
	}
	return execResult(res), nil
}

// runCodeMode is run_code's mode: the one asked for, else kernel for
// python and javascript (without a session too: a model's chart comes
// back as a display only from a kernel), else the server's default.
func runCodeMode(mode, language, session string) string {
	if mode != "" || session != "" {
		return mode
	}
	if language == api.LanguagePython || language == api.LanguageJavaScript {
		return api.ModeKernel
	}
	return ""
}

// execResult renders a result for a model: a status line, the outputs,
// PNG artifacts as images and other artifacts as a listing; the whole
// result (without artifact bytes) as structuredContent.
func execResult(r *api.ExecResult) *toolResult {
	var sb strings.Builder
	switch {
	case r.TimedOut:
		sb.WriteString("status: timed out")
	case r.OOMKilled:
		sb.WriteString("status: killed: out of memory")
	case r.Signal != nil:
		fmt.Fprintf(&sb, "status: killed by %s", *r.Signal)
	case r.ExitCode != nil:
		fmt.Fprintf(&sb, "status: exit code %d", *r.ExitCode)
	}
	if r.QuotaExceeded {
		sb.WriteString(" (workspace quota exceeded)")
	}
	fmt.Fprintf(&sb, "\n--- stdout ---\n%s", r.Stdout)
	if r.StdoutTruncated {
		sb.WriteString("\n[stdout truncated]")
	}
	fmt.Fprintf(&sb, "\n--- stderr ---\n%s", r.Stderr)
	if r.StderrTruncated {
		sb.WriteString("\n[stderr truncated]")
	}
	if len(r.ReturnValue) > 0 {
		fmt.Fprintf(&sb, "\n--- return value ---\n%s", r.ReturnValue)
	}
	if e := r.Exception; e != nil {
		fmt.Fprintf(&sb, "\n--- exception ---\n%s: %s\n%s", e.Type, e.Message, e.Traceback)
	}
	out := &toolResult{Content: []content{{Type: "text", Text: sb.String()}}}
	structured := *r
	structured.Displays = nil
	for _, d := range r.Displays {
		out.Content = append(out.Content, displayContent(d))
		structured.Displays = append(structured.Displays, api.Display{MIME: d.MIME})
	}
	structured.Artifacts = nil
	for _, art := range r.Artifacts {
		if strings.HasSuffix(strings.ToLower(art.Path), ".png") && art.ContentBase64 != "" {
			out.Content = append(out.Content, content{Type: "image", Data: art.ContentBase64, MimeType: "image/png"})
		} else {
			out.Content = append(out.Content, content{Type: "text", Text: fmt.Sprintf("artifact %s (%d bytes, sha256 %s)", art.Path, art.Size, art.SHA256)})
		}
		structured.Artifacts = append(structured.Artifacts, api.Artifact{Path: art.Path, Size: art.Size, SHA256: art.SHA256})
	}
	out.StructuredContent = structured
	return out
}

// displayContent is a rich output as MCP content: a PNG or JPEG as an image, any
// other type as text (a JSON string's value, or the JSON itself).
func displayContent(d api.Display) content {
	if (d.MIME == api.DisplayPNG || d.MIME == api.DisplayJPEG) && d.DataBase64 != "" {
		return content{Type: "image", Data: d.DataBase64, MimeType: d.MIME}
	}
	text := ""
	var str string
	switch {
	case len(d.Data) > 0 && json.Unmarshal(d.Data, &str) == nil:
		text = str
	case len(d.Data) > 0:
		text = string(d.Data)
	case d.DataBase64 != "":
		if b, err := base64.StdEncoding.DecodeString(d.DataBase64); err == nil && utf8.Valid(b) {
			text = string(b)
		} else {
			text = fmt.Sprintf("(%d bytes of base64 data)", len(d.DataBase64))
		}
	}
	return content{Type: "text", Text: fmt.Sprintf("display (%s):\n%s", d.MIME, text)}
}

func createSession(ctx context.Context, b Backend, raw json.RawMessage) (*toolResult, error) {
	var a struct {
		TTLSeconds *int64 `json:"ttl_seconds"`
	}
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	s, _, err := b.CreateSession(ctx, a.TTLSeconds, "")
	if err != nil {
		return nil, err
	}
	r := textResult(fmt.Sprintf("session %s created; it expires after %d s idle (at %s)", s.ID, s.TTLSeconds, s.ExpiresAt.Format("2006-01-02T15:04:05Z07:00")))
	r.StructuredContent = s
	return r, nil
}

func uploadFile(ctx context.Context, b Backend, raw json.RawMessage) (*toolResult, error) {
	var a struct {
		Session       string  `json:"session"`
		Path          string  `json:"path"`
		Content       *string `json:"content"`
		ContentBase64 *string `json:"content_base64"`
	}
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	if err := require(map[string]string{"session": a.Session, "path": a.Path}); err != nil {
		return nil, err
	}
	var data []byte
	switch {
	case (a.Content == nil) == (a.ContentBase64 == nil):
		return nil, errors.New("invalid arguments: give exactly one of content and content_base64")
	case a.Content != nil:
		data = []byte(*a.Content)
	default:
		d, err := base64.StdEncoding.DecodeString(*a.ContentBase64)
		if err != nil {
			return nil, fmt.Errorf("invalid arguments: content_base64: %w", err)
		}
		data = d
	}
	u, err := b.PutFile(ctx, a.Session, a.Path, bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, err
	}
	r := textResult(fmt.Sprintf("wrote %s (%d bytes, sha256 %s)", u.Path, u.Size, u.SHA256))
	r.StructuredContent = u
	return r, nil
}

func downloadFile(ctx context.Context, b Backend, raw json.RawMessage) (*toolResult, error) {
	var a struct {
		Session string `json:"session"`
		Path    string `json:"path"`
	}
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	if err := require(map[string]string{"session": a.Session, "path": a.Path}); err != nil {
		return nil, err
	}
	var buf limitedBuffer
	buf.max = maxDownload
	if _, err := b.GetFile(ctx, a.Session, a.Path, &buf); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	mime := http.DetectContentType(data)
	uri := "sandboxd://sessions/" + a.Session + "/files/" + strings.TrimPrefix(a.Path, "/")
	switch {
	case mime == "image/png":
		return &toolResult{Content: []content{{Type: "image", Data: base64.StdEncoding.EncodeToString(data), MimeType: mime}}}, nil
	case utf8.Valid(data) && !bytes.ContainsRune(data, 0):
		return textResult(string(data)), nil
	default:
		return &toolResult{Content: []content{{Type: "resource", Resource: &resource{URI: uri, MimeType: mime, Blob: base64.StdEncoding.EncodeToString(data)}}}}, nil
	}
}

// limitedBuffer fails a write past max, so a huge file cannot fill memory.
// It holds its buffer in a field rather than embedding it: an embedded
// bytes.Buffer would lend it ReadFrom, and io.Copy (which the client's
// GetFile uses) would then read the whole body around Write and its bound.
type limitedBuffer struct {
	buf bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if l.buf.Len()+len(p) > l.max {
		return 0, fmt.Errorf("the file is larger than %d bytes, the most download_file returns", l.max)
	}
	return l.buf.Write(p)
}

// Bytes returns what was written.
func (l *limitedBuffer) Bytes() []byte { return l.buf.Bytes() }

func listFiles(ctx context.Context, b Backend, raw json.RawMessage) (*toolResult, error) {
	var a struct {
		Session string `json:"session"`
	}
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	if err := require(map[string]string{"session": a.Session}); err != nil {
		return nil, err
	}
	files, _, err := b.ListFiles(ctx, a.Session)
	if err != nil {
		return nil, err
	}
	var sb strings.Builder
	if len(files) == 0 {
		sb.WriteString("(no files)")
	}
	for _, f := range files {
		fmt.Fprintf(&sb, "%s\t%d bytes\t%s\n", f.Path, f.Size, f.Mode)
	}
	r := textResult(sb.String())
	r.StructuredContent = map[string]any{"files": files}
	return r, nil
}

func deleteSession(ctx context.Context, b Backend, raw json.RawMessage) (*toolResult, error) {
	var a struct {
		Session string `json:"session"`
	}
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	if err := require(map[string]string{"session": a.Session}); err != nil {
		return nil, err
	}
	if err := b.DeleteSession(ctx, a.Session); err != nil {
		return nil, err
	}
	return textResult("session " + a.Session + " deleted"), nil
}
