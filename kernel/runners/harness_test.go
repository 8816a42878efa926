package runners

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/kernel/protocol"
	"github.com/sandboxd/sandboxd/nsinit/config"
)

// launchArgs is the argv nsinit's default config runs the payload with
// (the real /usr/bin/python3 and /usr/bin/node, Python through its
// bootstrap), with the code file at codePath instead of under
// /run/sandboxd: the runners are tested as the sandbox starts them.
func launchArgs(t testing.TB, lang, codePath string) []string {
	t.Helper()
	rt, ok := config.Default("", "", "").Runtimes[lang]
	if !ok {
		t.Fatalf("nsinit has no runtime %q", lang)
	}
	inSandbox := config.SandboxDir + "/" + rt.CodeFile
	var args []string
	for _, a := range rt.Argv[1:] {
		args = append(args, strings.ReplaceAll(a, inSandbox, codePath))
	}
	if !slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, codePath) }) {
		t.Fatalf("runtime %q argv %q does not name %s", lang, rt.Argv, inSandbox)
	}
	return append([]string{rt.Argv[0]}, args...)
}

var codeFiles = map[string]string{"python": "main.py", "javascript": "main.js"}

// kernel is a runner started outside the sandbox, driven through
// kernel/protocol exactly as the supervisor drives it.
type kernel struct {
	t       testing.TB
	lang    string
	dir     string // its working directory, standing in for /workspace
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	enc     *protocol.Encoder
	conn    *protocol.Conn
	diag    *lockedBuffer
	ready   *protocol.Ready
	nextID  int
	waitErr chan error
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 {
		return len(p), nil
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startKernel(t testing.TB, lang string, env ...string) *kernel {
	t.Helper()
	src, err := Source(lang)
	if err != nil {
		t.Fatal(err)
	}
	codeDir, work := t.TempDir(), t.TempDir()
	codePath := filepath.Join(codeDir, codeFiles[lang])
	if err := os.WriteFile(codePath, []byte(src), 0o444); err != nil {
		t.Fatal(err)
	}
	argv := launchArgs(t, lang, codePath)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = work
	cmd.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + work, "LANG=C.UTF-8", "TMPDIR=" + work}, env...)
	k := &kernel{t: t, lang: lang, dir: work, cmd: cmd, diag: &lockedBuffer{}, waitErr: make(chan error, 1)}
	cmd.Stderr = k.diag
	if k.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	// An os.Pipe, not StdoutPipe: Wait closes a StdoutPipe as soon as the
	// runner exits (a run-once runner does, right after its result),
	// losing frames not read yet.
	out, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = w
	err = cmd.Start()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Close() })
	go func() { k.waitErr <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-k.waitErr
		if t.Failed() {
			t.Logf("%s runner diagnostics:\n%s", lang, k.diag.String())
		}
	})
	k.enc, k.conn = protocol.NewEncoder(k.stdin), protocol.NewConn(out)
	timer := time.AfterFunc(60*time.Second, func() { _ = cmd.Process.Kill() })
	r, err := k.conn.Ready()
	timer.Stop()
	if err != nil || r.Language != lang {
		t.Fatalf("ready = %#v, %v; want ready for %s (diagnostics: %s)", r, err, lang, k.diag.String())
	}
	k.ready = r
	return k
}

// next reads one frame of the running exec through protocol.Conn (so the
// runners are held to the sequence rules too), failing the test on a
// protocol error or when none comes within d (then the runner is killed).
func (k *kernel) next(d time.Duration) protocol.Frame {
	k.t.Helper()
	timer := time.AfterFunc(d, func() { _ = k.cmd.Process.Kill() })
	defer timer.Stop()
	f, err := k.conn.Next()
	if err != nil {
		k.t.Fatalf("%s kernel: %v (diagnostics: %s)", k.lang, err, k.diag.String())
	}
	return f
}

// run is one exec's frames, gathered.
type run struct {
	frames   []protocol.Frame
	stdout   string
	stderr   string
	displays []*protocol.Display
	result   *protocol.Result
}

type execOpt func(*protocol.Execute)

func withStdin(s string) execOpt { return func(e *protocol.Execute) { e.Stdin = s } }
func withEntry(name, inputs string) execOpt {
	return func(e *protocol.Execute) { e.Entrypoint, e.Inputs = name, json.RawMessage(inputs) }
}

// send writes an execute request and returns its id.
func (k *kernel) send(code string, opts ...execOpt) string {
	k.t.Helper()
	k.nextID++
	req := protocol.Execute{ID: fmt.Sprintf("exec-%d", k.nextID), Code: code}
	for _, o := range opts {
		o(&req)
	}
	if err := k.conn.Begin(req.ID); err != nil {
		k.t.Fatal(err)
	}
	if err := k.enc.Execute(req); err != nil {
		k.t.Fatal(err)
	}
	return req.ID
}

// collect reads frames of exec id up to its result.
func (k *kernel) collect(id string, d time.Duration) *run {
	k.t.Helper()
	r := &run{}
	var out, errs strings.Builder
	deadline := time.Now().Add(d)
	for {
		f := k.next(time.Until(deadline))
		r.frames = append(r.frames, f)
		switch v := f.(type) {
		case *protocol.Stream:
			k.checkID(id, v.ID)
			if v.Name == protocol.StreamStdout {
				out.WriteString(v.Data)
			} else {
				errs.WriteString(v.Data)
			}
		case *protocol.Display:
			k.checkID(id, v.ID)
			r.displays = append(r.displays, v)
		case *protocol.Result:
			k.checkID(id, v.ID)
			r.stdout, r.stderr, r.result = out.String(), errs.String(), v
			return r
		default:
			k.t.Fatalf("unexpected frame %#v inside an exec", f)
		}
	}
}

func (k *kernel) checkID(want, got string) {
	k.t.Helper()
	if got != want {
		k.t.Fatalf("frame for exec %q inside exec %q", got, want)
	}
}

// exec runs code to its result.
func (k *kernel) exec(code string, opts ...execOpt) *run {
	k.t.Helper()
	return k.collect(k.send(code, opts...), 60*time.Second)
}

// beforeFirstDisplay is the stdout sent before the exec's first display.
func (r *run) beforeFirstDisplay() string {
	var b strings.Builder
	for _, f := range r.frames {
		switch v := f.(type) {
		case *protocol.Display:
			return b.String()
		case *protocol.Stream:
			if v.Name == protocol.StreamStdout {
				b.WriteString(v.Data)
			}
		}
	}
	return b.String()
}

// mustOK fails unless the exec ended with exit 0 and no exception.
func (r *run) mustOK(t *testing.T) *run {
	t.Helper()
	if r.result.ExitCode != 0 || r.result.Exception != nil {
		t.Fatalf("exec failed: exit %d, exception %+v, stderr %q", r.result.ExitCode, r.result.Exception, r.stderr)
	}
	return r
}

// exited waits for the runner process to end and returns its exit code.
func (k *kernel) exited(d time.Duration) int {
	k.t.Helper()
	select {
	case err := <-k.waitErr:
		k.waitErr <- err // for Cleanup
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			k.t.Fatal(err)
		}
		return 0
	case <-time.After(d):
		k.t.Fatalf("runner still running after %v", d)
		return -1
	}
}
