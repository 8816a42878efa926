package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// One-shot kernel mode and the kernel semantics clients of other
// interpreters rely on, through the API.

// post sends a JSON request with ctx; safe from any goroutine (it never
// calls t.Fatal).
func (s *supervisor) post(ctx context.Context, path string, body any) (int, []byte, error) {
	enc, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, "POST", "http://sandboxd"+path, bytes.NewReader(enc))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

func pngOf(r execResult) []byte {
	for _, d := range r.Displays {
		if d.MIME == "image/png" {
			b, _ := base64.StdEncoding.DecodeString(d.DataBase64)
			return b
		}
	}
	return nil
}

// TestOneShotKernelChart: a one-shot plt.show() returns its PNG in mode
// "kernel" (a throwaway kernel, no session); process mode, the one-shot
// default, keeps its semantics (a plain interpreter: no displays).
func TestOneShotKernelChart(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	chart := "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()\nprint('drawn')"
	req := py(chart)
	req["mode"] = "kernel"
	r := s.exec(req)
	if png := pngOf(r); !exitIs(r, 0) || r.Stdout != "drawn\n" || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("one-shot kernel chart: exit %v stdout %q displays %d", deref(r.ExitCode), r.Stdout, len(r.Displays))
	}
	if r = s.exec(py(chart)); !exitIs(r, 0) || len(r.Displays) != 0 || r.Stdout != "drawn\n" {
		t.Fatalf("one-shot process exec: exit %v stdout %q displays %d, want no displays", deref(r.ExitCode), r.Stdout, len(r.Displays))
	}
	// A throwaway kernel keeps nothing: each one-shot exec starts afresh,
	// with the exec's env and the user's own line numbers.
	req = lang("javascript", "globalThis.seen = (globalThis.seen ?? 0) + 1\nconsole.log(seen, process.env.GREETING)\n\nthrow new Error('line 4')")
	req["mode"], req["env"] = "kernel", map[string]string{"GREETING": "hi"}
	for i := 0; i < 2; i++ {
		r = s.exec(req)
		if r.Stdout != "1 hi\n" || r.Exception == nil || !regexp.MustCompile(`exec-\d+:4:`).MatchString(r.Exception.Traceback) {
			t.Fatalf("javascript one-shot kernel run %d: stdout %q exception %+v", i+1, r.Stdout, r.Exception)
		}
	}
	req = lang("shell", "echo hi")
	req["mode"] = "kernel"
	if status, body := s.do("POST", "/v1/exec", req); status != 400 || !strings.Contains(string(body), "shell") {
		t.Fatalf("shell in kernel mode: %d %s", status, body)
	}
}

// TestKernelExecOrder: execs in one kernel run one at a time in the order
// they arrived: five concurrent `counter += 1` (each sent 100 ms after the
// last, each running longer than that) print exactly 1..5, in arrival
// order. An exec waits its turn up to its own timeout_ms (then 409).
func TestKernelExecOrder(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	sess := s.kernelSession(t)
	if r := s.kexec(t, sess.ID, py("counter = 0")); !exitIs(r, 0) {
		t.Fatal("setup exec failed")
	}
	const n = 5
	got := make([]string, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, body, err := s.post(context.Background(), "/v1/sessions/"+sess.ID+"/exec",
				py("import time\ncounter += 1\nmine = counter\ntime.sleep(0.4)\nprint(mine)"))
			var r execResult
			if err != nil || status != 200 || json.Unmarshal(body, &r) != nil {
				got[i] = fmt.Sprintf("status %d err %v: %.200s", status, err, body)
				return
			}
			got[i] = strings.TrimSpace(r.Stdout)
		}()
		time.Sleep(100 * time.Millisecond)
	}
	wg.Wait()
	if want := []string{"1", "2", "3", "4", "5"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("in arrival order the execs printed %q, want %q", got, want)
	}
}

// TestKernelDisconnectInterrupts: a client that goes away mid-exec
// interrupts the exec; the kernel stays usable, with its state, for the
// next exec.
func TestKernelDisconnectInterrupts(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	sess := s.kernelSession(t)
	for _, c := range []struct{ lang, set, loop, get string }{
		{"python", "kept = 41", "import time\nwhile True:\n    time.sleep(0.05)", "print(kept + 1)"},
		{"javascript", "var kept = 41", "await new Promise(r => setTimeout(r, 60000))", "console.log(kept + 1)"},
	} {
		first := s.kexec(t, sess.ID, lang(c.lang, c.set))
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		start := time.Now()
		_, _, err := s.post(ctx, "/v1/sessions/"+sess.ID+"/exec", lang(c.lang, c.loop))
		cancel()
		if err == nil {
			t.Fatalf("%s: the endless exec answered", c.lang)
		}
		r := s.kexec(t, sess.ID, lang(c.lang, c.get))
		if !exitIs(r, 0) || r.Stdout != "42\n" || r.Kernel == nil || r.Kernel.ID != first.Kernel.ID || r.Kernel.Restarted {
			t.Fatalf("%s: the exec after the disconnect: exit %v stdout %q kernel %+v (first %+v)", c.lang, deref(r.ExitCode), r.Stdout, r.Kernel, first.Kernel)
		}
		if took := time.Since(start); took > 15*time.Second {
			t.Fatalf("%s: the next exec ran %s after the disconnect", c.lang, took)
		}
	}
}

// TestKernelProtocolViolationKillsIt: a session kernel whose code writes
// garbage to the kernel channel between execs is killed at once (it stops
// running: its heartbeat file stops growing), not only marked broken until
// the session's next exec; another session's kernel is not touched.
func TestKernelProtocolViolationKillsIt(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	bad, other := s.kernelSession(t), s.kernelSession(t)
	if r := s.kexec(t, other.ID, py("kept = 7")); !exitIs(r, 0) {
		t.Fatal("the other session's first exec failed")
	}
	// A background thread beats into a file every 50 ms and, once the
	// exec is over, writes a non-frame line to the runner's channel.
	r := s.kexec(t, bad.ID, py(`import gc, os, threading, time
chan = next(o for o in gc.get_objects() if type(o).__name__ == "Channel")
def run():
    time.sleep(0.5)
    os.write(chan.fd, b"garbage\n")
    while True:
        with open("beats", "a") as f:
            f.write(".")
        time.sleep(0.05)
threading.Thread(target=run, daemon=True).start()`))
	if !exitIs(r, 0) {
		t.Fatalf("the exec that plants the writer failed: %+v", r)
	}
	time.Sleep(2 * time.Second)
	beats := func() int {
		status, body := s.do("GET", "/v1/sessions/"+bad.ID+"/files/beats", nil)
		if status == 404 {
			return 0
		}
		if status != 200 {
			t.Fatalf("read beats: %d %s", status, body)
		}
		return len(body)
	}
	first := beats()
	time.Sleep(time.Second)
	if again := beats(); again != first {
		t.Fatalf("the kernel that broke the protocol still runs: its heartbeat went from %d to %d bytes in a second", first, again)
	}
	if r := s.kexec(t, other.ID, py("print(kept)")); !exitIs(r, 0) || r.Stdout != "7\n" || r.Kernel.Restarted {
		t.Fatalf("the other session's kernel was touched: %+v", r)
	}
	if r := s.kexec(t, bad.ID, py("print('fresh')")); !exitIs(r, 0) || r.Stdout != "fresh\n" || r.Kernel == nil || !r.Kernel.Restarted {
		t.Fatalf("the broken session's next exec: %+v", r)
	}
}

// TestSessionShellEnvPerExec: a shell exec in a session gets its env for
// that exec only, as a kernel exec does.
func TestSessionShellEnvPerExec(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	sess := s.kernelSession(t)
	req := lang("shell", "echo ${FOO:--}")
	req["env"] = map[string]string{"FOO": "bar"}
	if r := s.kexec(t, sess.ID, req); !exitIs(r, 0) || r.Stdout != "bar\n" {
		t.Fatalf("shell with env: %+v", r)
	}
	if r := s.kexec(t, sess.ID, lang("shell", "echo ${FOO:--}")); !exitIs(r, 0) || r.Stdout != "-\n" {
		t.Fatalf("shell after the exec with env: %+v", r)
	}
}
