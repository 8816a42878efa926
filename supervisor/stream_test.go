package supervisor

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/launch"
)

// TestStreamedProcessExec: Accept: application/x-ndjson streams the
// process's output as it is read (Request.Output), capped at the output
// limit, then the whole result as the last line.
func TestStreamedProcessExec(t *testing.T) {
	fl := &fakeLauncher{fn: func(_ context.Context, req launch.Request) (*launch.ExecResult, error) {
		req.Output("stdout", []byte("hello "))
		req.Output("stderr", []byte("warn"))
		req.Output("stdout", []byte(strings.Repeat("x", int(req.Limits.OutputLimitBytes))))
		return okResult(req), nil
	}}
	ts := startServer(t, testConfig(), fl, readyChecks())
	r := ts.do("POST", "/v1/exec", `{"language":"shell","code":"echo hello"}`, "Accept", "application/x-ndjson")
	if r.status != 200 || r.header.Get("Content-Type") != api.NDJSONType {
		t.Fatalf("%d %s %s", r.status, r.header, r.body)
	}
	lines := strings.Split(strings.TrimSuffix(string(r.body), "\n"), "\n")
	var types []string
	streamed := 0
	for _, l := range lines {
		var ev map[string]any
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		types = append(types, ev["type"].(string))
		if ev["type"] == "stdout" {
			streamed += len(ev["data"].(string))
		}
	}
	if got := strings.Join(types, " "); got != "stdout stderr stdout result" {
		t.Fatalf("events %q", got)
	}
	if want := int(testConfig().OutputLimitBytes); streamed != want {
		t.Fatalf("streamed %d stdout bytes, want the limit %d", streamed, want)
	}
	var res struct {
		Type string `json:"type"`
		launch.ExecResult
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil || res.ID == "" || res.Displays == nil {
		t.Fatalf("result line %s: %v", lines[len(lines)-1], err)
	}
}

// TestKernelModeRules: kernel mode is refused for shell; a launcher that
// cannot run kernels refuses an explicit kernel mode (one-shot too) as
// unavailable.
func TestKernelModeRules(t *testing.T) {
	ts := startServer(t, testConfig(), nil, readyChecks())
	if r := ts.do("POST", "/v1/exec", `{"language":"python","code":"1","mode":"kernel"}`); r.status != 503 {
		t.Fatalf("one-shot kernel without kernels: %d %s", r.status, r.body)
	}
	if r := ts.do("POST", "/v1/exec", `{"language":"shell","code":"true","mode":"kernel"}`); r.status != 400 {
		t.Fatalf("one-shot shell kernel: %d %s", r.status, r.body)
	}
	if r := ts.do("POST", "/v1/exec", `{"language":"shell","code":"true","entrypoint":"main"}`); r.status != 400 {
		t.Fatalf("shell entrypoint: %d %s", r.status, r.body)
	}
	if r := ts.do("POST", "/v1/exec", `{"language":"python","code":"1","inputs":{"a":1}}`); r.status != 400 {
		t.Fatalf("inputs without entrypoint: %d %s", r.status, r.body)
	}
}

func TestEventLines(t *testing.T) {
	for _, tc := range []struct {
		e    event
		want string
	}{
		{event{Type: "stdout", Data: "a\n"}, `{"type":"stdout","data":"a\n"}`},
		{event{Type: "stderr", Data: ""}, `{"type":"stderr","data":""}`},
		{event{Type: "result", Result: &launch.ExecResult{ID: "x"}}, `{"type":"result","id":"x",`},
		{event{Type: "error", Error: apiErr("internal", "boom")}, `{"type":"error","error":{"code":"internal","message":"boom"}}`},
	} {
		got := string(tc.e.line())
		if !strings.HasPrefix(got, tc.want) || !strings.HasSuffix(got, "}\n") || strings.Count(got, "\n") != 1 {
			t.Errorf("line %q, want prefix %q", got, tc.want)
		}
	}
}
