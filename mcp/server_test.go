package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/mcp/mcptest"
)

// fakeBackend keeps session files in memory and "runs" code by echoing it.
type fakeBackend struct {
	files map[string][]byte
}

func (f *fakeBackend) Exec(_ context.Context, req api.ExecRequest) (*api.ExecResult, []byte, error) {
	zero := 0
	return &api.ExecResult{ID: "x", ExitCode: &zero, Stdout: req.Language + ":" + req.Code,
		Artifacts: []api.Artifact{{Path: "plot.png", Size: 3, ContentBase64: "iVBO"}}}, nil, nil
}

func (f *fakeBackend) SessionExec(ctx context.Context, id string, req api.ExecRequest) (*api.ExecResult, []byte, error) {
	if id != "s1" {
		return nil, nil, errors.New("not_found: no such session")
	}
	return f.Exec(ctx, req)
}

func (f *fakeBackend) CreateSession(context.Context, *int64, string) (*api.Session, []byte, error) {
	return &api.Session{ID: "s1", TTLSeconds: 60}, nil, nil
}
func (f *fakeBackend) DeleteSession(context.Context, string) error { return nil }
func (f *fakeBackend) ListFiles(context.Context, string) ([]api.FileInfo, []byte, error) {
	var out []api.FileInfo
	for p, b := range f.files {
		out = append(out, api.FileInfo{Path: p, Size: int64(len(b))})
	}
	return out, nil, nil
}
func (f *fakeBackend) PutFile(_ context.Context, _, path string, body io.Reader, _ int64) (*api.Uploaded, error) {
	b, _ := io.ReadAll(body)
	f.files[path] = b
	return &api.Uploaded{Path: path, Size: int64(len(b))}, nil
}
func (f *fakeBackend) GetFile(_ context.Context, _, path string, w io.Writer) (int64, error) {
	b, ok := f.files[path]
	if !ok {
		return 0, errors.New("not_found: no such file")
	}
	// As the real client does: io.Copy from a body that is only a
	// Reader, so io.Copy prefers the writer's ReadFrom when it has one.
	return io.Copy(w, struct{ io.Reader }{bytes.NewReader(b)})
}

func start(t *testing.T) *mcptest.Client {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := New(&fakeBackend{files: map[string][]byte{}}, "9.9", nil)
	done := make(chan struct{})
	go func() { _ = s.Serve(context.Background(), inR, outW); outW.Close(); close(done) }()
	t.Cleanup(func() { inW.Close(); <-done })
	c := mcptest.New(inW, outR)
	c.Log = t.Logf
	return c
}

func TestProtocol(t *testing.T) {
	c := start(t)
	res, err := c.Call("initialize", map[string]any{"protocolVersion": "2025-03-26", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "t", "version": "1"}}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
		Capabilities    struct {
			Tools *struct{} `json:"tools"`
		} `json:"capabilities"`
		ServerInfo struct{ Name, Version string } `json:"serverInfo"`
	}
	if err := json.Unmarshal(res, &init); err != nil || init.ProtocolVersion != "2025-03-26" || init.Capabilities.Tools == nil || init.ServerInfo.Name != "sandboxd" || init.ServerInfo.Version != "9.9" {
		t.Fatalf("initialize: %s", res)
	}
	if err := c.Notify("notifications/initialized", nil); err != nil {
		t.Fatal(err)
	}
	if res, err := c.Call("ping", nil, 5*time.Second); err != nil || string(res) != "{}" {
		t.Fatalf("ping: %s %v", res, err)
	}
	var rpcErr *mcptest.Error
	if _, err := c.Call("nope/nope", nil, 5*time.Second); !errors.As(err, &rpcErr) || rpcErr.Code != codeMethodNotFound {
		t.Fatalf("unknown method: %v", err)
	}
	if _, err := c.Call("tools/call", map[string]any{"name": "rm_rf"}, 5*time.Second); !errors.As(err, &rpcErr) || rpcErr.Code != codeInvalidParams {
		t.Fatalf("unknown tool: %v", err)
	}
	// A tool failure is a result with isError, which the model can read.
	res, err = c.Call("tools/call", map[string]any{"name": "run_code", "arguments": map[string]any{"language": "python"}}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := mcptest.CheckToolResult(res)
	if err != nil || !tr.IsError || !strings.Contains(tr.Text(), "code is required") {
		t.Fatalf("missing code: %+v %v", tr, err)
	}
	res, err = c.Call("tools/call", map[string]any{"name": "run_code", "arguments": map[string]any{"language": "python", "code": "1", "artifacts": []string{"*.png"}}}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if tr, err = mcptest.CheckToolResult(res); err != nil || tr.IsError || len(tr.Content) != 2 || tr.Content[1].Type != "image" {
		t.Fatalf("run_code: %s %v", res, err)
	}
	// Displays, a return value and an exception are content too.
	rich := execResult(&api.ExecResult{Stdout: "", Displays: []api.Display{{MIME: "image/png", DataBase64: "iVBORw0KGgo="},
		{MIME: "text/html", Data: json.RawMessage(`"<b>x</b>"`)}}, ReturnValue: json.RawMessage(`{"double":4}`),
		Exception: &api.Exception{Type: "ValueError", Message: "bad", Traceback: "tb"}})
	b, _ := json.Marshal(rich)
	if tr2, err := mcptest.CheckToolResult(b); err != nil || len(tr2.Content) != 3 || tr2.Content[1].Type != "image" ||
		!strings.Contains(tr2.Text(), `{"double":4}`) || !strings.Contains(tr2.Text(), "ValueError: bad") || !strings.Contains(tr2.Text(), "display (text/html):\n<b>x</b>") {
		t.Fatalf("rich result: %s %v", b, err)
	}
	// An unknown protocol version is answered with the newest.
	res, err = c.Call("initialize", map[string]any{"protocolVersion": "1999-01-01"}, 5*time.Second)
	if err != nil || !strings.Contains(string(res), ProtocolVersions[0]) {
		t.Fatalf("version negotiation: %s %v", res, err)
	}
}

// TestToolSchemas: every tool has a name, a description and an object
// inputSchema whose required names are properties.
func TestToolSchemas(t *testing.T) {
	want := []string{"run_code", "create_session", "upload_file", "download_file", "list_files", "delete_session"}
	tools := toolList()
	if len(tools) != len(want) {
		t.Fatalf("%d tools; want %v", len(tools), want)
	}
	for i, tl := range tools {
		if tl.Name != want[i] || tl.Description == "" || tl.InputSchema["type"] != "object" {
			t.Errorf("tool %d: %+v", i, tl)
		}
		props := tl.InputSchema["properties"].(map[string]any)
		if req, ok := tl.InputSchema["required"].([]string); ok {
			for _, r := range req {
				if _, ok := props[r]; !ok {
					t.Errorf("%s requires %q, which is not a property", tl.Name, r)
				}
			}
		}
	}
}

// TestFraming: garbage, batches and bad ids get JSON-RPC errors with id
// null; notifications get no answer.
func TestFraming(t *testing.T) {
	var out bytes.Buffer
	in := strings.Join([]string{
		`not json`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`,
		`{"jsonrpc":"1.0","id":2,"method":"ping"}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"s","method":"ping"}`,
	}, "\n") + "\n"
	if err := New(&fakeBackend{}, "1", nil).Serve(context.Background(), strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32600`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32600`,
		`{"jsonrpc":"2.0","id":2,"error":{"code":-32600`,
		`{"jsonrpc":"2.0","id":"s","result":{}}`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d answers; want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("answer %d: %s; want prefix %s", i, lines[i], w)
		}
	}
}

// TestDisplayContentImages: PNG and JPEG displays are MCP image content of
// their own type; the other types are text.
func TestDisplayContentImages(t *testing.T) {
	for _, c := range []struct {
		d    api.Display
		want content
	}{
		{api.Display{MIME: api.DisplayPNG, DataBase64: "iVBO"}, content{Type: "image", Data: "iVBO", MimeType: "image/png"}},
		{api.Display{MIME: api.DisplayJPEG, DataBase64: "/9j/"}, content{Type: "image", Data: "/9j/", MimeType: "image/jpeg"}},
		{api.Display{MIME: api.DisplayMarkdown, Data: json.RawMessage(`"# md"`)}, content{Type: "text", Text: "display (text/markdown):\n# md"}},
	} {
		if got := displayContent(c.d); got.Type != c.want.Type || got.Data != c.want.Data || got.MimeType != c.want.MimeType || got.Text != c.want.Text {
			t.Errorf("%s: %+v", c.d.MIME, got)
		}
	}
}

// TestRunCodeModeDefault: run_code runs python and javascript in a kernel
// by default, without a session too (a throwaway kernel: a chart comes
// back as a display); shell and an explicit mode are left as asked.
func TestRunCodeModeDefault(t *testing.T) {
	for _, tc := range []struct{ mode, language, session, want string }{
		{"", "python", "", "kernel"},
		{"", "javascript", "", "kernel"},
		{"", "shell", "", ""},
		{"process", "python", "", "process"},
		{"", "python", "s1", ""},
		{"process", "python", "s1", "process"},
	} {
		if got := runCodeMode(tc.mode, tc.language, tc.session); got != tc.want {
			t.Errorf("runCodeMode(%q, %q, %q) = %q, want %q", tc.mode, tc.language, tc.session, got, tc.want)
		}
	}
}
