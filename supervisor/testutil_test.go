package supervisor

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/launch"
	"github.com/sandboxd/sandboxd/policy"
)

// fakeLauncher records its requests and answers with fn.
type fakeLauncher struct {
	mu   sync.Mutex
	reqs []launch.Request
	fn   func(ctx context.Context, req launch.Request) (*launch.ExecResult, error)
}

func (f *fakeLauncher) Launch(ctx context.Context, req launch.Request) (*launch.ExecResult, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	fn := f.fn
	f.mu.Unlock()
	if fn == nil {
		return okResult(req), nil
	}
	return fn(ctx, req)
}

func (f *fakeLauncher) calls() []launch.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]launch.Request(nil), f.reqs...)
}

func okResult(req launch.Request) *launch.ExecResult {
	zero := 0
	return &launch.ExecResult{
		ID:         req.ExecID,
		ExitCode:   &zero,
		Stdout:     "1\n",
		DurationMS: 41,
		Usage:      launch.Usage{CPUMS: 30, MaxRSSKB: 9000},
		Artifacts:  []launch.Artifact{},
		Policy:     launch.PolicyAttestation{Limits: req.Limits, ProfileSHA256: "abc", HelperVersion: "test"},
	}
}

type fakeProber struct{ checks launch.HealthChecks }

func (p fakeProber) Probe(context.Context, launch.Caller) launch.HealthChecks { return p.checks }

func readyChecks() launch.HealthChecks {
	return launch.HealthChecks{Bwrap: "ok", Userns: "ok", Seccomp: "ok", Helper: "ok", Cgroups: "v1", Disk: "ok"}
}

// failingSink fails every write, like a full disk.
type failingSink struct{}

func (failingSink) Write(audit.Record) error { return io.ErrShortWrite }

type testServer struct {
	t        *testing.T
	srv      *Server
	launcher *fakeLauncher
	sink     *audit.Memory
	sock     string
	client   *http.Client
	cancel   context.CancelFunc
	done     chan error
}

func testConfig() policy.Config {
	cfg := policy.Defaults()
	cfg.MaxBodyBytes = 64 << 10
	cfg.MaxCodeBytes = 16 << 10
	return cfg
}

type serverOpt func(*Server)

// startServer serves a Server with a fake launcher and prober on a real Unix
// socket in a temporary directory, so peer credentials are real.
func startServer(t *testing.T, cfg policy.Config, fl *fakeLauncher, checks launch.HealthChecks, opts ...serverOpt) *testServer {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s.sock")
	return startServerAt(t, sock, "", cfg, fl, checks, opts...)
}

func startServerAt(t *testing.T, sock, group string, cfg policy.Config, fl *fakeLauncher, checks launch.HealthChecks, opts ...serverOpt) *testServer {
	t.Helper()
	if fl == nil {
		fl = &fakeLauncher{}
	}
	sink := &audit.Memory{}
	srv := NewServer(cfg, fl, fakeProber{checks}, sink, nil, "1.2.3")
	for _, o := range opts {
		o(srv)
	}
	ln, err := Listen(sock, group)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts := &testServer{t: t, srv: srv, launcher: fl, sink: sink, sock: sock, client: unixClient(sock), cancel: cancel, done: make(chan error, 1)}
	go func() { ts.done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() { ts.stop() })
	return ts
}

func (ts *testServer) stop() error {
	ts.cancel()
	select {
	case err := <-ts.done:
		ts.done <- err // let a second stop see it too
		return err
	case <-time.After(30 * time.Second):
		ts.t.Fatal("Serve did not return after cancel")
		return nil
	}
}

func unixClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		DisableKeepAlives: true,
	}}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (ts *testServer) do(method, path, body string, hdr ...string) response {
	ts.t.Helper()
	return ts.doCtx(context.Background(), method, path, body, hdr...)
}

func (ts *testServer) doCtx(ctx context.Context, method, path, body string, hdr ...string) response {
	ts.t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, "http://sandboxd"+path, strings.NewReader(body))
	if err != nil {
		ts.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := ts.client.Do(req)
	if err != nil {
		ts.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		ts.t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// apiError decodes an error body strictly: exactly {"error":{"code","message"}}.
func apiError(t *testing.T, r response) (code api.ErrorCode, msg string) {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("error Content-Type = %q", ct)
	}
	var eb api.ErrorBody
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&eb); err != nil {
		t.Fatalf("error body %s: %v", r.body, err)
	}
	if eb.Error.Code == "" || eb.Error.Message == "" {
		t.Fatalf("error body %s lacks code or message", r.body)
	}
	return eb.Error.Code, eb.Error.Message
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func newJSONRequest(ctx context.Context, body string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", "http://sandboxd/v1/exec", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return req, nil
}

func newRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }

// requireStrictFacts fails t unless every record decodes strictly as its
// step's type (audit/facts): a step without a type, a fact the type does
// not define or a required fact missing is what `sandboxctl audit verify`
// would report. It also fails unless each of want was seen.
func requireStrictFacts(t *testing.T, recs []audit.Record, want ...string) {
	t.Helper()
	seen := map[string]bool{}
	for _, r := range recs {
		raw, err := json.Marshal(r.Facts)
		if err != nil {
			t.Fatalf("%s record: facts do not marshal: %v", r.Step, err)
		}
		if _, err := facts.Decode(r.Step, r.OK, raw); err != nil {
			t.Errorf("%s record (ok %v) is not as the schema says: %v\n%s", r.Step, r.OK, err, raw)
		}
		seen[r.Step] = true
	}
	for _, s := range want {
		if !seen[s] {
			t.Errorf("no %s record among %d", s, len(recs))
		}
	}
}
