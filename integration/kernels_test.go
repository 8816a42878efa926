package integration

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
)

// Kernels (issue 11): session kernels, run-once process execs, shell,
// rich outputs, code-node calls, streaming -- under real privilege
// separation.

func (s *supervisor) kexec(t *testing.T, id string, req map[string]any) execResult {
	t.Helper()
	r := s.sessionExec(t, id, req)
	t.Logf("exec %s: exit %v signal %v timed_out %v oom %v kernel %+v exc %+v stdout %q stderr %.300q",
		req["language"], deref(r.ExitCode), deref(r.Signal), r.TimedOut, r.OOMKilled, r.Kernel, r.Exception, r.Stdout, r.Stderr)
	return r
}

// kernelSession creates a session that is removed when the test ends
// (sessions are capped at --max-sessions, and other tests count on it).
func (s *supervisor) kernelSession(t *testing.T) sessionObj {
	t.Helper()
	sess := s.createSession(t, nil)
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			s.do("DELETE", "/v1/sessions/"+sess.ID, nil)
		}
		s.in.dropSession(sess.ID)
	})
	return sess
}

func exitIs(r execResult, code int) bool { return r.ExitCode != nil && *r.ExitCode == code }

func lang(l, code string) map[string]any { return map[string]any{"language": l, "code": code} }

func TestKernelStateAcrossExecs(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	for _, tc := range []struct{ lang, a, b, c, want string }{
		{"python", "x = 40", "x += 1", "print(x + 1)", "42\n"},
		{"javascript", "const x = 40; let y = 1", "y += 1", "console.log(x + y)", "42\n"},
	} {
		t.Run(tc.lang, func(t *testing.T) {
			sess := s.kernelSession(t)
			var id string
			for i, code := range []string{tc.a, tc.b, tc.c} {
				r := s.kexec(t, sess.ID, lang(tc.lang, code))
				if !exitIs(r, 0) || r.Kernel == nil || r.Kernel.Restarted || r.Kernel.ExecutionCount != int64(i+1) {
					t.Fatalf("exec %d: %+v", i, r)
				}
				if id == "" {
					id = r.Kernel.ID
				} else if r.Kernel.ID != id {
					t.Fatalf("kernel changed: %s then %s", id, r.Kernel.ID)
				}
				if i == 2 && r.Stdout != tc.want {
					t.Fatalf("stdout %q, want %q", r.Stdout, tc.want)
				}
			}
			// GET lists the kernel.
			status, body := s.do("GET", "/v1/sessions/"+sess.ID, nil)
			var v api.Session
			if status != 200 || json.Unmarshal(body, &v) != nil || len(v.Kernels) != 1 || v.Kernels[0].Language != tc.lang || v.Kernels[0].ExecutionCount != 3 {
				t.Fatalf("session: %d %s", status, body)
			}
			t.Logf("kernel memory %d bytes", v.Kernels[0].MemoryBytes)
		})
	}
}

func TestKernelExitAndTimeout(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	for _, tc := range []struct{ lang, set, exit, loop, get string }{
		{"python", "v = 7", "import sys; sys.exit(3)", "while True: pass", "print(v if 'v' in globals() else 'fresh')"},
		{"javascript", "var v = 7", "process.exit(3)", "while (true) {}", "console.log(typeof v === 'undefined' ? 'fresh' : v)"},
	} {
		t.Run(tc.lang, func(t *testing.T) {
			sess := s.kernelSession(t)
			s.kexec(t, sess.ID, lang(tc.lang, tc.set))
			r := s.kexec(t, sess.ID, lang(tc.lang, tc.exit))
			if !exitIs(r, 3) {
				t.Fatalf("exit: %+v", r)
			}
			r = s.kexec(t, sess.ID, lang(tc.lang, tc.get))
			if r.Stdout != "7\n" || r.Kernel.Restarted {
				t.Fatalf("the kernel did not survive the exit: %+v", r)
			}
			req := lang(tc.lang, tc.loop)
			req["timeout_ms"] = 1000
			start := time.Now()
			r = s.kexec(t, sess.ID, req)
			if !r.TimedOut || time.Since(start) > 10*time.Second {
				t.Fatalf("loop: %+v after %s", r, time.Since(start))
			}
			r = s.kexec(t, sess.ID, lang(tc.lang, tc.get))
			if !exitIs(r, 0) || r.Stdout != "fresh\n" || r.Kernel == nil || !r.Kernel.Restarted {
				t.Fatalf("after the timeout: %+v", r)
			}
			r = s.kexec(t, sess.ID, lang(tc.lang, tc.get))
			if r.Kernel.Restarted {
				t.Fatalf("restarted reported twice: %+v", r)
			}
		})
	}
}

func TestShellExec(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	r := s.exec(lang("shell", "echo $HOME; ls /"))
	if !exitIs(r, 0) || !strings.HasPrefix(r.Stdout, "/workspace\n") || strings.Contains(r.Stdout, "root") || !strings.Contains(r.Stdout, "usr") {
		t.Fatalf("shell one-shot: %+v", r)
	}
	t.Logf("ls /: %q", r.Stdout)
	sess := s.kernelSession(t)
	s.kexec(t, sess.ID, lang("python", "open('made-by-python.txt', 'w').write('hello from python')"))
	r = s.kexec(t, sess.ID, lang("shell", "cat made-by-python.txt; exit 4"))
	if !exitIs(r, 4) || r.Stdout != "hello from python" || r.Kernel != nil {
		t.Fatalf("shell in session: %+v", r)
	}
	status, body := s.do("POST", "/v1/sessions/"+sess.ID+"/exec", map[string]any{"language": "shell", "code": "true", "mode": "kernel"})
	if status != 400 {
		t.Fatalf("shell kernel: %d %s", status, body)
	}
	// A one-shot exec may ask for a throwaway kernel: its last expression
	// comes back as a display (TestOneShotKernelChart has the chart).
	status, body = s.do("POST", "/v1/exec", map[string]any{"language": "python", "code": "1", "mode": "kernel"})
	if status != 200 || !strings.Contains(string(body), `"displays":[{"mime":"text/plain","data":"1"}]`) {
		t.Fatalf("one-shot kernel: %d %s", status, body)
	}
}

func TestProcessModeRunner(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	r := s.exec(map[string]any{"language": "python", "code": "print(input())\ndef main():\n    raise ValueError('bad')", "stdin": "in\n", "entrypoint": "main"})
	if !exitIs(r, 1) || r.Stdout != "in\n" || r.Exception == nil || r.Exception.Type != "ValueError" || !strings.Contains(r.Stderr, "ValueError") {
		t.Fatalf("python one-shot: %+v", r)
	}
	r = s.exec(map[string]any{"language": "python", "code": "import sys; sys.exit(5)"})
	if !exitIs(r, 5) || r.Exception != nil {
		t.Fatalf("python exit: %+v", r)
	}
	r = s.exec(map[string]any{"language": "python", "code": "def main(a, b):\n    return {'sum': a + b}", "entrypoint": "main", "inputs": map[string]any{"a": 2, "b": 40}})
	if !exitIs(r, 0) || string(r.ReturnValue) != `{"sum": 42}` && string(r.ReturnValue) != `{"sum":42}` {
		t.Fatalf("python code node: %+v (%s)", r, r.ReturnValue)
	}
	r = s.exec(map[string]any{"language": "javascript", "code": "async function main(inp) { await new Promise(r => setTimeout(r, 10)); return {sum: inp.a + inp.b} }", "entrypoint": "main", "inputs": map[string]any{"a": 2, "b": 40}})
	if !exitIs(r, 0) || strings.ReplaceAll(string(r.ReturnValue), " ", "") != `{"sum":42}` {
		t.Fatalf("js code node: %+v (%s)", r, r.ReturnValue)
	}
	req := py("while True: pass")
	req["timeout_ms"] = 1000
	r = s.exec(req)
	if !r.TimedOut || r.Signal == nil {
		t.Fatalf("timeout: %+v", r)
	}
	if left := s.execProcesses(); len(left) > 0 {
		t.Fatalf("processes left: %v", left)
	}
}

// Every python and javascript exec reports an uncaught exception, a
// process-mode one too: it runs as a plain interpreter, and the supervisor
// derives the exception from the end of its stderr.
func TestProcessExecException(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	sess := s.kernelSession(t)
	for _, tc := range []struct {
		name      string
		req       map[string]any
		typ, msg  string
		traceback string
	}{
		{"python one-shot", py("def f():\n    return 1/0\nf()"), "ZeroDivisionError", "division by zero", "line 2, in f"},
		{"python chained", py("try:\n    {}['k']\nexcept KeyError as e:\n    raise ValueError('bad') from e"), "ValueError", "bad", "KeyError: 'k'"},
		{"python syntax", py("def (:"), "SyntaxError", "invalid syntax", "def (:"},
		{"javascript one-shot", lang("javascript", "function f() { return null.x }\nf()"), "TypeError", "Cannot read properties of null (reading 'x')", "at f ("},
		{"javascript rejection", lang("javascript", "Promise.reject(new RangeError('late'))"), "RangeError", "late", "RangeError: late"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.exec(tc.req)
			e := r.Exception
			if !exitIs(r, 1) || e == nil || e.Type != tc.typ || e.Message != tc.msg || !strings.Contains(e.Traceback, tc.traceback) {
				t.Fatalf("exit %v exception %+v stderr %q", deref(r.ExitCode), e, r.Stderr)
			}
		})
	}
	req := py("import sys\nprint('Traceback (most recent call last):', file=sys.stderr)\nsys.exit(2)")
	if r := s.exec(req); !exitIs(r, 2) || r.Exception != nil {
		t.Fatalf("a plain non-zero exit: %+v", r)
	}
	req = lang("python", "raise KeyError('p')")
	req["mode"] = "process"
	if r := s.kexec(t, sess.ID, req); r.Exception == nil || r.Exception.Type != "KeyError" || r.Kernel != nil {
		t.Fatalf("session process-mode exec: %+v", r)
	}
}

// The runners' sync markers never reach a result: run-once execs that time
// out while flooding output and displays under a tight CPU limit (where
// the interrupt lands at any point of the runner's work, or before the exec
// began), and a forked copy of the runner that returns into it.
func TestRunnerMarkersUnderThrottling(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{extra: []string{"--cpus", "0.1"}})
	flood := "for i in range(10**9):\n    print(i)\n    if i % 50 == 0: display(i)\ndef main(): return 1\n"
	for i := 0; i < 4; i++ {
		req := map[string]any{"language": "python", "code": flood, "entrypoint": "main", "timeout_ms": 700 + 300*i}
		r := s.exec(req)
		if !r.TimedOut || strings.Contains(r.Stdout+r.Stderr, "sandboxd-sync") {
			t.Fatalf("run %d: timed_out %v, stdout ...%q stderr %q", i, r.TimedOut, tail(r.Stdout, 300), tail(r.Stderr, 300))
		}
	}
	fork := "import os\nif os.fork() == 0:\n    print('child', flush=True)\nelse:\n    print('parent', flush=True)\ndef main(): return 1\n"
	r := s.exec(map[string]any{"language": "python", "code": fork, "entrypoint": "main", "timeout_ms": 20000})
	if !exitIs(r, 0) || string(r.ReturnValue) != "1" || strings.Contains(r.Stdout+r.Stderr, "sandboxd-sync") || !strings.Contains(r.Stdout, "parent") {
		t.Fatalf("fork: %+v", r)
	}
}

func tail(s string, n int) string { return s[max(0, len(s)-n):] }

// A JavaScript kernel exec reads its stdin on fd 0, as Python's input() does.
func TestKernelJavaScriptStdin(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	sess := s.kernelSession(t)
	req := lang("javascript", "console.log(require('fs').readFileSync(0, 'utf8').trim().toUpperCase())")
	req["stdin"] = "hello kernel\n"
	if r := s.kexec(t, sess.ID, req); r.Stdout != "HELLO KERNEL\n" || r.Kernel == nil {
		t.Fatalf("first: %+v", r)
	}
	req = lang("javascript", "let got = ''; for await (const c of process.stdin) got += c; console.log(JSON.stringify(got))")
	req["stdin"] = "second"
	if r := s.kexec(t, sess.ID, req); r.Stdout != "\"second\"\n" {
		t.Fatalf("second: %+v", r)
	}
}

func TestKernelCodeNodeInSession(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	sess := s.kernelSession(t)
	r := s.kexec(t, sess.ID, map[string]any{"language": "python", "code": "def main(name):\n    return {'hi': name}", "entrypoint": "main", "inputs": map[string]any{"name": "ana"}})
	if !exitIs(r, 0) || strings.ReplaceAll(string(r.ReturnValue), " ", "") != `{"hi":"ana"}` {
		t.Fatalf("python: %+v", r)
	}
	r = s.kexec(t, sess.ID, map[string]any{"language": "javascript", "code": "const main = async ({n}) => n * 2", "entrypoint": "main", "inputs": map[string]any{"n": 21}})
	if !exitIs(r, 0) || string(r.ReturnValue) != "42" {
		t.Fatalf("javascript: %+v", r)
	}
}

func TestKernelIsolationBetweenSessions(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	a, b := s.kernelSession(t), s.kernelSession(t)
	s.kexec(t, a.ID, lang("python", "secret = 'A'\nopen('a.txt','w').write('A')"))
	r := s.kexec(t, b.ID, lang("python", "import os\nprint('secret' in globals(), os.path.exists('a.txt'), sorted(os.listdir('.')))"))
	if r.Stdout != "False False []\n" {
		t.Fatalf("session b sees a: %+v", r)
	}
	ra := s.kexec(t, a.ID, lang("python", "print(secret)"))
	if ra.Stdout != "A\n" || ra.Kernel.ID == r.Kernel.ID {
		t.Fatalf("a: %+v", ra)
	}
}

func TestKernelRestartEndpointAndDelete(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	sess := s.kernelSession(t)
	r := s.kexec(t, sess.ID, lang("python", "z = 1"))
	status, body := s.do("POST", "/v1/sessions/"+sess.ID+"/kernels/python/restart", nil)
	var k api.Kernel
	if status != 200 || json.Unmarshal(body, &k) != nil || k.ID == r.Kernel.ID || k.Language != "python" {
		t.Fatalf("restart: %d %s", status, body)
	}
	r = s.kexec(t, sess.ID, lang("python", "print('z' in globals())"))
	if r.Stdout != "False\n" || r.Kernel.ID != k.ID {
		t.Fatalf("after restart: %+v", r)
	}
	if status, body := s.do("DELETE", "/v1/sessions/"+sess.ID, nil); status != 204 {
		t.Fatalf("delete: %d %s", status, body)
	}
	waitNoProcesses(t, in, s)
}

func waitNoProcesses(t *testing.T, in *installation, s *supervisor) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := s.execProcesses()
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes left: %v", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestKernelMemoryBomb(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{extra: []string{"--memory", "256M"}})
	for _, tc := range []struct{ lang, bomb string }{
		{"python", "b = []\nwhile True: b.append(bytearray(16 << 20))"},
		{"javascript", "const b = []; while (true) b.push(Buffer.alloc(16 << 20, 1))"},
	} {
		t.Run(tc.lang, func(t *testing.T) {
			sess := s.kernelSession(t)
			s.kexec(t, sess.ID, lang(tc.lang, "1"))
			req := lang(tc.lang, tc.bomb)
			req["timeout_ms"] = 20000
			r := s.kexec(t, sess.ID, req)
			if !r.OOMKilled {
				t.Fatalf("bomb: %+v", r)
			}
			r = s.kexec(t, sess.ID, lang(tc.lang, "1"))
			if !exitIs(r, 0) || !r.Kernel.Restarted {
				t.Fatalf("after the bomb: %+v", r)
			}
		})
	}
}

func TestKernelChannelAbuse(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	sess := s.kernelSession(t)
	rssBefore := peakRSSKB(t, s.cmd.Process.Pid)
	for _, tc := range []struct{ name, code string }{
		// The runner's channel is its private fd; caller code finds it
		// as the fd the runner moved fd 1 to (the lowest fd it holds
		// open on the stdout pipe). Writing garbage there breaks the
		// protocol; so does a 1 GiB line.
		{"garbage", channelWriter + "w(b'this is not json\\n')"},
		{"1 GiB line", channelWriter + "chunk = b'x' * (1 << 20)\nw(b'{\"type\":\"stream\",\"id\":\"')\nfor _ in range(1024): w(chunk)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.kexec(t, sess.ID, lang("python", tc.code))
			if r.Exception == nil || r.Exception.Type != "KernelProtocolError" || r.Signal == nil {
				t.Fatalf("abuse: %+v", r)
			}
			r = s.kexec(t, sess.ID, lang("python", "print('ok')"))
			if r.Stdout != "ok\n" || !r.Kernel.Restarted {
				t.Fatalf("after: %+v", r)
			}
		})
	}
	rssAfter := peakRSSKB(t, s.cmd.Process.Pid)
	t.Logf("supervisor VmHWM before %d KiB, after %d KiB", rssBefore, rssAfter)
	if rssAfter > 200<<10 {
		t.Fatalf("supervisor peak RSS %d KiB", rssAfter)
	}
}

// channelWriter finds the kernel channel's write end (the runner's
// Channel object) from caller code, as a hostile payload would.
const channelWriter = `
import gc, os
ch = [o for o in gc.get_objects() if type(o).__name__ == 'Channel'][0].fd
def w(b):
    while b:
        b = b[os.write(ch, b):]
`

// peakRSSKB is a process's VmHWM.
func peakRSSKB(t *testing.T, pid int) int64 {
	t.Helper()
	n, _ := strconv.ParseInt(strings.Fields(statusField(t, pid, "VmHWM"))[0], 10, 64)
	return n
}

// The supervisor killed with SIGKILL while a kernel runs: the next one
// restarts the kernel on the session's next exec, the workspace is intact,
// and the dead kernel's launch trail is closed in the audit log (it has no
// reap: an interrupted record that says the supervisor restarted).
func TestKernelSurvivesSupervisorRestart(t *testing.T) {
	in := setup(t)
	log := auditLogPath(in)
	opts := supervisorOpts{extra: []string{"--audit-log", log}}
	s := in.startSupervisor(t, opts)
	sess := s.kernelSession(t)
	first := s.kexec(t, sess.ID, lang("python", "q = 1\nopen('kept.txt','w').write('kept')"))
	if first.Kernel == nil {
		t.Fatalf("no kernel: %+v", first)
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	s2 := in.startSupervisor(t, opts)
	r := s2.kexec(t, sess.ID, lang("python", "print('q' in globals(), open('kept.txt').read())"))
	if r.Stdout != "False kept\n" || r.Kernel == nil || !r.Kernel.Restarted {
		t.Fatalf("after restart: %+v", r)
	}
	trail := auditExec(auditRead(t, log), first.Kernel.ID)
	if got := auditSteps(trail); got != "prepare enter network seccomp drop exec interrupted!" {
		t.Fatalf("trail of the killed kernel %s: %q", first.Kernel.ID, got)
	}
	end := trail[len(trail)-1]
	if end.FactMap()["kernel"] != true || !strings.HasPrefix(end.Error, "supervisor restarted") {
		t.Fatalf("its interrupted record: %+v", end)
	}
}

func TestKernelRichOutputs(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	sess := s.kernelSession(t)
	s.kexec(t, sess.ID, lang("python", "import pandas as pd\ndf = pd.DataFrame({'城市': ['北京', '上海'], 'n': [3, 5]})"))
	r := s.kexec(t, sess.ID, lang("python", "df"))
	if len(r.Displays) < 1 || r.Displays[0].MIME != "text/html" || !strings.Contains(string(r.Displays[0].Data), "<table") {
		t.Fatalf("DataFrame: %+v", r.Displays)
	}
	r = s.kexec(t, sess.ID, lang("python", "import matplotlib.pyplot as plt\nfig = plt.figure(figsize=(4, 3), dpi=50)\nplt.bar(df['城市'], df['n'])"))
	var png []byte
	for _, d := range r.Displays {
		if d.MIME == "image/png" {
			png, _ = base64.StdEncoding.DecodeString(d.DataBase64)
		}
	}
	if len(png) < 24 || !bytes.Equal(png[:8], []byte("\x89PNG\r\n\x1a\n")) || string(png[12:16]) != "IHDR" {
		t.Fatalf("no PNG: %+v", r)
	}
	w, h := binary.BigEndian.Uint32(png[16:20]), binary.BigEndian.Uint32(png[20:24])
	if w != 200 || h != 150 {
		t.Fatalf("PNG %dx%d, want 200x150", w, h)
	}
}

// streamExec posts an exec asking for NDJSON and returns the response.
func (s *supervisor) streamExec(t *testing.T, path string, req map[string]any) *http.Response {
	t.Helper()
	b, _ := json.Marshal(req)
	hr, _ := http.NewRequest("POST", "http://sandboxd"+path, bytes.NewReader(b))
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/x-ndjson")
	resp, err := s.client.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header)
	}
	return resp
}

func TestStreaming(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	sess := s.kernelSession(t)
	for _, tc := range []struct {
		name, path string
		req        map[string]any
	}{
		{"kernel", "/v1/sessions/" + sess.ID + "/exec", py("import time\nprint('first', time.time(), flush=True)\ntime.sleep(2)\nprint('second')")},
		{"one-shot python", "/v1/exec", py("import time\nprint('first', time.time(), flush=True)\ntime.sleep(2)\nprint('second')")},
		{"shell", "/v1/exec", lang("shell", "echo first $(date +%s.%N); sleep 2; echo second")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := s.streamExec(t, tc.path, tc.req)
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(nil, 64<<20)
			var types []string
			var firstLatency time.Duration
			var out string
			for sc.Scan() {
				var ev map[string]any
				if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
					t.Fatalf("line %q: %v", sc.Bytes(), err)
				}
				typ, _ := ev["type"].(string)
				types = append(types, typ)
				// The first line may come in several chunks: its latency is
				// measured when it is whole.
				if data, _ := ev["data"].(string); typ == "stdout" && firstLatency == 0 {
					out += data
					if line, _, ok := strings.Cut(out, "\n"); ok && strings.HasPrefix(line, "first ") {
						printed, _ := strconv.ParseFloat(strings.Fields(line)[1], 64)
						firstLatency = time.Since(time.Unix(0, int64(printed*1e9)))
					}
				}
			}
			t.Logf("%s: events %v; first line arrived %s after it was printed", tc.name, types, firstLatency)
			if len(types) < 3 || types[len(types)-1] != "result" || firstLatency <= 0 || firstLatency > time.Second {
				t.Fatalf("events %v, first-line latency %s", types, firstLatency)
			}
		})
	}
}

// TestStreamDisconnectKills: a client that hangs up on a streamed one-shot
// exec ends all of it. (In a session's kernel a hang-up interrupts the exec
// and the kernel keeps its state: TestKernelDisconnectInterrupts.)
func TestStreamDisconnectKills(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	for _, tc := range []struct{ name, path, lang, code string }{
		{"one-shot python", "/v1/exec", "python", "import time\nprint('go', flush=True)\ntime.sleep(60)"},
		{"one-shot javascript", "/v1/exec", "javascript", "console.log('go'); setTimeout(() => {}, 60000)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := lang(tc.lang, tc.code)
			req["timeout_ms"] = 30000
			resp := s.streamExec(t, tc.path, req)
			sc := bufio.NewScanner(resp.Body)
			if !sc.Scan() {
				t.Fatal("no first event")
			}
			resp.Body.Close()
			waitNoProcesses(t, in, s)
		})
	}
}

// TestKernelAudit: each exec in a kernel is accept, decide, kernel_exec,
// reap under its own exec id, linked to the kernel's launch id, whose own
// trail is a launch's (prepare, the helper's steps, reap when stopped); a
// run-once process exec is an ordinary launch; every record is as the
// typed schema says.
func TestKernelAudit(t *testing.T) {
	in := setup(t)
	log := auditLogPath(in)
	s := in.startSupervisor(t, supervisorOpts{extra: []string{"--audit-log", log}})
	sess := s.kernelSession(t)
	k1 := s.kexec(t, sess.ID, map[string]any{"language": "python", "code": "print(1)", "artifacts": []string{"*.txt"}})
	req := lang("python", "while True: pass")
	req["timeout_ms"] = 500
	k2 := s.kexec(t, sess.ID, req)
	once := s.exec(map[string]any{"language": "python", "code": "def main(): return 1", "entrypoint": "main"})
	sh := s.exec(lang("shell", "echo hi"))
	if status, body := s.do("DELETE", "/v1/sessions/"+sess.ID, nil); status != 204 {
		t.Fatalf("delete: %d %s", status, body)
	}
	recs := auditRead(t, log)
	for _, tc := range []struct{ id, want string }{
		{k1.ID, "accept decide kernel_exec reap artifacts"},
		{k2.ID, "accept decide kernel_exec reap"},
		{k1.Kernel.ID, "prepare enter network seccomp drop exec reap"},
		{once.ID, "accept decide prepare enter network seccomp drop exec reap"},
		{sh.ID, "accept decide prepare enter network seccomp drop exec reap"},
	} {
		if got := auditSteps(auditExec(recs, tc.id)); got != tc.want {
			t.Errorf("trail of %s: %q, want %q", tc.id, got, tc.want)
		}
	}
	for _, r := range auditExec(recs, k1.ID) {
		if r.Step == "kernel_exec" && r.FactMap()["kernel_id"] != k1.Kernel.ID {
			t.Errorf("kernel_exec record %+v does not name the kernel %s", r, k1.Kernel.ID)
		}
	}
}
