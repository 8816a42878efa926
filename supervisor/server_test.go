package supervisor

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/launch"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/session"
)

func TestHealth(t *testing.T) {
	notReady := readyChecks()
	notReady.Userns = "user namespaces are disabled; fix: sysctl kernel.unprivileged_userns_clone=1"
	tests := []struct {
		name   string
		checks launch.HealthChecks
		status int
		ok     bool
		state  string
	}{
		{"ready", readyChecks(), 200, true, api.HealthReady},
		{"not ready", notReady, 503, false, api.HealthNotReady},
		{"cgroups none is still ready, but degraded", func() launch.HealthChecks { c := readyChecks(); c.Cgroups = "none"; return c }(), 200, true, api.HealthDegraded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, testConfig(), nil, tc.checks)
			r := ts.do("GET", "/v1/health", "")
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			var raw map[string]json.RawMessage
			if err := json.Unmarshal(r.body, &raw); err != nil {
				t.Fatal(err)
			}
			keys := make([]string, 0, len(raw))
			for k := range raw {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			if !reflect.DeepEqual(keys, []string{"checks", "ok", "runtimes", "status", "version"}) {
				t.Fatalf("health keys %v", keys)
			}
			var h api.Health
			if err := json.Unmarshal(r.body, &h); err != nil {
				t.Fatal(err)
			}
			want := api.Health{OK: tc.ok, Status: tc.state, Version: "1.2.3", Checks: tc.checks, Runtimes: []string{"python", "javascript", "shell"}}
			if !reflect.DeepEqual(h, want) {
				t.Fatalf("health %+v, want %+v", h, want)
			}
			var checks map[string]string
			if err := json.Unmarshal(raw["checks"], &checks); err != nil || len(checks) != 6 {
				t.Fatalf("checks %s: %v", raw["checks"], err)
			}
		})
	}
}

func TestExecHappyPath(t *testing.T) {
	ts := startServer(t, testConfig(), nil, readyChecks())
	body := mustJSON(t, map[string]any{
		"language":   "python",
		"code":       "print(1)",
		"stdin":      "in put",
		"files":      []map[string]string{{"path": "data/in.csv", "content_base64": base64.StdEncoding.EncodeToString([]byte("a,b\n"))}},
		"env":        map[string]string{"API_TOKEN": "s3cret-value", "MODE": "x"},
		"timeout_ms": 1500,
		"artifacts":  []string{"outputs/*.png", "report.txt"},
		"network":    "none",
	})
	r := ts.do("POST", "/v1/exec", body)
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	execID := r.header.Get(api.ExecIDHeader)
	if len(execID) != 32 {
		t.Fatalf("exec id %q", execID)
	}
	var res launch.ExecResult
	if err := json.Unmarshal(r.body, &res); err != nil {
		t.Fatal(err)
	}
	if res.ID != execID || res.ExitCode == nil || *res.ExitCode != 0 || res.Stdout != "1\n" {
		t.Fatalf("result %+v", res)
	}
	if !strings.Contains(string(r.body), `"signal":null`) || !strings.Contains(string(r.body), `"artifacts":[]`) {
		t.Fatalf("result body %s", r.body)
	}

	calls := ts.launcher.calls()
	if len(calls) != 1 {
		t.Fatalf("%d launches", len(calls))
	}
	lr := calls[0]
	wantLimits := testConfig().Limits(1500)
	if lr.ExecID != execID || lr.Runtime != "python" || lr.Code != "print(1)" || string(lr.Stdin) != "in put" ||
		lr.Network != "none" || lr.Limits != wantLimits || !reflect.DeepEqual(lr.Artifacts, []string{"outputs/*.png", "report.txt"}) ||
		!reflect.DeepEqual(lr.Env, map[string]string{"API_TOKEN": "s3cret-value", "MODE": "x"}) ||
		len(lr.Files) != 1 || lr.Files[0].Path != "data/in.csv" || string(lr.Files[0].Content) != "a,b\n" {
		t.Fatalf("launch request %+v", lr)
	}
	if lr.Caller.UID != os.Getuid() || lr.Caller.GID != os.Getgid() || lr.Caller.PID != os.Getpid() {
		t.Fatalf("caller %+v, want this process", lr.Caller)
	}

	recs := ts.sink.ForExec(execID)
	if len(recs) != 2 || recs[0].Step != audit.StepAccept || recs[1].Step != audit.StepDecide {
		t.Fatalf("audit records %+v", recs)
	}
	for _, rec := range recs {
		if !rec.OK || rec.Source != "supervisor" || rec.CallerUID != os.Getuid() || rec.CallerPID != os.Getpid() || rec.Time.IsZero() {
			t.Fatalf("record %+v", rec)
		}
	}
	a := recs[0].Facts.(*facts.Accept)
	if a.Method != "POST" || a.Path != "/v1/exec" || a.BodyBytes == nil || *a.BodyBytes != len(body) {
		t.Fatalf("accept facts %v", recs[0].Facts)
	}
	d := recs[1].Facts.(*facts.Decide)
	if d.Runtime != "python" || d.Network != "none" || d.FileCount == nil || *d.FileCount != 1 || d.FileBytes == nil || *d.FileBytes != 4 ||
		!reflect.DeepEqual(d.EnvNames, []string{"API_TOKEN", "MODE"}) || d.Limits == nil || *d.Limits != facts.Limits(wantLimits) {
		t.Fatalf("decide facts %v", d)
	}
	all, _ := json.Marshal(ts.sink.Records)
	if strings.Contains(string(all), "s3cret-value") {
		t.Fatal("an env value reached the audit trail")
	}
}

func TestExecDefaultsAndNormalisation(t *testing.T) {
	fl := &fakeLauncher{fn: func(_ context.Context, req launch.Request) (*launch.ExecResult, error) {
		code := 3
		return &launch.ExecResult{ExitCode: &code, Stderr: "<b>boom & co</b>"}, nil // no id, nil artifacts, no limits
	}}
	ts := startServer(t, testConfig(), fl, readyChecks())
	r := ts.do("POST", "/v1/exec", `{"language":"javascript","code":"process.exit(3)"}`)
	if r.status != 200 {
		t.Fatalf("a payload failure must be a 200, got %d: %s", r.status, r.body)
	}
	if !strings.Contains(string(r.body), `"stderr":"<b>boom & co</b>"`) {
		t.Fatalf("payload output was escaped: %s", r.body)
	}
	var res launch.ExecResult
	if err := json.Unmarshal(r.body, &res); err != nil {
		t.Fatal(err)
	}
	if res.ID != r.header.Get(api.ExecIDHeader) || res.Artifacts == nil || res.Policy.Limits.TimeoutMS != 30000 || *res.ExitCode != 3 {
		t.Fatalf("result %+v", res)
	}
	lr := fl.calls()[0]
	if lr.Limits.TimeoutMS != 30000 || lr.Network != "none" || lr.Env == nil || len(lr.Files) != 0 {
		t.Fatalf("defaults not applied: %+v", lr)
	}
}

func TestExecRefusals(t *testing.T) {
	cfg := testConfig()
	b64 := base64.StdEncoding.EncodeToString([]byte("x"))
	file := func(p string) string {
		return fmt.Sprintf(`{"language":"python","code":"1","files":[{"path":%q,"content_base64":%q}]}`, p, b64)
	}
	tests := []struct {
		name     string
		body     string
		hdr      []string
		status   int
		code     api.ErrorCode
		msgIn    string
		decoding bool // refused at accept, not decide
	}{
		{"malformed JSON", `{"language":"python",`, nil, 400, "invalid_argument", "body ends early", true},
		{"syntax error", `{"language":"python" "code":"1"}`, nil, 400, "invalid_argument", "malformed JSON at byte offset", true},
		{"unknown field", `{"language":"python","code":"1","cmd":"rm"}`, nil, 400, "invalid_argument", `unknown field "cmd"`, true},
		{"unknown nested field", `{"language":"python","code":"1","files":[{"path":"a","content_base64":"","mode":7}]}`, nil, 400, "invalid_argument", `unknown field "mode"`, true},
		{"wrong type", `{"language":"python","code":"1","timeout_ms":"10"}`, nil, 400, "invalid_argument", `field "timeout_ms": want an integer, got JSON string`, true},
		{"fractional timeout", `{"language":"python","code":"1","timeout_ms":1.5}`, nil, 400, "invalid_argument", `"timeout_ms"`, true},
		{"env value not a string", `{"language":"python","code":"1","env":{"A":1}}`, nil, 400, "invalid_argument", `field "env": want a string, got JSON number`, true},
		{"trailing data", `{"language":"python","code":"1"} {}`, nil, 400, "invalid_argument", "unexpected data after the object", true},
		{"trailing garbage", `{"language":"python","code":"1"}x`, nil, 400, "invalid_argument", "after the object", true},
		{"not an object", `null`, nil, 400, "invalid_argument", "must be a JSON object", true},
		{"array", `[]`, nil, 400, "invalid_argument", "must be a JSON object", true},
		{"empty body", ``, nil, 400, "invalid_argument", "body is empty", true},
		{"wrong content type", `{"language":"python","code":"1"}`, []string{"Content-Type", "text/plain"}, 400, "invalid_argument", "Content-Type", true},
		{"wrong charset", `{"language":"python","code":"1"}`, []string{"Content-Type", "application/json; charset=latin1"}, 400, "invalid_argument", "charset", true},
		{"oversized body", `{"language":"python","code":"` + strings.Repeat("a", int(cfg.MaxBodyBytes)) + `"}`, nil, 413, "too_large", "larger than the limit of 65536 bytes", true},
		{"missing language", `{"code":"1"}`, nil, 400, "invalid_argument", "language is required", false},
		{"bad language", `{"language":"ruby","code":"1"}`, nil, 400, "invalid_argument", `language "ruby" is not supported`, false},
		{"missing code", `{"language":"python"}`, nil, 400, "invalid_argument", "code is required", false},
		{"empty code", `{"language":"python","code":""}`, nil, 400, "invalid_argument", "code is required", false},
		{"NUL in code", `{"language":"python","code":"a\u0000b"}`, nil, 400, "invalid_argument", "NUL", false},
		{"code too large", `{"language":"python","code":"` + strings.Repeat("a", int(cfg.MaxCodeBytes)+1) + `"}`, nil, 413, "too_large", "code is 16385 bytes; the limit is 16384", false},
		{"timeout 0", `{"language":"python","code":"1","timeout_ms":0}`, nil, 400, "invalid_argument", "timeout_ms 0 is out of range", false},
		{"timeout 60001", `{"language":"python","code":"1","timeout_ms":60001}`, nil, 400, "invalid_argument", "timeout_ms 60001 is above the operator cap", false},
		{"timeout negative", `{"language":"python","code":"1","timeout_ms":-1}`, nil, 400, "invalid_argument", "timeout_ms -1", false},
		{"file ../x", file("../x"), nil, 400, "invalid_argument", `files[0].path: path "../x" has a ".." component`, false},
		{"file /etc/passwd", file("/etc/passwd"), nil, 400, "invalid_argument", "is absolute", false},
		{"file a/../../b", file("a/../../b"), nil, 400, "invalid_argument", `".." component`, false},
		{"file backslash", file(`..\x`), nil, 400, "invalid_argument", "backslash", false},
		{"file empty path", file(""), nil, 400, "invalid_argument", "path is empty", false},
		{"file bad base64", `{"language":"python","code":"1","files":[{"path":"a","content_base64":"!!"}]}`, nil, 400, "invalid_argument", "files[0].content_base64", false},
		{"file twice", `{"language":"python","code":"1","files":[{"path":"a","content_base64":""},{"path":"a","content_base64":""}]}`, nil, 400, "invalid_argument", "same as files[0]", false},
		{"file is a directory", `{"language":"python","code":"1","files":[{"path":"a","content_base64":""},{"path":"a/b","content_base64":""}]}`, nil, 400, "invalid_argument", "cannot be both", false},
		{"bad env name", `{"language":"python","code":"1","env":{"1BAD":"x"}}`, nil, 400, "invalid_argument", `env name "1BAD" is not allowed`, false},
		{"LD_PRELOAD", `{"language":"python","code":"1","env":{"LD_PRELOAD":"/x.so"}}`, nil, 400, "invalid_argument", "LD_", false},
		{"unknown network", `{"language":"python","code":"1","network":"host"}`, nil, 400, "invalid_argument", `network "host" is not supported`, false},
		{"bad artifact glob", `{"language":"python","code":"1","artifacts":["out/["]}`, nil, 400, "invalid_argument", "artifacts[0]", false},
		{"artifact escapes", `{"language":"python","code":"1","artifacts":["../*"]}`, nil, 400, "invalid_argument", "artifacts[0]", false},
	}
	ts := startServer(t, cfg, nil, readyChecks())
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hdr := tc.hdr
			r := ts.do("POST", "/v1/exec", tc.body, hdr...)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			code, msg := apiError(t, r)
			if code != tc.code || !strings.Contains(msg, tc.msgIn) {
				t.Fatalf("error %s %q, want %s containing %q", code, msg, tc.code, tc.msgIn)
			}
			id := r.header.Get(api.ExecIDHeader)
			recs := ts.sink.ForExec(id)
			if tc.decoding {
				if len(recs) != 1 || recs[0].Step != audit.StepAccept || recs[0].OK || recs[0].Error != msg {
					t.Fatalf("want one failed accept record, got %+v", recs)
				}
			} else {
				if len(recs) != 2 || !recs[0].OK || recs[1].Step != audit.StepDecide || recs[1].OK || recs[1].Error != msg || recs[1].FactMap()["code"] != string(tc.code) {
					t.Fatalf("want accept ok + decide refused, got %+v", recs)
				}
				if recs[1].CallerUID != os.Getuid() {
					t.Fatalf("decide record caller uid %d", recs[1].CallerUID)
				}
			}
		})
	}
	if n := len(ts.launcher.calls()); n != 0 {
		t.Fatalf("refused requests reached the launcher %d times", n)
	}
}

func TestExecWithoutContentTypeIsAccepted(t *testing.T) {
	ts := startServer(t, testConfig(), nil, readyChecks())
	r := ts.do("POST", "/v1/exec", `{"language":"python","code":"1"}`, "Content-Type", "")
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	r = ts.do("POST", "/v1/exec", `{"language":"python","code":"1"}`, "Content-Type", "application/json; charset=UTF-8")
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
}

func TestRoutes(t *testing.T) {
	ts := startServer(t, testConfig(), nil, readyChecks())
	tests := []struct {
		method, path string
		status       int
		code         api.ErrorCode
		allow        string
	}{
		{"GET", "/nope", 404, "not_found", ""},
		{"GET", "/v1/sessions/0123", 404, "not_found", ""},
		{"PATCH", "/v1/sessions", 405, "invalid_argument", "GET, POST"},
		{"GET", "/v1/exec/x", 404, "not_found", ""},
		{"GET", "/v1//health", 404, "not_found", ""},
		{"GET", "/v1/./health", 404, "not_found", ""},
		{"GET", "/v1/exec", 405, "invalid_argument", "POST"},
		{"DELETE", "/v1/health", 405, "invalid_argument", "GET, HEAD"},
		{"POST", "/metrics", 405, "invalid_argument", "GET, HEAD"},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r := ts.do(tc.method, tc.path, "")
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			if code, _ := apiError(t, r); code != tc.code {
				t.Fatalf("code %s, want %s", code, tc.code)
			}
			if got := r.header.Get("Allow"); got != tc.allow {
				t.Fatalf("Allow %q, want %q", got, tc.allow)
			}
		})
	}
}

func TestLaunchErrorMapping(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int
		code   api.ErrorCode
		msg    string
	}{
		{"unavailable", errdefs.New(errdefs.ErrUnavailable, "bwrap is not installed", "apt-get install bubblewrap", errors.New("exec: not found")),
			503, "unavailable", "bwrap is not installed; fix: apt-get install bubblewrap"},
		{"unavailable wrapped", fmt.Errorf("launch: %w", errdefs.New(errdefs.ErrUnavailable, "user namespaces are refused", "", nil)),
			503, "unavailable", "user namespaces are refused"},
		{"invalid", errdefs.New(errdefs.ErrInvalid, "runtime python is not configured in the helper", "", nil),
			400, "invalid_argument", "runtime python is not configured"},
		{"internal class", errdefs.New(errdefs.ErrInternal, "pipe", "", nil), 500, "internal", "internal error in exec"},
		{"quota", errdefs.New(errdefs.ErrQuota, "stage a.txt: the workspace quota is full", "", nil), 507, "quota_exceeded", "quota is full"},
		{"forbidden", errdefs.New(errdefs.ErrForbidden, "stage ../x: escapes", "", nil), 403, "forbidden", "escapes"},
		{"plain error", errors.New("boom"), 500, "internal", "see the supervisor log"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fl := &fakeLauncher{fn: func(context.Context, launch.Request) (*launch.ExecResult, error) { return nil, tc.err }}
			ts := startServer(t, testConfig(), fl, readyChecks())
			r := ts.do("POST", "/v1/exec", `{"language":"python","code":"1"}`)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			code, msg := apiError(t, r)
			if code != tc.code || !strings.Contains(msg, tc.msg) {
				t.Fatalf("got %s %q, want %s %q", code, msg, tc.code, tc.msg)
			}
			if tc.code == "unavailable" && msg != tc.msg {
				t.Fatalf("unavailable message %q, want exactly %q", msg, tc.msg)
			}
			if strings.Contains(msg, "boom") || strings.Contains(msg, "exec: not found") {
				t.Fatalf("internal error detail leaked: %q", msg)
			}
		})
	}
}

func TestPanicRecovery(t *testing.T) {
	var n atomic.Int32
	fl := &fakeLauncher{fn: func(_ context.Context, req launch.Request) (*launch.ExecResult, error) {
		if n.Add(1) == 1 {
			panic("launcher bug")
		}
		return okResult(req), nil
	}}
	ts := startServer(t, testConfig(), fl, readyChecks())
	r := ts.do("POST", "/v1/exec", `{"language":"python","code":"1"}`)
	if r.status != 500 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if code, _ := apiError(t, r); code != "internal" {
		t.Fatalf("code %s", code)
	}
	if r := ts.do("GET", "/v1/health", ""); r.status != 200 {
		t.Fatalf("server stopped serving after a panic: %d", r.status)
	}
	// The panicking exec gave its slot back.
	for i := 0; i < testConfig().MaxConcurrentExecs+1; i++ {
		if r := ts.do("POST", "/v1/exec", `{"language":"python","code":"1"}`); r.status != 200 {
			t.Fatalf("exec after panic: %d %s", r.status, r.body)
		}
	}
}

func TestClientDisconnectCancelsLaunch(t *testing.T) {
	started := make(chan struct{})
	saw := make(chan error, 1)
	fl := &fakeLauncher{fn: func(ctx context.Context, _ launch.Request) (*launch.ExecResult, error) {
		close(started)
		select {
		case <-ctx.Done():
			saw <- ctx.Err()
			return nil, ctx.Err()
		case <-time.After(20 * time.Second):
			saw <- nil
			return nil, errors.New("not cancelled")
		}
	}}
	ts := startServer(t, testConfig(), fl, readyChecks())
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		req, _ := newJSONRequest(ctx, `{"language":"python","code":"while True: pass"}`)
		_, err := ts.client.Do(req)
		errc <- err
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("launch never started")
	}
	cancel()
	select {
	case err := <-saw:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("launcher context ended with %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the launcher's context was not cancelled when the client went away")
	}
	if err := <-errc; err == nil {
		t.Fatal("client request succeeded after cancel")
	}
}

func TestConcurrencyLimit(t *testing.T) {
	cfg := testConfig()
	cfg.MaxConcurrentExecs = 1
	cfg.MaxQueuedExecs = 1
	release := make(chan struct{})
	started := make(chan struct{}, 4)
	fl := &fakeLauncher{fn: func(ctx context.Context, req launch.Request) (*launch.ExecResult, error) {
		started <- struct{}{}
		if req.Code == "1" {
			<-release
		}
		return okResult(req), nil
	}}
	ts := startServer(t, cfg, fl, readyChecks())
	first := make(chan response, 1)
	go func() { first <- ts.do("POST", "/v1/exec", `{"language":"python","code":"1"}`) }()
	<-started

	// Waits for a slot up to its own timeout, then 429.
	begin := time.Now()
	r := ts.do("POST", "/v1/exec", `{"language":"python","code":"2","timeout_ms":300}`)
	if r.status != 429 || r.header.Get("Retry-After") != "1" {
		t.Fatalf("status %d Retry-After %q: %s", r.status, r.header.Get("Retry-After"), r.body)
	}
	if waited := time.Since(begin); waited < 250*time.Millisecond {
		t.Fatalf("answered after %v: a queued exec waits up to its timeout", waited)
	}
	if code, msg := apiError(t, r); code != "limit_exceeded" || !strings.Contains(msg, "timeout of 300 ms") {
		t.Fatalf("%s %q", code, msg)
	}

	// One waits in the queue; the next finds the queue full and is told at once.
	queued := make(chan response, 1)
	go func() { queued <- ts.do("POST", "/v1/exec", `{"language":"python","code":"3"}`) }()
	deadline := time.Now().Add(2 * time.Second)
	for ts.srv.gate.Stats().Queued != 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	begin = time.Now()
	r = ts.do("POST", "/v1/exec", `{"language":"python","code":"4"}`)
	if code, msg := apiError(t, r); r.status != 429 || code != "limit_exceeded" || !strings.Contains(msg, "1 waiting") {
		t.Fatalf("full queue: %d %s %q", r.status, code, msg)
	}
	if time.Since(begin) > 200*time.Millisecond {
		t.Fatal("a full queue must answer at once")
	}

	close(release)
	if r := <-first; r.status != 200 {
		t.Fatalf("first exec %d", r.status)
	}
	if r := <-queued; r.status != 200 {
		t.Fatalf("the queued exec did not run when the slot freed: %d %s", r.status, r.body)
	}
}

func TestAuditFailureRefusesExec(t *testing.T) {
	fl := &fakeLauncher{}
	ts := startServer(t, testConfig(), fl, readyChecks(), func(s *Server) { s.sink = failingSink{} })
	r := ts.do("POST", "/v1/exec", `{"language":"python","code":"1"}`)
	if r.status != 503 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if code, msg := apiError(t, r); code != "unavailable" || !strings.Contains(msg, "audit log") || !strings.Contains(msg, "fix:") {
		t.Fatalf("%s %q", code, msg)
	}
	if len(fl.calls()) != 0 {
		t.Fatal("launched without an audit record")
	}
}

func TestMetrics(t *testing.T) {
	var n atomic.Int32
	fl := &fakeLauncher{fn: func(_ context.Context, req launch.Request) (*launch.ExecResult, error) {
		switch n.Add(1) {
		case 1:
			return okResult(req), nil
		case 2:
			r := okResult(req)
			r.ExitCode, r.TimedOut, r.DurationMS = nil, true, 2500
			sig := "SIGKILL"
			r.Signal = &sig
			return r, nil
		default:
			return nil, errdefs.New(errdefs.ErrUnavailable, "no bwrap", "", nil)
		}
	}}
	ts := startServer(t, testConfig(), fl, readyChecks())
	ts.do("POST", "/v1/exec", `{"language":"python","code":"1"}`)
	ts.do("POST", "/v1/exec", `{"language":"python","code":"1"}`)
	ts.do("POST", "/v1/exec", `{"language":"python","code":"1"}`)
	ts.do("POST", "/v1/exec", `{"language":"cobol","code":"1"}`)
	r := ts.do("GET", "/metrics", "")
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("status %d type %q", r.status, r.header.Get("Content-Type"))
	}
	text := string(r.body)
	for _, want := range []string{
		`sandboxd_execs_total{outcome="ok"} 1`,
		`sandboxd_execs_total{outcome="timeout"} 1`,
		`sandboxd_execs_total{outcome="unavailable"} 1`,
		`sandboxd_execs_total{outcome="refused"} 1`,
		`sandboxd_execs_total{outcome="signal"} 0`,
		`sandboxd_execs_total{outcome="error"} 0`,
		`# TYPE sandboxd_exec_duration_seconds histogram`,
		`sandboxd_exec_duration_seconds_bucket{le="0.05"} 1`,
		`sandboxd_exec_duration_seconds_bucket{le="2.5"} 2`,
		`sandboxd_exec_duration_seconds_bucket{le="+Inf"} 2`,
		`sandboxd_exec_duration_seconds_sum 2.541`,
		`sandboxd_exec_duration_seconds_count 2`,
		`sandboxd_active_sessions 0`,
		`sandboxd_execs_in_flight 0`,
		`sandboxd_launches_refused_total{reason="invalid_argument"} 1`,
		`sandboxd_launches_refused_total{reason="unavailable"} 1`,
		`sandboxd_audit_records_total 8`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("metrics lack %q:\n%s", want, text)
		}
	}
}

// An audit sink that counts (audit.FileWriter) is the source of the records
// metric, so records the launcher writes through it are counted too.
type countingSink struct {
	audit.Memory
	extra uint64
}

func (c *countingSink) Count() uint64 { return uint64(len(c.Records)) + c.extra }

func TestMetricsAuditCountFromSink(t *testing.T) {
	sink := &countingSink{extra: 40}
	ts := startServer(t, testConfig(), nil, readyChecks(), func(s *Server) { s.sink = sink; s.metrics = newMetrics(sink) })
	ts.do("POST", "/v1/exec", `{"language":"python","code":"1"}`)
	if r := ts.do("GET", "/metrics", ""); !strings.Contains(string(r.body), "sandboxd_audit_records_total 42\n") {
		t.Fatalf("metrics:\n%s", r.body)
	}
}

func TestShutdownCancelsInFlightExecs(t *testing.T) {
	started := make(chan struct{})
	fl := &fakeLauncher{fn: func(ctx context.Context, _ launch.Request) (*launch.ExecResult, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	ts := startServer(t, testConfig(), fl, readyChecks(), func(s *Server) {
		s.shutdownGrace = 100 * time.Millisecond
		s.killGrace = 5 * time.Second
	})
	got := make(chan response, 1)
	go func() { got <- ts.do("POST", "/v1/exec", `{"language":"python","code":"1"}`) }()
	<-started
	if err := ts.stop(); err != nil {
		t.Fatalf("Serve returned %v after shutdown", err)
	}
	r := <-got
	if r.status != 503 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if code, msg := apiError(t, r); code != "unavailable" || !strings.Contains(msg, "shutting down") {
		t.Fatalf("%s %q", code, msg)
	}
	if _, err := os.Stat(ts.sock); !os.IsNotExist(err) {
		t.Fatalf("socket left behind after shutdown: %v", err)
	}
}

func TestDecideSessionTimeout(t *testing.T) {
	s := NewServer(testConfig(), &fakeLauncher{}, fakeProber{}, &audit.Memory{}, nil, "x")
	long := int64(600000)
	d, apiE := s.decideExec(api.ExecRequest{Language: "python", Code: "1", TimeoutMS: &long}, launch.Caller{}, "id", &session.Session{})
	if apiE != nil || d.launch.Limits.TimeoutMS != 600000 {
		t.Fatalf("session exec at the cap refused: %v", apiE)
	}
	long++
	if _, apiE := s.decideExec(api.ExecRequest{Language: "python", Code: "1", TimeoutMS: &long}, launch.Caller{}, "id", &session.Session{}); apiE == nil || apiE.Code != api.CodeInvalidArgument {
		t.Fatalf("session exec above the cap: %v", apiE)
	}
	if _, apiE := s.decideExec(api.ExecRequest{Language: "python", Code: "1", TimeoutMS: &long}, launch.Caller{}, "id", nil); apiE == nil {
		t.Fatal("one-shot exec above 60000 accepted")
	}
}

func TestAuthorized(t *testing.T) {
	const self = 1500
	tests := []struct {
		name      string
		c         launch.Caller
		allowUIDs []int
		allowGIDs []int
		want      bool
	}{
		{"root", launch.Caller{UID: 0, GID: 0}, nil, nil, true},
		{"root with odd gid", launch.Caller{UID: 0, GID: 4242}, nil, nil, true},
		{"self", launch.Caller{UID: self, GID: 99}, nil, nil, true},
		{"stranger", launch.Caller{UID: 1000, GID: 1000}, nil, nil, false},
		{"allowed uid", launch.Caller{UID: 1000, GID: 1000}, []int{7, 1000}, nil, true},
		{"other uid allowed", launch.Caller{UID: 1001, GID: 1001}, []int{1000}, nil, false},
		{"allowed primary gid", launch.Caller{UID: 1001, GID: 50}, nil, []int{50}, true},
		{"gid list without match", launch.Caller{UID: 1001, GID: 51}, []int{1000}, []int{50}, false},
		{"uid in gid list does not count", launch.Caller{UID: 50, GID: 51}, nil, []int{50}, false},
		{"gid in uid list does not count", launch.Caller{UID: 51, GID: 50}, []int{50}, nil, false},
		{"nobody", launch.Caller{UID: 65534, GID: 65534}, nil, nil, false},
	}
	for _, tc := range tests {
		if got := authorized(tc.c, self, tc.allowUIDs, tc.allowGIDs); got != tc.want {
			t.Errorf("%s: authorized(%+v) = %v, want %v", tc.name, tc.c, got, tc.want)
		}
	}
}

func TestHandlerWithoutPeerCredentialsIsForbidden(t *testing.T) {
	sink := &audit.Memory{}
	fl := &fakeLauncher{}
	s := NewServer(testConfig(), fl, fakeProber{readyChecks()}, sink, nil, "x")
	rec := newRecorder()
	req, _ := newJSONRequest(context.Background(), `{"language":"python","code":"1"}`)
	s.Handler().ServeHTTP(rec, req)
	if rec.Code != 403 || !strings.Contains(rec.Body.String(), `"code":"forbidden"`) {
		t.Fatalf("got %d %s", rec.Code, rec.Body.String())
	}
	if len(fl.calls()) != 0 || len(sink.Records) != 1 || sink.Records[0].CallerUID != -1 || sink.Records[0].OK {
		t.Fatalf("unknown peer audited as %+v", sink.Records)
	}
}

func TestNewServerDefaults(t *testing.T) {
	var _ launch.Launcher = (*fakeLauncher)(nil)
	s := NewServer(policy.Defaults(), &fakeLauncher{}, fakeProber{}, nil, nil, "v")
	if s.log == nil || s.gate == nil || s.selfUID != os.Getuid() {
		t.Fatalf("%+v", s)
	}
}

// A session file path that climbs out lexically is an escape (403), not an
// unknown route; other unclean file paths are bad arguments (400).
func TestUncleanFilePaths(t *testing.T) {
	ts := startServer(t, testConfig(), nil, readyChecks())
	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/v1/sessions/abc/files/../../etc/passwd", 403},
		{"/v1/sessions/abc/files//etc/passwd", 403},
		{"/v1/sessions/abc/files/a/../../b", 403},
		{"/v1/sessions/abc/files/a//b", 400},
		{"/v1/sessions/abc/files/a/./b", 400},
		{"/v1//health", 404},
	} {
		if r := ts.do("GET", tc.path, ""); r.status != tc.status {
			t.Errorf("GET %s: %d, want %d: %s", tc.path, r.status, tc.status, r.body)
		}
	}
}
