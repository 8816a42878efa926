package supervisor

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/launch"
)

// Reports as /usr/bin/python3 (3.11, run through nsinit's bootstrap) and
// node 20 print them; the expected type and message are what the kernel
// runners report for the same exception.
const (
	pyZeroDiv = `Traceback (most recent call last):
  File "<string>", line 1, in <module>
  File "/run/sandboxd/main.py", line 1, in <module>
    1/0
    ~^~
ZeroDivisionError: division by zero
`
	pyCause = `Traceback (most recent call last):
  File "/run/sandboxd/main.py", line 4, in <module>
    f()
  File "/run/sandboxd/main.py", line 2, in f
    return {}['k']
           ~~^^^^^
KeyError: 'k'

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "<string>", line 1, in <module>
  File "/run/sandboxd/main.py", line 6, in <module>
    raise ValueError("bad\nsecond line") from e
ValueError: bad
second line
`
	pyContext = `Traceback (most recent call last):
  File "/run/sandboxd/main.py", line 2, in <module>
    1/0
    ~^~
ZeroDivisionError: division by zero

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "<string>", line 1, in <module>
  File "/run/sandboxd/main.py", line 4, in <module>
    raise RuntimeError("during")
RuntimeError: during
`
	pySyntax = `Traceback (most recent call last):
  File "<string>", line 1, in <module>
  File "/run/sandboxd/main.py", line 1
    def (:
        ^
SyntaxError: invalid syntax
`
	pyQualified = `Traceback (most recent call last):
  File "<string>", line 1, in <module>
  File "/usr/lib/python3.11/json/decoder.py", line 353, in raw_decode
    obj, end = self.scan_once(s, idx)
               ^^^^^^^^^^^^^^^^^^^^^^
json.decoder.JSONDecodeError: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)
`
	pyBare = `Traceback (most recent call last):
  File "<string>", line 1, in <module>
  File "/run/sandboxd/main.py", line 1, in <module>
    raise KeyboardInterrupt
KeyboardInterrupt
`
	nodeError = `/run/sandboxd/main.js:1
function f(){ null.x }; f()
                   ^

TypeError: Cannot read properties of null (reading 'x')
    at f (/run/sandboxd/main.js:1:20)
    at Object.<anonymous> (/run/sandboxd/main.js:1:25)
    at node:internal/main/run_main_module:28:49

Node.js v20.20.2
`
	nodeProps = `node:fs:573
  return binding.open(
                 ^

Error: ENOENT: no such file or directory, open '/nonexist'
    at Object.openSync (node:fs:573:18)
    at Object.<anonymous> (/run/sandboxd/main.js:1:15) {
  errno: -2,
  code: 'ENOENT'
}

Node.js v20.20.2
`
	nodeMultiline = `/run/sandboxd/main.js:1
const e = new Error('multi\nline'); throw e
                                    ^

Error: multi
line
    at Object.<anonymous> (/run/sandboxd/main.js:1:11)

Node.js v20.20.2
`
	nodeSyntax = `/run/sandboxd/main.js:1
let = = 1
      ^

SyntaxError: Unexpected token '='
    at wrapSafe (node:internal/modules/cjs/loader:1464:18)

Node.js v20.20.2
`
	nodeCoded = `node:internal/fs/utils:1
x
^

TypeError [ERR_INVALID_ARG_TYPE]: The "path" argument must be of type string
    at open (node:fs:1:1)

Node.js v20.20.2
`
	nodeThrow42 = `
/run/sandboxd/main.js:1
throw 42
^
42
(Use ` + "`node --trace-uncaught ...`" + ` to show where the exception was thrown)

Node.js v20.20.2
`
)

func TestDeriveException(t *testing.T) {
	for _, tc := range []struct {
		name, runtime, stderr string
		want                  *api.Exception // Traceback: a substring it must hold
		tbWhole               bool           // the traceback is the whole stderr
	}{
		{"py zero division", "python", "some output\n" + pyZeroDiv, &api.Exception{Type: "ZeroDivisionError", Message: "division by zero", Traceback: "~^~\nZeroDivisionError"}, false},
		{"py cause chain", "python", pyCause, &api.Exception{Type: "ValueError", Message: "bad\nsecond line", Traceback: "KeyError: 'k'"}, true},
		{"py context chain", "python", pyContext, &api.Exception{Type: "RuntimeError", Message: "during", Traceback: "ZeroDivisionError"}, true},
		{"py syntax error", "python", pySyntax, &api.Exception{Type: "SyntaxError", Message: "invalid syntax", Traceback: "def (:"}, true},
		{"py qualified type", "python", pyQualified, &api.Exception{Type: "JSONDecodeError", Message: "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)", Traceback: "raw_decode"}, true},
		{"py no message", "python", pyBare, &api.Exception{Type: "KeyboardInterrupt", Message: "", Traceback: "raise KeyboardInterrupt"}, true},
		{"py second report wins", "python", pyZeroDiv + "noise\n" + pySyntax, &api.Exception{Type: "SyntaxError", Message: "invalid syntax", Traceback: "SyntaxError"}, false},
		{"node error", "javascript", nodeError, &api.Exception{Type: "TypeError", Message: "Cannot read properties of null (reading 'x')", Traceback: "at f ("}, false},
		{"node props", "javascript", nodeProps, &api.Exception{Type: "Error", Message: "ENOENT: no such file or directory, open '/nonexist'", Traceback: "code: 'ENOENT'"}, false},
		{"node multiline", "javascript", nodeMultiline, &api.Exception{Type: "Error", Message: "multi\nline", Traceback: "Error: multi\nline\n    at"}, false},
		{"node syntax", "javascript", nodeSyntax, &api.Exception{Type: "SyntaxError", Message: "Unexpected token '='", Traceback: "wrapSafe"}, false},
		{"node coded", "javascript", nodeCoded, &api.Exception{Type: "TypeError", Message: `The "path" argument must be of type string`, Traceback: "ERR_INVALID_ARG_TYPE"}, false},
		{"node non-error throw", "javascript", nodeThrow42, nil, false},
		{"py report from node", "javascript", pyZeroDiv, nil, false},
		{"node report from python", "python", nodeError, nil, false},
		{"shell", "shell", pyZeroDiv, nil, false},
		{"py header only", "python", "Traceback (most recent call last):\n", nil, false},
		{"py no frames", "python", "Traceback (most recent call last):\nValueError: x\n", nil, false},
		{"py frames only", "python", "Traceback (most recent call last):\n  File \"x\", line 1\n", nil, false},
		{"py bad type line", "python", "Traceback (most recent call last):\n  File \"x\", line 1\n!!! not a type\n", nil, false},
		{"py header mid-line", "python", "say Traceback (most recent call last):\n  File \"x\"\nE: m\n", nil, false},
		{"node no trailer", "javascript", strings.TrimSuffix(nodeError, "\nNode.js v20.20.2\n"), nil, false},
		{"node no frames", "javascript", "x\n^\n\nError: boom\n\nNode.js v20.20.2\n", nil, false},
		{"node caret not alone", "javascript", "x ^\n\nError: boom\n    at y\n\nNode.js v20.20.2\n", nil, false},
		{"empty", "python", "", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code := 1
			res := &launch.ExecResult{ExitCode: &code, Stderr: tc.stderr}
			deriveException(tc.runtime, res)
			got := res.Exception
			if tc.want == nil {
				if got != nil {
					t.Fatalf("derived %+v from garbage", got)
				}
				return
			}
			if got == nil || got.Type != tc.want.Type || got.Message != tc.want.Message || !strings.Contains(got.Traceback, tc.want.Traceback) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			if tc.tbWhole && got.Traceback != tc.stderr {
				t.Fatalf("traceback %q, want the whole report %q", got.Traceback, tc.stderr)
			}
		})
	}
}

// Only a non-zero exit of an exec that was not killed gets one, and one a
// runner reported is kept.
func TestDeriveExceptionConditions(t *testing.T) {
	zero, one := 0, 1
	sig := "SIGKILL"
	kept := &api.Exception{Type: "FromRunner"}
	for _, res := range []*launch.ExecResult{
		{ExitCode: &zero, Stderr: pyZeroDiv},
		{Signal: &sig, Stderr: pyZeroDiv},
		{ExitCode: &one, TimedOut: true, Stderr: pyZeroDiv},
		{ExitCode: &one, Stderr: pyZeroDiv, Exception: kept},
	} {
		before := res.Exception
		deriveException("python", res)
		if res.Exception != before {
			t.Fatalf("derived %+v for %+v", res.Exception, res)
		}
	}
	deriveException("python", nil) // no panic
}

// Only the end of a long stderr is read, and a cut through a UTF-8
// sequence does not make the result invalid.
func TestDeriveExceptionWindow(t *testing.T) {
	code := 1
	long := strings.Repeat("é", exceptionWindow) + "\n" + pyZeroDiv
	res := &launch.ExecResult{ExitCode: &code, Stderr: long}
	deriveException("python", res)
	if res.Exception == nil || res.Exception.Type != "ZeroDivisionError" {
		t.Fatalf("after a long stderr: %+v", res.Exception)
	}
	header := pyHeader + "\n  File \"x\", line 1\n"
	res = &launch.ExecResult{ExitCode: &code, Stderr: header + strings.Repeat("x", exceptionWindow) + "\nValueError: far\n"}
	deriveException("python", res)
	if res.Exception != nil {
		t.Fatalf("a header beyond the window was read: %+v", res.Exception)
	}
}

func FuzzDeriveException(f *testing.F) {
	for _, s := range []string{pyZeroDiv, pyCause, pyContext, pySyntax, pyQualified, pyBare, nodeError, nodeProps, nodeMultiline, nodeThrow42, nodeCoded} {
		f.Add("python", s)
		f.Add("javascript", s)
	}
	f.Fuzz(func(t *testing.T, runtime, stderr string) {
		code := 1
		res := &launch.ExecResult{ExitCode: &code, Stderr: stderr}
		deriveException(runtime, res)
		if e := res.Exception; e != nil {
			tail := stderr[max(0, len(stderr)-exceptionWindow):]
			if len(e.Traceback) > len(tail)+1 || len(e.Message) > len(tail) || e.Type == "" {
				t.Fatalf("unbounded or empty: %+v", e)
			}
			if utf8.ValidString(stderr) && (!utf8.ValidString(e.Message) || !utf8.ValidString(e.Traceback)) {
				t.Fatalf("invalid UTF-8 from valid input: %+v", e)
			}
		}
	})
}

// A plain process exec's result carries the exception its stderr reports,
// through the API, buffered and streamed alike.
func TestProcessExecResultHasException(t *testing.T) {
	fl := &fakeLauncher{fn: func(_ context.Context, req launch.Request) (*launch.ExecResult, error) {
		code := 1
		return &launch.ExecResult{ExitCode: &code, Stdout: "before\n", Stderr: pyCause}, nil
	}}
	ts := startServer(t, testConfig(), fl, readyChecks())
	r := ts.do("POST", "/v1/exec", `{"language":"python","code":"raise ValueError"}`)
	var res launch.ExecResult
	if err := json.Unmarshal(r.body, &res); err != nil || r.status != 200 {
		t.Fatalf("%d %s: %v", r.status, r.body, err)
	}
	if e := res.Exception; e == nil || e.Type != "ValueError" || e.Message != "bad\nsecond line" || e.Traceback != pyCause {
		t.Fatalf("exception %+v", res.Exception)
	}
	if res.Stderr != pyCause || *res.ExitCode != 1 {
		t.Fatalf("stderr or exit changed: %+v", res)
	}
}
