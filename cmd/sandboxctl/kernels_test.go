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

// TestRunDisplays: a text/plain display (a kernel's last expression) is
// printed as a REPL prints it; rich displays are written to --artifacts-dir
// by type and named on stderr; the return value is printed; without a
// directory, what was not shown is noted.
func TestRunDisplays(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\nfake")
	l := &launcher{fn: func(req launch.Request) (*api.ExecResult, error) {
		zero := 0
		return &api.ExecResult{ID: req.ExecID, ExitCode: &zero, Stdout: "out\n", ReturnValue: json.RawMessage(`{"ok":true}`), Displays: []api.Display{
			{MIME: "image/png", DataBase64: base64.StdEncoding.EncodeToString(png)},
			{MIME: "text/html", Data: json.RawMessage(`"<table></table>"`)},
			{MIME: "application/json", Data: json.RawMessage(`{"a":1}`)},
			{MIME: "text/plain", Data: json.RawMessage(`"42"`)},
		}}, nil
	}}
	sock := serve(t, l, ready())
	dir := t.TempDir()
	r := ctl(t, sock, "", nil, "run", "--lang", "shell", "-c", "true", "--artifacts-dir", dir)
	if r.code != 0 || r.stdout != "out\n42\n{\"ok\":true}\n" {
		t.Fatalf("%+v", r)
	}
	if !strings.Contains(r.stderr, "saved to "+dir+": display-") || !strings.Contains(r.stderr, "-3.json") {
		t.Fatalf("where the files went: %q", r.stderr)
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
	if m, _ := filepath.Glob(filepath.Join(dir, "*.txt")); len(m) != 0 {
		t.Fatalf("a text display was written as a file too: %v", m)
	}
	r = ctl(t, sock, "", nil, "run", "--lang", "shell", "-c", "true")
	if r.stdout != "out\n42\n{\"ok\":true}\n" || !strings.Contains(r.stderr, "3 display(s) (image/png, text/html, application/json) not shown") {
		t.Fatalf("without a directory: %+v", r)
	}
}

// TestSaveDisplaysEveryType: every display type the API has but plain text
// (printed instead) is written with its extension and its bytes (a type
// missing from displayExt was reported as unknown and not written).
func TestSaveDisplaysEveryType(t *testing.T) {
	dir := t.TempDir()
	var ds []api.Display
	want := map[string]string{}
	for i, mime := range api.DisplayMIMEs() {
		d := api.Display{MIME: mime}
		var content string
		switch mime {
		case api.DisplayPNG, api.DisplayJPEG:
			content = "bytes of " + mime
			d.DataBase64 = base64.StdEncoding.EncodeToString([]byte(content))
		case api.DisplayJSON, api.DisplayPlotly:
			d.Data = json.RawMessage(`{"k":1}`)
			content = "{\"k\":1}\n"
		default:
			content = "text of " + mime
			d.Data, _ = json.Marshal(content)
		}
		ds = append(ds, d)
		if mime != api.DisplayText { // printed, never a file
			want["display-e1-"+string(rune('1'+i))+displayExt[mime]] = content
		}
	}
	names, err := saveDisplays(dir, "e1", ds)
	if err != nil || len(names) != len(want) {
		t.Fatalf("saved %v, %v; want %d files", names, err, len(want))
	}
	for name, content := range want {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(b) != content {
			t.Errorf("%s: %q, %v; want %q", name, b, err, content)
		}
	}
}
