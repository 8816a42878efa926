package runners

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPythonStateAcrossExecs(t *testing.T) {
	k := startKernel(t, "python")
	k.exec("x = 41\ndef inc(v):\n    return v + 1\n").mustOK(t)
	k.exec("y = inc(x)\nimport os\n").mustOK(t)
	r := k.exec("print(y, __name__, os.getcwd() == __import__('sys').path[0])").mustOK(t)
	if r.stdout != "42 __main__ True\n" {
		t.Fatalf("stdout %q", r.stdout)
	}
	if r.result.ExecutionCount != 3 {
		t.Fatalf("execution_count %d, want 3", r.result.ExecutionCount)
	}
}

func TestPythonWorkspaceImport(t *testing.T) {
	k := startKernel(t, "python")
	if err := os.WriteFile(filepath.Join(k.dir, "helper.py"), []byte("VALUE = 7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := k.exec("import helper\nhelper.VALUE * 6").mustOK(t)
	if len(r.displays) != 1 || r.displays[0].MIME != "text/plain" || r.displays[0].Text() != "42" {
		t.Fatalf("displays %+v", r.displays)
	}
}

func TestPythonSysExit(t *testing.T) {
	k := startKernel(t, "python")
	k.exec("kept = 'yes'").mustOK(t)
	r := k.exec("import sys\nprint('before')\nsys.exit(3)\nprint('after')")
	if r.result.ExitCode != 3 || r.result.Exception != nil || r.stdout != "before\n" {
		t.Fatalf("exit %d exception %+v stdout %q", r.result.ExitCode, r.result.Exception, r.stdout)
	}
	if r := k.exec("print(kept)").mustOK(t); r.stdout != "yes\n" {
		t.Fatalf("after sys.exit: stdout %q", r.stdout)
	}
}

func TestPythonInterrupt(t *testing.T) {
	k := startKernel(t, "python")
	id := k.send("import time\nprint('looping', flush=True)\nwhile True:\n    pass\n")
	f := k.next(30 * time.Second) // the print: the loop is running
	_ = f
	if err := k.enc.Interrupt(id); err != nil {
		t.Fatal(err)
	}
	r := k.collect(id, 30*time.Second)
	if r.result.Exception == nil || r.result.Exception.Type != "KeyboardInterrupt" || r.result.ExitCode == 0 {
		t.Fatalf("result %+v exception %+v", r.result, r.result.Exception)
	}
	// only the caller's frames: the runner's signal handler raised it,
	// but it is no frame of the caller's code
	if tb := r.result.Exception.Traceback; !strings.Contains(tb, "<exec-1>") || strings.Contains(tb, "main.py") || strings.Contains(tb, "_on_sigint") {
		t.Fatalf("traceback:\n%s", tb)
	}
	if strings.Contains(r.stderr, "_on_sigint") {
		t.Fatalf("stderr shows the runner's frame:\n%s", r.stderr)
	}
	if got := k.exec("print('alive')").mustOK(t).stdout; got != "alive\n" {
		t.Fatalf("after interrupt: %q", got)
	}
}

func TestPythonInput(t *testing.T) {
	k := startKernel(t, "python")
	r := k.exec("a = input()\nb = input('prompt> ')\nprint(a.upper(), b)", withStdin("first\nsecond\n")).mustOK(t)
	if r.stdout != "prompt> FIRST second\n" {
		t.Fatalf("stdout %q", r.stdout)
	}
	// the next exec's stdin is its own: nothing left over, EOF at once
	r = k.exec("import sys\nprint(repr(sys.stdin.read()))").mustOK(t)
	if r.stdout != "''\n" {
		t.Fatalf("second exec stdin %q", r.stdout)
	}
}

// pngSize reads the IHDR width and height of a PNG.
func pngSize(t *testing.T, b64 string) (int, int) {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) < 24 || !bytes.Equal(raw[:8], []byte("\x89PNG\r\n\x1a\n")) || string(raw[12:16]) != "IHDR" {
		t.Fatalf("not a PNG: % x", raw[:min(len(raw), 24)])
	}
	return int(binary.BigEndian.Uint32(raw[16:20])), int(binary.BigEndian.Uint32(raw[20:24]))
}

func TestPythonMatplotlibFigure(t *testing.T) {
	k := startKernel(t, "python")
	k.exec("import matplotlib.pyplot as plt").mustOK(t)
	r := k.exec("fig = plt.figure(figsize=(4, 3), dpi=100)\nplt.plot([1, 2, 3], [2, 1, 3])\nplt.title('标题')\nNone").mustOK(t)
	if len(r.displays) != 1 || r.displays[0].MIME != "image/png" {
		t.Fatalf("displays %+v", r.displays)
	}
	if w, h := pngSize(t, r.displays[0].DataBase64); w != 400 || h != 300 {
		t.Fatalf("PNG %dx%d, want 400x300", w, h)
	}
	// the figure was closed: the next exec shows nothing
	if r := k.exec("len(plt.get_fignums())").mustOK(t); r.displays[0].Text() != "0" {
		t.Fatalf("figures left open: %s", r.displays[0].Text())
	}
}

func TestPythonDataFrame(t *testing.T) {
	k := startKernel(t, "python")
	k.exec("import pandas as pd\ndf = pd.DataFrame({'city': ['Oslo', 'Lima'], 'temp': [3, 19]})").mustOK(t)
	r := k.exec("df").mustOK(t)
	if len(r.displays) != 2 || r.displays[0].MIME != "text/html" || r.displays[1].MIME != "text/plain" {
		t.Fatalf("displays %+v", r.displays)
	}
	if html := r.displays[0].Text(); !strings.Contains(html, "<table") || !strings.Contains(html, "Lima") {
		t.Fatalf("html %q", html)
	}
	if txt := r.displays[1].Text(); !strings.Contains(txt, "Oslo") {
		t.Fatalf("text %q", txt)
	}
	// a trailing semicolon suppresses the value, as in IPython
	if r := k.exec("df;").mustOK(t); len(r.displays) != 0 {
		t.Fatalf("displays after ';': %+v", r.displays)
	}
}

func TestPythonDisplayBuiltin(t *testing.T) {
	k := startKernel(t, "python")
	code := `class Rich:
    def _repr_svg_(self): return '<svg xmlns="http://www.w3.org/2000/svg"/>'
    def _repr_json_(self): return {"k": [1, 2]}
print('first')
display(Rich())
display(12)
`
	r := k.exec(code).mustOK(t)
	var mimes []string
	for _, d := range r.displays {
		mimes = append(mimes, d.MIME)
	}
	if strings.Join(mimes, ",") != "image/svg+xml,application/json,text/plain" {
		t.Fatalf("mimes %v", mimes)
	}
	if string(r.displays[1].Data) != `{"k":[1,2]}` || r.displays[2].Text() != "12" {
		t.Fatalf("displays %+v", r.displays)
	}
	// the print before display() arrives before it
	if got := r.beforeFirstDisplay(); got != "first\n" {
		t.Fatalf("stdout before the first display %q, want the output written before display()", got)
	}
}

func TestPythonEntrypoint(t *testing.T) {
	k := startKernel(t, "python")
	code := "def main(name, items, nested=None):\n    return {'greeting': 'hi ' + name, 'n': len(items), 'nested': nested}\n"
	r := k.exec(code, withEntry("main", `{"name":"ada","items":[1,2,3],"nested":{"a":null}}`)).mustOK(t)
	var got map[string]any
	if err := json.Unmarshal(r.result.ReturnValue, &got); err != nil {
		t.Fatal(err)
	}
	if got["greeting"] != "hi ada" || got["n"] != 3.0 || got["nested"].(map[string]any)["a"] != nil {
		t.Fatalf("return_value %s", r.result.ReturnValue)
	}
	r = k.exec("async def main(x):\n    return [x, x]\n", withEntry("main", `{"x":1.5}`)).mustOK(t)
	if string(r.result.ReturnValue) != "[1.5,1.5]" {
		t.Fatalf("async main: %s", r.result.ReturnValue)
	}
	testEntryFailures(t, k, []entryFailure{
		{"def main():\n    return object()\n", "main", "ReturnValueError"},
		{"def main():\n    return float('nan')\n", "main", "ReturnValueError"},
		{"x = 1\n", "undefined_fn", "EntrypointError"},
		{"def main():\n    raise ValueError('bad input')\n", "main", "ValueError"},
	})
}

func TestPythonExceptions(t *testing.T) {
	testExceptions(t, "python", "main.py", []excCase{
		{"def f():\n    return {}['k']\nf()\n", "KeyError", "'k'", "line 2, in f"},
		{"1/0", "ZeroDivisionError", "division by zero", "<exec-2>"},
		{"def (:\n", "SyntaxError", "invalid syntax", "def (:"},
		{"raise KeyboardInterrupt", "KeyboardInterrupt", "", "KeyboardInterrupt"},
	})
}

func TestPythonStreamOrderAndRawFDs(t *testing.T) {
	testStreamOrderAndRawFDs(t, "python", `import os, sys, subprocess
for i in range(200):
    print("out", i)
    print("err", i, file=sys.stderr)
os.write(1, b"raw-out\n")
os.write(1, b"\xff\xe2\x82")  # not UTF-8, then half of a euro sign
os.write(1, b"\xac\n")          # its other half: one character
os.write(2, b"raw-err\n")
subprocess.run(["/bin/sh", "-c", "echo child-out; echo child-err >&2"], check=True)
`)
}

func TestPythonLargeOutputStreams(t *testing.T) {
	testLargeOutput(t, "python", `import os, sys, time
chunk = "x" * 1023 + "\n"
for _ in range(10 * 1024):
    sys.stdout.write(chunk)
while not os.path.exists("gate"):
    time.sleep(0.01)
print("done")
`)
}

func TestPythonOnceMode(t *testing.T) {
	k := startKernel(t, "python", ModeEnv+"="+ModeOnce)
	r := k.exec("import os\nprint(os.environ.get('" + ModeEnv + "'))\nraise SystemExit(7)")
	if r.result.ExitCode != 7 || r.stdout != "None\n" {
		t.Fatalf("exit %d stdout %q", r.result.ExitCode, r.stdout)
	}
	if code := k.exited(10 * time.Second); code != 7 {
		t.Fatalf("runner exited %d, want 7", code)
	}
}

// display() from caller threads while the main thread ends the exec must
// neither deadlock nor lose the main thread's displays.
func TestPythonDisplayFromThreads(t *testing.T) {
	k := startKernel(t, "python")
	code := `import threading
def worker(i):
    for j in range(50):
        display(i * 100 + j)
        print("w", i, j)
ts = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
for t in ts: t.start()
for t in ts: t.join()
display("main")
`
	r := k.exec(code).mustOK(t)
	if len(r.displays) != 201 || r.displays[200].Text() != "'main'" {
		t.Fatalf("%d displays, last %+v", len(r.displays), r.displays[len(r.displays)-1])
	}
	if n := strings.Count(r.stdout, "\n"); n != 200 || strings.Contains(r.stdout+r.stderr, "sandboxd-sync") {
		t.Fatalf("%d lines of stdout, a sync marker leaked: %q", n, r.stdout)
	}
}

// A caller thread that keeps printing and displaying across execs: every
// frame must still belong to the exec running when it is sent (protocol.Conn
// fails the test otherwise), and nothing may come after a result.
func TestPythonBackgroundOutputStaysInsideExecs(t *testing.T) {
	testBackgroundOutput(t, "python", `import threading, time, sys
def chatter():
    i = 0
    while True:
        i += 1
        print("bg", i)
        if i % 50 == 0:
            display(i)
threading.Thread(target=chatter, daemon=True).start()
`, "pass")
}

// A copy of the runner forked by caller code that returns into the runner
// (instead of exiting) has no stream pumps: it must end there, without
// writing a sync marker into the pipes it shares with the runner (the
// runner's pump sent that marker as output) or hanging in a sync.
func TestPythonForkedChildLeaksNoMarker(t *testing.T) {
	k := startKernel(t, "python")
	r := k.exec("import os\nif os.fork() == 0:\n    print('child', flush=True)\nelse:\n    print('parent', flush=True)\n").mustOK(t)
	r2 := k.exec("import time\ntime.sleep(0.5)\nprint('next')").mustOK(t)
	out := r.stdout + r2.stdout
	if strings.Contains(out, "sandboxd-sync") || !strings.Contains(out, "child") || !strings.Contains(out, "parent") {
		t.Fatalf("stdout %q then %q", r.stdout, r2.stdout)
	}
}

// A sync marker in the output that is not the one the runner waits for (a
// stale one, or one written by another process) is dropped, never sent.
func TestPythonForeignMarkerDropped(t *testing.T) {
	k := startKernel(t, "python")
	r := k.exec(`import os
os.write(1, b"a\x00\x1bsandboxd-sync-" + b"0" * 32 + b"\x00b\n")
os.write(1, b"c\x00\x1bsandboxd-sy")
os.write(1, b"nc-" + b"1" * 32 + b"\x00d\n")
`).mustOK(t)
	if r.stdout != "ab\ncd\n" {
		t.Fatalf("stdout %q", r.stdout)
	}
}

// An interrupt that arrives before its exec has begun (the supervisor's
// timeout of a runner slowed by CPU throttling) interrupts the exec when
// it begins, rather than being lost until the kernel is killed.
func TestPythonInterruptBeforeExecBegins(t *testing.T) {
	k := startKernel(t, "python", ModeEnv+"="+ModeOnce)
	id := k.send("while True: pass")
	if err := k.enc.Interrupt(id); err != nil {
		t.Fatal(err)
	}
	r := k.collect(id, 10*time.Second)
	if e := r.result.Exception; e == nil || e.Type != "KeyboardInterrupt" || strings.Contains(e.Traceback, "main.py") {
		t.Fatalf("result %+v exception %+v", r.result, e)
	}
}
