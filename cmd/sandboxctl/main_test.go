package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/launch"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/supervisor"
)

// launcher answers with fn and remembers the last request.
type launcher struct {
	mu   sync.Mutex
	last launch.Request
	fn   func(req launch.Request) (*api.ExecResult, error)
}

func (l *launcher) Launch(_ context.Context, req launch.Request) (*api.ExecResult, error) {
	l.mu.Lock()
	l.last = req
	fn := l.fn
	l.mu.Unlock()
	return fn(req)
}

func (l *launcher) request() launch.Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

type prober struct{ checks api.HealthChecks }

func (p prober) Probe(context.Context, launch.Caller) api.HealthChecks { return p.checks }

func ready() api.HealthChecks {
	return api.HealthChecks{Bwrap: "ok", Userns: "ok", Seccomp: "ok", Helper: "ok", Cgroups: "v2", Disk: "ok"}
}

func exited(code int, stdout, stderr string) func(launch.Request) (*api.ExecResult, error) {
	return func(req launch.Request) (*api.ExecResult, error) {
		return &api.ExecResult{ID: req.ExecID, ExitCode: &code, Stdout: stdout, Stderr: stderr, DurationMS: 12}, nil
	}
}

// serve runs a real supervisor.Server on a Unix socket and returns the socket.
func serve(t *testing.T, l *launcher, checks api.HealthChecks) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := supervisor.Listen(sock, "")
	if err != nil {
		t.Fatal(err)
	}
	srv := supervisor.NewServer(policy.Defaults(), l, prober{checks}, &audit.Memory{}, nil, "9.8.7")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("server did not stop")
		}
	})
	return sock
}

type result struct {
	code           int
	stdout, stderr string
}

func ctl(t *testing.T, sock string, stdin string, env map[string]string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	lookup := func(k string) (string, bool) {
		if k == "SANDBOXD_SOCKET" && sock != "" {
			if _, set := env[k]; !set {
				return sock, true
			}
		}
		v, ok := env[k]
		return v, ok
	}
	code := run(context.Background(), args, stdio{in: strings.NewReader(stdin), out: &out, err: &errb}, lookup)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

func TestRunOutputsAndExitCodes(t *testing.T) {
	sigKill, sigSegv := "SIGKILL", "SIGSEGV"
	tests := []struct {
		name       string
		fn         func(launch.Request) (*api.ExecResult, error)
		wantCode   int
		wantStdout string
		wantStderr []string
	}{
		{"success", exited(0, "1\n", ""), 0, "1\n", nil},
		{"payload failure", exited(3, "partial", "Traceback\n"), 3, "partial", []string{"Traceback\n"}},
		{"exit 255", exited(255, "", ""), 255, "", nil},
		{"killed", func(req launch.Request) (*api.ExecResult, error) {
			return &api.ExecResult{ID: req.ExecID, Signal: &sigSegv}, nil
		}, 128 + 11, "", []string{"sandboxctl: killed by SIGSEGV"}},
		{"oom", func(req launch.Request) (*api.ExecResult, error) {
			return &api.ExecResult{ID: req.ExecID, Signal: &sigKill, OOMKilled: true}, nil
		}, 137, "", []string{"out of memory"}},
		{"timed out", func(req launch.Request) (*api.ExecResult, error) {
			return &api.ExecResult{ID: req.ExecID, Signal: &sigKill, TimedOut: true, DurationMS: 1000, Stdout: "tick\n"}, nil
		}, 124, "tick\n", []string{"sandboxctl: timed out after 1000 ms"}},
		{"truncated", func(req launch.Request) (*api.ExecResult, error) {
			zero := 0
			return &api.ExecResult{ID: req.ExecID, ExitCode: &zero, Stdout: "xxx", StdoutTruncated: true}, nil
		}, 0, "xxx", []string{"stdout was cut"}},
		{"unavailable", func(launch.Request) (*api.ExecResult, error) {
			return nil, errdefs.New(errdefs.ErrUnavailable, "bwrap is missing", "apt-get install bubblewrap", nil)
		}, 2, "", []string{"sandboxctl: unavailable: bwrap is missing; fix: apt-get install bubblewrap\n"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sock := serve(t, &launcher{fn: tc.fn}, ready())
			r := ctl(t, sock, "", nil, "run", "--lang", "python", "-c", "print(1)")
			if r.code != tc.wantCode || r.stdout != tc.wantStdout {
				t.Fatalf("exit %d stdout %q stderr %q; want %d %q", r.code, r.stdout, r.stderr, tc.wantCode, tc.wantStdout)
			}
			for _, w := range tc.wantStderr {
				if !strings.Contains(r.stderr, w) {
					t.Fatalf("stderr %q lacks %q", r.stderr, w)
				}
			}
		})
	}
}

func TestRunRequestFields(t *testing.T) {
	l := &launcher{fn: exited(0, "", "")}
	sock := serve(t, l, ready())
	dir := t.TempDir()
	stdinFile := filepath.Join(dir, "in.txt")
	dataFile := filepath.Join(dir, "data.csv")
	os.WriteFile(stdinFile, []byte("hello stdin"), 0o600)
	os.WriteFile(dataFile, []byte("a,b\n"), 0o600)
	r := ctl(t, sock, "", map[string]string{"TOKEN": "from-env"},
		"run", "-c", "console.log(1)", "--lang", "javascript", "--timeout", "1500",
		"--env", "A=1", "--env", "B=x=y", "--env", "TOKEN", "--stdin-file", stdinFile,
		"--file", "data/in.csv="+dataFile, "--artifact", "out/*.png")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	req := l.request()
	if req.Runtime != "javascript" || req.Code != "console.log(1)" || req.Limits.TimeoutMS != 1500 ||
		req.Env["A"] != "1" || req.Env["B"] != "x=y" || req.Env["TOKEN"] != "from-env" || string(req.Stdin) != "hello stdin" ||
		len(req.Files) != 1 || req.Files[0].Path != "data/in.csv" || string(req.Files[0].Content) != "a,b\n" ||
		len(req.Artifacts) != 1 || req.Artifacts[0] != "out/*.png" {
		t.Fatalf("request %+v", req)
	}
}

func TestRunCodeSources(t *testing.T) {
	l := &launcher{fn: exited(0, "", "")}
	sock := serve(t, l, ready())
	script := filepath.Join(t.TempDir(), "job.py")
	os.WriteFile(script, []byte("print('file')"), 0o600)

	// FILE, with the language inferred and a flag after it.
	if r := ctl(t, sock, "", nil, "run", script, "--timeout", "100"); r.code != 0 {
		t.Fatalf("file: %d %s", r.code, r.stderr)
	}
	if req := l.request(); req.Code != "print('file')" || req.Runtime != "python" || req.Limits.TimeoutMS != 100 {
		t.Fatalf("file request %+v", req)
	}
	// "-" reads the code from stdin.
	if r := ctl(t, sock, "print('stdin')", nil, "run", "--lang", "python", "-"); r.code != 0 {
		t.Fatalf("stdin: %d %s", r.code, r.stderr)
	}
	if req := l.request(); req.Code != "print('stdin')" || len(req.Stdin) != 0 {
		t.Fatalf("stdin request %+v", req)
	}
	// --stdin-file - feeds sandboxctl's stdin to the payload.
	if r := ctl(t, sock, "data", nil, "run", "--lang", "python", "-c", "x", "--stdin-file", "-"); r.code != 0 {
		t.Fatalf("stdin-file -: %d %s", r.code, r.stderr)
	}
	if req := l.request(); string(req.Stdin) != "data" {
		t.Fatalf("stdin %q", req.Stdin)
	}
}

func TestRunJSON(t *testing.T) {
	sock := serve(t, &launcher{fn: exited(7, "out", "err")}, ready())
	r := ctl(t, sock, "", nil, "run", "--json", "--lang", "python", "-c", "1")
	if r.code != 7 || r.stderr != "" {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, r.stdout)
	}
	if res["stdout"] != "out" || res["stderr"] != "err" || res["exit_code"] != float64(7) || res["id"] == "" {
		t.Fatalf("result %v", res)
	}
	for _, k := range []string{"signal", "timed_out", "oom_killed", "quota_exceeded", "usage", "artifacts", "policy", "duration_ms"} {
		if _, ok := res[k]; !ok {
			t.Fatalf("result lacks %q", k)
		}
	}
}

func TestRunAPIErrors(t *testing.T) {
	sock := serve(t, &launcher{fn: exited(0, "", "")}, ready())
	small := filepath.Join(t.TempDir(), "small")
	if err := os.WriteFile(small, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"bad language", []string{"run", "--lang", "ruby", "-c", "1"}, `sandboxctl: invalid_argument: language "ruby" is not supported`},
		{"bad timeout", []string{"run", "--lang", "python", "-c", "1", "--timeout", "60001"}, "sandboxctl: invalid_argument: timeout_ms 60001"},
		{"bad env", []string{"run", "--lang", "python", "-c", "1", "--env", "LD_PRELOAD=/x"}, "sandboxctl: invalid_argument: env name \"LD_PRELOAD\""},
		{"bad file path", []string{"run", "--lang", "python", "-c", "1", "--file", "../x=" + small}, "sandboxctl: invalid_argument: files[0].path"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := ctl(t, sock, "", nil, tc.args...)
			if r.code != exitUsage || !strings.HasPrefix(r.stderr, tc.want) {
				t.Fatalf("exit %d stderr %q; want 2 and %q", r.code, r.stderr, tc.want)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, "Usage:"},
		{"unknown command", []string{"frobnicate"}, "unknown command"},
		{"no code", []string{"run", "--lang", "python"}, "no code"},
		{"both", []string{"run", "--lang", "python", "-c", "1", "f.py"}, "not both"},
		{"two files", []string{"run", "a.py", "b.py"}, "one FILE only"},
		{"no lang", []string{"run", "-c", "1"}, "--lang is required"},
		{"unknown flag", []string{"run", "--nope"}, "nope"},
		{"bad timeout", []string{"run", "--timeout", "soon", "-c", "1"}, "invalid value"},
		{"env unset", []string{"run", "--lang", "python", "-c", "1", "--env", "UNSET_VAR"}, "not set in sandboxctl's environment"},
		{"stdin twice", []string{"run", "--lang", "python", "-", "--stdin-file", "-"}, "already carries the code"},
		{"bad --file", []string{"run", "--lang", "python", "-c", "1", "--file", "nolocal"}, "WORKSPACE_PATH=LOCAL_FILE"},
		{"missing file", []string{"run", "/nonexistent/x.py"}, "read code"},
		{"inputs not an object", []string{"run", "--lang", "python", "-c", "1", "--entrypoint", "main", "--inputs", "[1]"}, "--inputs must be one JSON object"},
		{"inputs not JSON", []string{"run", "--lang", "python", "-c", "1", "--entrypoint", "main", "--inputs", "{"}, "--inputs must be one JSON object"},
		{"health arg", []string{"health", "extra"}, "unexpected argument"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := ctl(t, "/nonexistent.sock", "", nil, tc.args...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("exit %d stderr %q; want 2 and %q", r.code, r.stderr, tc.want)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	r := ctl(t, "", "", nil, "help")
	if r.code != 0 {
		t.Fatalf("exit %d", r.code)
	}
	for _, w := range []string{"Exit status:", "124", "128+N", "2 usage error, or the API refused", "3 the supervisor could not be reached", "SANDBOXD_SOCKET"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("help lacks %q", w)
		}
	}
}

func TestSocketSelection(t *testing.T) {
	sock := serve(t, &launcher{fn: exited(0, "ok", "")}, ready())
	// From SANDBOXD_SOCKET.
	if r := ctl(t, "", "", map[string]string{"SANDBOXD_SOCKET": sock}, "run", "--lang", "python", "-c", "1"); r.code != 0 || r.stdout != "ok" {
		t.Fatalf("env socket: %+v", r)
	}
	// --socket wins over the environment.
	if r := ctl(t, "", "", map[string]string{"SANDBOXD_SOCKET": "/nonexistent.sock"}, "run", "--socket", sock, "--lang", "python", "-c", "1"); r.code != 0 {
		t.Fatalf("--socket: %+v", r)
	}
	// Nothing listening: exit 3.
	r := ctl(t, "", "", map[string]string{"SANDBOXD_SOCKET": filepath.Join(t.TempDir(), "none.sock")}, "run", "--lang", "python", "-c", "1")
	if r.code != exitUnreachable || !strings.HasPrefix(r.stderr, "sandboxctl: POST /v1/exec via ") {
		t.Fatalf("unreachable: %+v", r)
	}
	if defaultSocket(func(string) (string, bool) { return "", false }) != "/run/sandboxd/sandboxd.sock" {
		t.Fatal("default socket")
	}
}

func TestHealthCommand(t *testing.T) {
	bad := ready()
	bad.Bwrap = "bwrap not found; fix: apt-get install bubblewrap"
	tests := []struct {
		name   string
		checks api.HealthChecks
		args   []string
		code   int
		want   []string
	}{
		{"ready", ready(), nil, 0, []string{"sandboxd 9.8.7: ready\n", "  bwrap     ok\n", "  cgroups   v2\n", "  runtimes  python, javascript, shell\n"}},
		{"not ready", bad, nil, 1, []string{"NOT READY", "bwrap not found; fix: apt-get install bubblewrap"}},
		{"json", bad, []string{"--json"}, 1, []string{`"ok": false`, `"version": "9.8.7"`, `"runtimes": [`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sock := serve(t, &launcher{}, tc.checks)
			r := ctl(t, sock, "", nil, append([]string{"health"}, tc.args...)...)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d: %+v", r.code, tc.code, r)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stdout, w) {
					t.Fatalf("stdout %q lacks %q", r.stdout, w)
				}
			}
			if strings.HasPrefix(tc.name, "json") {
				var h api.Health
				if err := json.Unmarshal([]byte(r.stdout), &h); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestArtifactsDir(t *testing.T) {
	content := []byte("PNG...")
	sum := sha256.Sum256(content)
	art := func(p string, sha string) api.Artifact {
		return api.Artifact{Path: p, Size: int64(len(content)), SHA256: sha, ContentBase64: base64.StdEncoding.EncodeToString(content)}
	}
	good := hex.EncodeToString(sum[:])
	l := &launcher{fn: func(req launch.Request) (*api.ExecResult, error) {
		zero := 0
		return &api.ExecResult{ID: req.ExecID, ExitCode: &zero, Artifacts: []api.Artifact{
			art("out/a.png", good),
			art("../escape.png", good),
			art("/etc/evil", good),
			art("out/bad.png", strings.Repeat("0", 64)),
		}}, nil
	}}
	sock := serve(t, l, ready())
	parent := t.TempDir()
	dir := filepath.Join(parent, "arts")
	r := ctl(t, sock, "", nil, "run", "--lang", "python", "-c", "1", "--artifact", "out/*", "--artifacts-dir", dir)
	if r.code != exitUnreachable {
		t.Fatalf("exit %d; want 3 for artifacts that could not be written: %+v", r.code, r)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "out", "a.png")); err != nil || !bytes.Equal(b, content) {
		t.Fatalf("good artifact: %q %v", b, err)
	}
	for _, p := range []string{filepath.Join(parent, "escape.png"), filepath.Join(dir, "out", "bad.png")} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s was written: %v", p, err)
		}
	}
	for _, w := range []string{`"../escape.png": unsafe path`, `"/etc/evil": unsafe path`, `"out/bad.png": content does not match its sha256`} {
		if !strings.Contains(r.stderr, w) {
			t.Fatalf("stderr %q lacks %q", r.stderr, w)
		}
	}
}
