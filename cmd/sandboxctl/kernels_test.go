package main

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/launch"
)

// TestRunStreams: --stream (the default on a terminal) writes output as
// the events arrive, once, and still maps the result to the exit status.
func TestRunStreams(t *testing.T) {
	l := &launcher{fn: func(req launch.Request) (*api.ExecResult, error) {
		if req.Output == nil {
			t.Error("the exec was not streamed")
		} else {
			req.Output("stdout", []byte("streamed\n"))
			req.Output("stderr", []byte("err\n"))
		}
		code := 4
		return &api.ExecResult{ID: req.ExecID, ExitCode: &code, Stdout: "streamed\n", Stderr: "err\n"}, nil
	}}
	sock := serve(t, l, ready())
	r := ctl(t, sock, "", nil, "run", "--lang", "shell", "-c", "echo streamed", "--stream")
	if r.code != 4 || r.stdout != "streamed\n" || r.stderr != "err\n" {
		t.Fatalf("%+v", r)
	}
	// --no-stream wins; a buffer is no terminal anyway.
	l.fn = exited(0, "whole\n", "")
	if r := ctl(t, sock, "", nil, "run", "--lang", "shell", "-c", "true", "--stream", "--no-stream"); r.code != 0 || r.stdout != "whole\n" {
		t.Fatalf("%+v", r)
	}
}

// TestRunDisplays: displays are written to --artifacts-dir by type, the
// return value is printed, and without a directory the count is noted.
func TestRunDisplays(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\nfake")
	l := &launcher{fn: func(req launch.Request) (*api.ExecResult, error) {
		zero := 0
		return &api.ExecResult{ID: req.ExecID, ExitCode: &zero, ReturnValue: json.RawMessage(`{"ok":true}`), Displays: []api.Display{
			{MIME: "image/png", DataBase64: base64.StdEncoding.EncodeToString(png)},
			{MIME: "text/html", Data: json.RawMessage(`"<table></table>"`)},
			{MIME: "application/json", Data: json.RawMessage(`{"a":1}`)},
		}}, nil
	}}
	sock := serve(t, l, ready())
	dir := t.TempDir()
	r := ctl(t, sock, "", nil, "run", "--lang", "shell", "-c", "true", "--artifacts-dir", dir)
	if r.code != 0 || r.stdout != "{\"ok\":true}\n" {
		t.Fatalf("%+v", r)
	}
	for name, want := range map[string]string{
		"display-*-1.png": string(png), "display-*-2.html": "<table></table>", "display-*-3.json": "{\"a\":1}\n",
	} {
		m, _ := filepath.Glob(filepath.Join(dir, name))
		if len(m) != 1 {
			t.Fatalf("%s: %v", name, m)
		}
		if b, err := os.ReadFile(m[0]); err != nil || string(b) != want {
			t.Fatalf("%s: %q %v", name, b, err)
		}
	}
	if r := ctl(t, sock, "", nil, "run", "--lang", "shell", "-c", "true"); !strings.Contains(r.stderr, "3 artifact(s) and display(s) returned") {
		t.Fatalf("note: %+v", r)
	}
}
