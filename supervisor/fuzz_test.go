package supervisor

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"strings"
	"sync"
	"testing"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/launch"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/session"
)

// fuzzSink encodes every audit record as the real writer would, so that a
// request whose record cannot be encoded (and would therefore stop every
// exec, I7) is a fuzz failure, and keeps nothing.
type fuzzSink struct {
	mu  sync.Mutex
	err error
}

func (s *fuzzSink) Write(r audit.Record) error {
	if _, err := json.Marshal(r); err != nil {
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
	}
	return nil
}

// fuzzLauncher records the decided request and answers with a minimal
// result.
type fuzzLauncher struct {
	got *launch.Request
}

func (l *fuzzLauncher) Launch(_ context.Context, req launch.Request) (*launch.ExecResult, error) {
	l.got = &req
	zero := 0
	return &launch.ExecResult{ID: req.ExecID, ExitCode: &zero, Artifacts: []launch.Artifact{}}, nil
}

type fuzzProber struct{}

func (fuzzProber) Probe(context.Context, launch.Caller) launch.HealthChecks {
	return launch.HealthChecks{}
}

// FuzzExecRequest fuzzes the API request decoder: a POST /v1/exec (or a
// session exec's) body and Content-Type go through the real handler chain -
// body limit, strict JSON decoding, the decide step - up to a launcher that
// records what it was asked to run. For any input the supervisor must answer
// (never panic, never 500), with a JSON error body whose code matches the
// status, and audit records that encode. A request that reaches the launcher
// must satisfy the contract that the helper relies on: a known runtime,
// non-empty code without NUL within the code limit, a timeout within the
// caps, clean, unique, non-nested workspace paths, env names of the allowed
// form and not LD_* or SANDBOXD_*, valid artifact globs, network "none".
//
// `go test` runs the seed corpus in testdata/fuzz/FuzzExecRequest;
// `make fuzz` explores further.
func FuzzExecRequest(f *testing.F) {
	// One session store and session for every input: session execs take the
	// same decode and decide path, plus the session's own serialisation.
	st, err := session.Open(session.Config{StateDir: f.TempDir(), MaxSessions: 4, TTLDefault: 3600, TTLCap: 3600, SelfUID: os.Getuid()})
	if err != nil {
		f.Fatal(err)
	}
	sess, err := st.Create(launch.Caller{UID: 1000, GID: 1000, PID: 4242}, nil, "")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte, contentType string, session bool) {
		// Small limits keep every refusal (413 included) reachable with
		// small inputs, so the engine never grows or minimises inputs of
		// tens of KiB.
		cfg := policy.Defaults()
		cfg.MaxBodyBytes = 4 << 10
		cfg.MaxCodeBytes = 1 << 10
		cfg.WorkspaceQuotaBytes = 2 << 10
		sink := &fuzzSink{}
		l := &fuzzLauncher{}
		s := NewServer(cfg, l, fuzzProber{}, sink, nil, "fuzz")

		s.SetSessions(st)
		target := "/v1/exec"
		var h http.HandlerFunc = s.handleExec
		if session {
			target = "/v1/sessions/" + sess.ID + "/exec"
			h = func(w http.ResponseWriter, r *http.Request) { s.serveExec(w, r, sess) }
		}
		req := httptest.NewRequest(http.MethodPost, target, bytes.NewReader(body))
		if strings.ContainsAny(contentType, "\r\n\x00") {
			contentType = ""
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		req = req.WithContext(context.WithValue(req.Context(), peerKey{}, peer{caller: launch.Caller{UID: 1000, GID: 1000, PID: 4242}}))
		rec := httptest.NewRecorder()
		s.recoverPanics(h).ServeHTTP(rec, req)

		if sink.err != nil {
			t.Fatalf("an audit record does not encode: %v", sink.err)
		}
		res := rec.Result()
		if rec.Header().Get(api.ExecIDHeader) == "" {
			t.Fatalf("answer %d without %s", res.StatusCode, api.ExecIDHeader)
		}
		if res.StatusCode == http.StatusOK {
			if l.got == nil {
				t.Fatal("200 without a launch")
			}
			checkLaunch(t, cfg, session, body, l.got)
			return
		}
		if l.got != nil {
			t.Fatalf("status %d after a launch", res.StatusCode)
		}
		var eb api.ErrorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil {
			t.Fatalf("status %d with a body that is not the error object: %v: %q", res.StatusCode, err, rec.Body.Bytes())
		}
		switch eb.Error.Code {
		case api.CodeInvalidArgument, api.CodeTooLarge:
		default:
			t.Fatalf("status %d code %q (%s); a request body may only be refused as invalid_argument or too_large", res.StatusCode, eb.Error.Code, eb.Error.Message)
		}
		if eb.Error.Code.Status() != res.StatusCode || eb.Error.Message == "" {
			t.Fatalf("status %d with code %q message %q", res.StatusCode, eb.Error.Code, eb.Error.Message)
		}
	})
}

func checkLaunch(t *testing.T, cfg policy.Config, session bool, body []byte, got *launch.Request) {
	t.Helper()
	if !json.Valid(body) {
		t.Fatalf("launched from a body that is not valid JSON: %q", body)
	}
	if got.Runtime != "python" && got.Runtime != "javascript" {
		t.Fatalf("launched runtime %q", got.Runtime)
	}
	if got.Code == "" || int64(len(got.Code)) > cfg.MaxCodeBytes || strings.IndexByte(got.Code, 0) >= 0 {
		t.Fatalf("launched code of %d bytes (NUL: %v)", len(got.Code), strings.IndexByte(got.Code, 0) >= 0)
	}
	max := cfg.ExecTimeoutMaxMS
	if session {
		max = cfg.ExecTimeoutCapMS
	}
	if got.Limits.TimeoutMS < 1 || got.Limits.TimeoutMS > max {
		t.Fatalf("launched with timeout %d ms (cap %d)", got.Limits.TimeoutMS, max)
	}
	if got.Network != policy.NetworkNone {
		t.Fatalf("launched with network %q", got.Network)
	}
	seen := map[string]bool{}
	var total int64
	for _, f := range got.Files {
		p := f.Path
		if p == "" || strings.HasPrefix(p, "/") || path.Clean(p) != p || strings.ContainsAny(p, "\x00\\") || seen[p] {
			t.Fatalf("launched with file path %q", p)
		}
		for _, elem := range strings.Split(p, "/") {
			if elem == ".." || elem == "." {
				t.Fatalf("launched with file path %q", p)
			}
		}
		seen[p] = true
		total += int64(len(f.Content))
	}
	if total > cfg.WorkspaceQuotaBytes {
		t.Fatalf("launched with %d bytes of files, above the quota %d", total, cfg.WorkspaceQuotaBytes)
	}
	for p := range seen {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if seen[d] {
				t.Fatalf("launched with %q both a file and a directory of %q", d, p)
			}
		}
	}
	for name, v := range got.Env {
		if name == "" || name[0] >= '0' && name[0] <= '9' || strings.HasPrefix(name, "LD_") || strings.HasPrefix(name, "SANDBOXD_") || strings.IndexByte(v, 0) >= 0 {
			t.Fatalf("launched with env %q", name)
		}
		for i := 0; i < len(name); i++ {
			c := name[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
				t.Fatalf("launched with env name %q", name)
			}
		}
	}
	for _, a := range got.Artifacts {
		if _, err := path.Match(a, ""); err != nil || strings.HasPrefix(a, "/") || path.Clean(a) != a {
			t.Fatalf("launched with artifact pattern %q", a)
		}
	}
}
