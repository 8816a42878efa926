package runners

import (
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/kernel/protocol"
)

func TestJavaScriptStateAcrossExecs(t *testing.T) {
	k := startKernel(t, "javascript")
	k.exec("const x = 41; let seen = []; function inc(v) { return v + 1 }").mustOK(t)
	k.exec("const y = await Promise.resolve(inc(x)); seen.push(y)").mustOK(t)
	r := k.exec("console.log(y, seen.length, typeof require('fs').readFileSync)").mustOK(t)
	if r.stdout != "42 1 function\n" {
		t.Fatalf("stdout %q", r.stdout)
	}
	if r.result.ExecutionCount != 3 {
		t.Fatalf("execution_count %d", r.result.ExecutionCount)
	}
	// the completion value displays, like the REPL
	if r := k.exec("y * 2").mustOK(t); len(r.displays) != 1 || r.displays[0].Text() != "84" {
		t.Fatalf("displays %+v", r.displays)
	}
}

func TestJavaScriptProcessExit(t *testing.T) {
	k := startKernel(t, "javascript")
	k.exec("var kept = 'yes'").mustOK(t)
	r := k.exec("console.log('before'); process.exit(3); console.log('after')")
	if r.result.ExitCode != 3 || r.result.Exception != nil || r.stdout != "before\n" {
		t.Fatalf("exit %d exception %+v stdout %q", r.result.ExitCode, r.result.Exception, r.stdout)
	}
	r = k.exec("await new Promise(r => setTimeout(r, 10)); process.exit(4)")
	if r.result.ExitCode != 4 {
		t.Fatalf("async exit %d exception %+v", r.result.ExitCode, r.result.Exception)
	}
	if r := k.exec("console.log(kept)").mustOK(t); r.stdout != "yes\n" {
		t.Fatalf("after process.exit: %q", r.stdout)
	}
}

func TestJavaScriptInterrupt(t *testing.T) {
	k := startKernel(t, "javascript")
	for _, tc := range []struct{ code, entry string }{
		{"console.log('looping'); while (true) {}", ""},
		{"console.log('looping'); await new Promise(() => {})", ""},
		{"function spin() { console.log('looping'); while (true) {} }", "spin"},
	} {
		code := tc.code
		var opts []execOpt
		if tc.entry != "" {
			opts = append(opts, withEntry(tc.entry, ""))
		}
		id := k.send(code, opts...)
		if s, ok := k.next(30 * time.Second).(*protocol.Stream); !ok || s.Data != "looping\n" {
			t.Fatalf("first frame %#v", s)
		}
		time.Sleep(100 * time.Millisecond)
		if err := k.enc.Interrupt(id); err != nil {
			t.Fatal(err)
		}
		r := k.collect(id, 30*time.Second)
		if e := r.result.Exception; e == nil || !strings.Contains(e.Message, "interrupted") || r.result.ExitCode == 0 {
			t.Fatalf("%q: result %+v exception %+v", code, r.result, e)
		}
		if got := k.exec("console.log('alive')").mustOK(t).stdout; got != "alive\n" {
			t.Fatalf("after interrupt: %q", got)
		}
	}
}

func TestJavaScriptEntrypoint(t *testing.T) {
	k := startKernel(t, "javascript")
	r := k.exec("function main(inputs) { return {sum: inputs.a + inputs.b, isArray: Array.isArray(inputs.list)} }",
		withEntry("main", `{"a":2,"b":40,"list":[1]}`)).mustOK(t)
	if string(r.result.ReturnValue) != `{"sum":42,"isArray":true}` {
		t.Fatalf("return_value %s", r.result.ReturnValue)
	}
	r = k.exec("const handler = async ({name}) => { await new Promise(r => setTimeout(r, 20)); return ['hi', name] }",
		withEntry("handler", `{"name":"ada"}`)).mustOK(t)
	if string(r.result.ReturnValue) != `["hi","ada"]` {
		t.Fatalf("async return_value %s", r.result.ReturnValue)
	}
	testEntryFailures(t, k, []entryFailure{
		{"function bad() { return () => 1 }", "bad", "ReturnValueError"},
		{"function big() { return 1n }", "big", "ReturnValueError"},
		{"1", "nothing_here", "EntrypointError"},
		{"async function boom() { throw new RangeError('nope') }", "boom", "RangeError"},
	})
}

func TestJavaScriptExceptions(t *testing.T) {
	testExceptions(t, "javascript", "", []excCase{
		{"function f() { return null.x }\nf()", "TypeError", "Cannot read properties of null", "at f"},
		{"throw new RangeError('out of range')", "RangeError", "out of range", "RangeError: out of range"},
		{"await Promise.reject(new SyntaxError('async bad'))", "SyntaxError", "async bad", "async bad"},
		{"let = = 1", "SyntaxError", "Unexpected token", ""},
	})
}

func TestJavaScriptDisplay(t *testing.T) {
	k := startKernel(t, "javascript")
	png := "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
	r := k.exec(`console.log('first');
display('text/html', '<b>hi</b>');
display('application/json', {a: [1, 2]});
display('image/png', Buffer.from('` + png + `', 'base64'));
undefined`).mustOK(t)
	if len(r.displays) != 3 || r.displays[0].Text() != "<b>hi</b>" || string(r.displays[1].Data) != `{"a":[1,2]}` {
		t.Fatalf("displays %+v", r.displays)
	}
	if w, h := pngSize(t, r.displays[2].DataBase64); w != 1 || h != 1 {
		t.Fatalf("png %dx%d", w, h)
	}
	if got := r.beforeFirstDisplay(); got != "first\n" {
		t.Fatalf("stdout before the first display %q, want the output written before display()", got)
	}
	r = k.exec("display('application/x-sh', 'x')")
	if r.result.Exception == nil || r.result.Exception.Type != "TypeError" {
		t.Fatalf("bad mime: %+v", r.result.Exception)
	}
}

func TestJavaScriptStreamOrderAndRawFDs(t *testing.T) {
	testStreamOrderAndRawFDs(t, "javascript", `const fs = require('fs');
for (let i = 0; i < 200; i++) { console.log('out', i); console.error('err', i); }
fs.writeSync(1, 'raw-out\n'); fs.writeSync(2, 'raw-err\n');
fs.writeSync(1, Buffer.from([0xff, 0xe2, 0x82])); fs.writeSync(1, Buffer.from([0xac, 0x0a]));
require('child_process').execSync('echo child-out; echo child-err >&2', {stdio: 'inherit'});
`)
}

func TestJavaScriptLargeOutputStreams(t *testing.T) {
	testLargeOutput(t, "javascript", `const fs = require('fs');
const chunk = 'x'.repeat(1023) + '\n';
for (let i = 0; i < 10 * 1024; i++) process.stdout.write(chunk);
while (!fs.existsSync('gate')) await new Promise(r => setTimeout(r, 10));
console.log('done');
`)
}

func TestJavaScriptOnceMode(t *testing.T) {
	k := startKernel(t, "javascript", ModeEnv+"="+ModeOnce)
	r := k.exec("console.log(process.env."+ModeEnv+"); function main(i) { return i.v } ", withEntry("main", `{"v":[true]}`)).mustOK(t)
	if r.stdout != "undefined\n" || string(r.result.ReturnValue) != "[true]" {
		t.Fatalf("stdout %q return %s", r.stdout, r.result.ReturnValue)
	}
	if code := k.exited(10 * time.Second); code != 0 {
		t.Fatalf("runner exited %d", code)
	}
}

func TestJavaScriptEvaluatorDeath(t *testing.T) {
	k := startKernel(t, "javascript")
	r := k.exec("console.log('bye'); process.reallyExit(9)")
	if r.result.ExitCode != 9 || r.stdout != "bye\n" {
		t.Fatalf("exit %d stdout %q", r.result.ExitCode, r.stdout)
	}
	if code := k.exited(10 * time.Second); code != 9 {
		t.Fatalf("relay exited %d, want 9", code)
	}
}

// Timers that keep logging and displaying across execs: every frame must
// belong to the exec running when it is sent (protocol.Conn checks).
func TestJavaScriptBackgroundOutputStaysInsideExecs(t *testing.T) {
	testBackgroundOutput(t, "javascript",
		"let i = 0; setInterval(() => { i++; console.log('bg', i); if (i % 5 === 0) display('text/plain', String(i)) }, 1)",
		"await new Promise(r => setTimeout(r, 3))")
}

// An exec's stdin is the JavaScript code's fd 0, as it is Python's:
// readFileSync(0), process.stdin and child processes read it, and each
// exec reads its own.
func TestJavaScriptStdin(t *testing.T) {
	k := startKernel(t, "javascript")
	for _, tc := range []struct{ code, stdin, want string }{
		{"console.log(require('fs').readFileSync(0, 'utf8').toUpperCase())", "first\nline\n", "FIRST\nLINE\n\n"},
		{"let got = ''; for await (const c of process.stdin) got += c; console.log(JSON.stringify(got))", "second ✓", "\"second ✓\"\n"},
		{"console.log(JSON.stringify(require('fs').readFileSync(0, 'utf8')))", "", "\"\"\n"},
		{"process.stdout.write(require('child_process').execSync('cat', {stdio: ['inherit', 'pipe', 'inherit']}))", "to the child\n", "to the child\n"},
		{"got = ''; for await (const c of process.stdin) got += c; console.log(JSON.stringify(got))", "", "\"\"\n"},
	} {
		if r := k.exec(tc.code, withStdin(tc.stdin)).mustOK(t); r.stdout != tc.want {
			t.Fatalf("%q with stdin %q: stdout %q, want %q", tc.code, tc.stdin, r.stdout, tc.want)
		}
	}
	once := startKernel(t, "javascript", ModeEnv+"="+ModeOnce)
	r := once.exec("function main() { return require('fs').readFileSync(0, 'utf8') }", withStdin("in"), withEntry("main", "{}")).mustOK(t)
	if string(r.result.ReturnValue) != `"in"` {
		t.Fatalf("run-once stdin: return_value %s", r.result.ReturnValue)
	}
}
