package runners

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// runLaunch runs file as the sandbox launches a payload (launchArgs), in
// dir, with env and stdin, and returns stdout, stderr and the exit status
// (-N: killed by signal N).
func runLaunch(t *testing.T, lang, dir, file string, env []string, stdin []byte) (string, string, int) {
	t.Helper()
	argv := launchArgs(t, lang, file)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env, cmd.Stdin = dir, env, bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = -int(ws.Signal())
		}
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// TestWarmStubIsAColdLaunch: every program of the corpus gives the same
// stdout, stderr and exit status run cold (its code as the code file) and
// warm (the stub as the code file, the code in the header on stdin).
func TestWarmStubIsAColdLaunch(t *testing.T) {
	base := []string{"HOME=/tmp", "LANG=C.UTF-8", "PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=/tmp"}
	for _, c := range []struct {
		lang, name, code, stdin string
	}{
		{"python", "identity", "import os\nprint(__name__, sys.argv, repr(sys.path[0]), __file__, sorted(globals()), dict(os.environ))\nprint(sys.modules['__main__'].__dict__ is globals(), sys.excepthook is sys.__excepthook__)\n", ""},
		{"python", "exit 3", "import sys\nprint('x')\nsys.exit(3)\n", ""},
		{"python", "uncaught", "def f():\n    raise ValueError('boom')\nf()\n", ""},
		{"python", "syntax error", "def f(:\n  pass\n", ""},
		{"python", "indentation error", "if 1:\nprint(1)\n", ""},
		{"python", "KeyboardInterrupt", "raise KeyboardInterrupt\n", ""},
		{"python", "SystemExit message", "raise SystemExit('bye')\n", ""},
		{"python", "stdin", "import sys\nd = sys.stdin.read()\nprint(len(d), repr(d))\n", "line one\nline two\n"},
		{"python", "thread exception", "import threading\ndef g():\n    1/0\nt = threading.Thread(target=g)\nt.start(); t.join()\n", ""},
		{"python", "traceback module", "import traceback\ntry:\n    1/0\nexcept Exception:\n    traceback.print_exc()\n", ""},
		{"python", "warning", "import warnings\nwarnings.warn('careful')\n", ""},
		{"python", "fds", "import os\nprint(sorted(os.listdir('/proc/self/fd')))\n", ""},
		{"python", "pickle of a main class", "import pickle\nclass A: pass\nprint(type(pickle.loads(pickle.dumps(A()))).__module__)\n", ""},
		// The exit: what a cold launch does after the code's last line
		// (the warm stub ends the process itself, without the
		// interpreter's teardown).
		{"python", "atexit", "import atexit, sys\ndef bye(who, n=1):\n    print('atexit', who, n)\n    sys.stdout.write('no newline')\natexit.register(bye, 'x', n=2)\natexit.register(lambda: print('registered last, runs first'))\nprint('body')\n", ""},
		{"python", "atexit raises SystemExit", "import atexit\ndef h():\n    raise SystemExit(5)\natexit.register(h)\natexit.register(lambda: 1/0)\n", ""},
		{"python", "unflushed writes", "import sys, gzip\nf = open('plain.txt', 'w'); f.write('buffered, never closed')\nb = open('bin.txt', 'wb', buffering=1 << 16); b.write(b'raw buffered')\nz = gzip.GzipFile('z.gz', 'wb', mtime=0); z.write(b'gz')\nsys.stdout.write('partial line')\nsys.stderr.write('err partial')\n", ""},
		{"python", "stdout redirected to a file", "import sys\nsys.stdout = open('redirected.txt', 'w')\nprint('to the file')\n", ""},
		{"python", "non-daemon thread finishing late", "import threading, time, atexit\ndef late():\n    time.sleep(0.3)\n    print('late thread done')\nthreading.Thread(target=late).start()\natexit.register(lambda: print('atexit after the thread'))\nprint('main done')\n", ""},
		{"python", "__del__ at exit", "import sys\nclass D:\n    def __init__(self, n): self.n = n\n    def __del__(self): print('del', self.n, sys.stdout is sys.__stdout__, sys.path)\na = D('a')\nb = D('b')\nc = [D('in a list')]\ndef gen():\n    try:\n        yield 1\n    finally:\n        print('generator finally')\ng = gen(); next(g)\nclass Bad:\n    def __del__(self): raise ValueError('in __del__')\nbad = Bad()\nprint('end')\n", ""},
		{"python", "sys.exit frees the frames first", "import sys, atexit\nclass R:\n    def __del__(self): print('del local')\natexit.register(lambda: print('atexit'))\ndef main():\n    r = R()\n    sys.exit(3)\nmain()\n", ""},
		{"python", "garbage cycle with __del__", "import gc\nclass C:\n    def __del__(self): print('cycle collected')\nx = C(); x.self = x\ndel x\ngc.disable()\nprint('end')\n", ""},
		{"python", "daemon thread alive at exit", "import threading, time\ndef spin():\n    while True: time.sleep(0.01)\nthreading.Thread(target=spin, daemon=True).start()\nclass C:\n    def __del__(self): print('del with a daemon thread alive')\nc = C()\nprint('end')\n", ""},
		{"python", "uncaught with hooks and __del__", "import atexit\natexit.register(lambda: print('atexit after the traceback'))\nclass D:\n    def __del__(self): print('del D')\nd = D()\nf = open('out.txt', 'w'); f.write('written before the error')\ndef g():\n    try:\n        1/0\n    except ZeroDivisionError as e:\n        raise ValueError('chained') from e\ng()\n", ""},
		{"python", "own excepthook", "import sys\ndef hook(t, v, tb):\n    print('hook', t.__name__, v)\nsys.excepthook = hook\nraise ValueError('x')\n", ""},
		{"python", "exit with a message", "import atexit, sys\natexit.register(lambda: print('atexit'))\nsys.exit('a message')\n", ""},
		{"python", "exit 256", "import sys\nsys.exit(256)\n", ""},
		{"javascript", "exit hooks", "let n = 0\nprocess.on('beforeExit', (code) => { console.log('beforeExit', code, n); if (n++ < 2) setTimeout(() => console.log('more work', n), 20) })\nprocess.on('exit', (code) => { console.log('exit', code); process.exitCode = 4 })\nconsole.log('body')\n", ""},
		{"javascript", "exitCode and a file at exit", "process.on('exit', (c) => { console.log('exit', c); require('fs').writeFileSync('f.txt', 'written at exit') })\nprocess.exitCode = 2\n", ""},
		{"javascript", "pending writes", "process.on('exit', (c) => console.log('exit', c))\nrequire('fs').createWriteStream('s.txt').write('stream data')\nprocess.stdout.write('x'.repeat(200000))\n", ""},
		{"javascript", "error thrown late", "process.on('exit', (c) => console.log('exit listener', c))\nsetTimeout(() => { process.exitCode = 0; throw new Error('late') }, 10)\n", ""},
		{"javascript", "identity", "console.log(process.argv, require.main === module, __filename, module.id, Object.keys(module.exports), process.env)\n", ""},
		{"javascript", "exit 3", "process.exit(3)\n", ""},
		{"javascript", "stdin", "let d=''; process.stdin.on('data', c => d += c).on('end', () => console.log(JSON.stringify(d)))\n", "from stdin\n"},
		{"javascript", "fds", "console.log(require('fs').readdirSync('/proc/self/fd').length)\n", ""},
	} {
		t.Run(c.lang+" "+c.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, codeFiles[c.lang])
			if err := os.WriteFile(file, []byte(c.code), 0o600); err != nil {
				t.Fatal(err)
			}
			cout, cerr, ccode := runLaunch(t, c.lang, dir, file, base, []byte(c.stdin))
			cfiles := takeFiles(t, dir, file)
			stub, err := WarmSource(c.lang)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, []byte(stub), 0o600); err != nil {
				t.Fatal(err)
			}
			in := append(WarmHeader(c.code, nil), c.stdin...)
			wout, werr, wcode := runLaunch(t, c.lang, dir, file, base, in)
			if wout != cout || wcode != ccode {
				t.Errorf("stdout/exit differ:\n warm %d %q\n cold %d %q", wcode, wout, ccode, cout)
			}
			// an object's address differs between any two processes
			werr, cerr = hexAddr.ReplaceAllString(werr, "0x?"), hexAddr.ReplaceAllString(cerr, "0x?")
			if werr != cerr {
				t.Errorf("stderr differs:\n warm %q\n cold %q", werr, cerr)
			}
			if wfiles := takeFiles(t, dir, file); !maps.Equal(wfiles, cfiles) {
				t.Errorf("files differ:\n warm %q\n cold %q", wfiles, cfiles)
			}
		})
	}
}

var hexAddr = regexp.MustCompile(`0x[0-9a-f]{6,}`)

// takeFiles returns the files the code left in dir (all but the code file
// at skip), and removes them.
func takeFiles(t *testing.T, dir, skip string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if p == skip {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestWarmStubEnv: the request's env overlays the base, in the order the
// helper writes an environment (sorted by name), for the process and its
// children.
func TestWarmStubEnv(t *testing.T) {
	base := []string{"HOME=/tmp", "LANG=C.UTF-8", "PATH=/usr/bin:/bin", "TMPDIR=/tmp"}
	for _, lang := range []string{"python", "javascript"} {
		code := map[string]string{
			"python":     "import os, subprocess\nprint(list(os.environ.items()))\nprint(subprocess.run(['/usr/bin/env'], capture_output=True, text=True).stdout)\n",
			"javascript": "console.log(JSON.stringify(Object.entries(process.env)))\nconsole.log(require('child_process').execFileSync('/usr/bin/env').toString())\n",
		}[lang]
		dir := t.TempDir()
		file := filepath.Join(dir, codeFiles[lang])
		stub, _ := WarmSource(lang)
		if err := os.WriteFile(file, []byte(stub), 0o600); err != nil {
			t.Fatal(err)
		}
		wout, werr, _ := runLaunch(t, lang, dir, file, base, WarmHeader(code, map[string]string{"API_TOKEN": "t0k", "PATH": "/x"}))
		if err := os.WriteFile(file, []byte(code), 0o600); err != nil {
			t.Fatal(err)
		}
		cold := []string{"API_TOKEN=t0k", "HOME=/tmp", "LANG=C.UTF-8", "PATH=/x", "TMPDIR=/tmp"}
		cout, cerr, _ := runLaunch(t, lang, dir, file, cold, nil)
		if wout != cout || werr != cerr {
			t.Errorf("%s env:\n warm %q %q\n cold %q %q", lang, wout, werr, cout, cerr)
		}
		if !strings.Contains(wout, "API_TOKEN=t0k") {
			t.Errorf("%s: the request's env did not reach a child: %q", lang, wout)
		}
	}
}

// TestWarmStubExitsOnEOF: a warm sandbox destroyed unused (stdin closed
// before a header) exits 0 and writes nothing.
func TestWarmStubExitsOnEOF(t *testing.T) {
	for _, lang := range []string{"python", "javascript"} {
		dir := t.TempDir()
		file := filepath.Join(dir, codeFiles[lang])
		stub, _ := WarmSource(lang)
		if err := os.WriteFile(file, []byte(stub), 0o600); err != nil {
			t.Fatal(err)
		}
		out, errs, code := runLaunch(t, lang, dir, file, []string{"PATH=/usr/bin:/bin"}, nil)
		if out != "" || errs != "" || code != 0 {
			t.Errorf("%s on EOF: exit %d stdout %q stderr %q", lang, code, out, errs)
		}
	}
}
