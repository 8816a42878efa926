package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/launch"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/session"
)

func settingsOf(t *testing.T, body []byte) map[string]api.Setting {
	t.Helper()
	var s api.Settings
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	out := map[string]api.Setting{}
	for _, x := range s.Settings {
		out[x.Key] = x
	}
	return out
}

// asUID serves one request through the handler as a peer with uid.
func asUID(srv *Server, uid int, method, path, body string) *http.Response {
	req, _ := http.NewRequest(method, "http://sandboxd"+path, strings.NewReader(body))
	req = req.WithContext(context.WithValue(req.Context(), peerKey{}, peer{caller: launch.Caller{UID: uid, GID: uid, PID: 4242}}))
	rec := newRecorder()
	srv.Handler().ServeHTTP(rec, req)
	return rec.Result()
}

func TestSettingsAdminOnly(t *testing.T) {
	cfg := testConfig()
	cfg.AllowUIDs = []int{1000, 1001}
	cfg.AdminUIDs = []int{1001}
	sink := &audit.Memory{}
	srv := NewServer(cfg, &fakeLauncher{}, fakeProber{readyChecks()}, sink, nil, "t")
	srv.selfUID = 999
	for _, tc := range []struct {
		uid    int
		method string
		want   int
	}{
		{1000, http.MethodGet, 403}, {1000, http.MethodPatch, 403},
		{1001, http.MethodGet, 200}, {0, http.MethodGet, 200}, {999, http.MethodGet, 200},
		{1001, http.MethodPost, 405},
	} {
		resp := asUID(srv, tc.uid, tc.method, api.AdminSettingsPath, `{"max_sessions": 1}`)
		if resp.StatusCode != tc.want {
			t.Errorf("uid %d %s: %d, want %d", tc.uid, tc.method, resp.StatusCode, tc.want)
		}
	}
	if got := srv.liveConfig().MaxSessions; got != cfg.MaxSessions {
		t.Fatalf("a non-admin PATCH changed max_sessions to %d", got)
	}
	requireStrictFacts(t, sink.Records, facts.StepSettingsChange)
}

func TestSettingsPatchLiveAndPersisted(t *testing.T) {
	state := t.TempDir()
	if err := os.Mkdir(filepath.Join(state, "sessions"), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.StateDir = state
	ts := startServer(t, cfg, nil, readyChecks())
	if err := ts.srv.LoadSettings(state); err != nil {
		t.Fatal(err)
	}

	r := ts.do("PATCH", api.AdminSettingsPath, `{"exec_timeout_ms": 60001}`)
	if code, msg := apiError(t, r); r.status != 400 || code != api.CodeInvalidArgument || !strings.Contains(msg, "cap 30000") {
		t.Fatalf("above cap: %d %s %s", r.status, code, msg)
	}
	r = ts.do("PATCH", api.AdminSettingsPath, `{"exec_timeout_ms": 1500, "max_concurrent_execs": 2}`)
	if r.status != 200 {
		t.Fatalf("patch: %d %s", r.status, r.body)
	}
	got := settingsOf(t, r.body)
	if s := got[policy.SettingExecTimeout]; s.Value != float64(1500) || s.Cap != float64(30000) || s.Source != policy.SourceAdmin {
		t.Fatalf("exec_timeout_ms: %+v", s)
	}
	if s := got[policy.SettingIdleTTL]; s.Source != policy.SourceDefault {
		t.Fatalf("idle_ttl_seconds: %+v", s)
	}
	// The next exec gets the new default timeout, without a restart.
	if r := ts.do("POST", "/v1/exec", `{"language":"python","code":"print(1)"}`); r.status != 200 {
		t.Fatalf("exec: %d %s", r.status, r.body)
	}
	calls := ts.launcher.calls()
	if n := calls[len(calls)-1].Limits.TimeoutMS; n != 1500 {
		t.Fatalf("exec ran with timeout %d, want 1500", n)
	}
	if ts.srv.gate.Max() != 2 {
		t.Fatalf("admission max %d, want 2", ts.srv.gate.Max())
	}
	if !strings.Contains(string(ts.do("GET", "/metrics", "").body), "sandboxd_settings_changes_total 1\n") {
		t.Fatal("settings change not counted")
	}

	// Audited: old -> new (read after Serve returned: the sink is then quiet).
	if err := ts.stop(); err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, rec := range ts.sink.Records {
		if rec.Step == facts.StepSettingsChange && rec.OK {
			b, _ := json.Marshal(rec.Facts)
			if strings.Contains(string(b), `"exec_timeout_ms":{"new":1500,"old":30000`) {
				found = true
			}
		}
	}
	if !found {
		t.Fatalf("no audit record with old -> new: %+v", ts.sink.Records)
	}
	requireStrictFacts(t, ts.sink.Records, facts.StepSettingsChange)
	// Persistence round trip: a new server over the same state directory.
	srv2 := NewServer(cfg, &fakeLauncher{}, fakeProber{readyChecks()}, &audit.Memory{}, nil, "t")
	if err := srv2.LoadSettings(state); err != nil {
		t.Fatal(err)
	}
	if c := srv2.liveConfig(); c.ExecTimeoutMS != 1500 || c.MaxConcurrentExecs != 2 || srv2.gate.Max() != 2 {
		t.Fatalf("after restart: timeout %d, max concurrent %d", c.ExecTimeoutMS, c.MaxConcurrentExecs)
	}
	// Re-clamped against lowered caps.
	low := cfg
	low.ExecTimeoutMS = 1000
	srv3 := NewServer(low, &fakeLauncher{}, fakeProber{readyChecks()}, &audit.Memory{}, nil, "t")
	if err := srv3.LoadSettings(state); err != nil {
		t.Fatal(err)
	}
	if c := srv3.liveConfig(); c.ExecTimeoutMS != 1000 {
		t.Fatalf("not re-clamped: %d", c.ExecTimeoutMS)
	}
	// A corrupt file stops the start rather than loosening the limits.
	if err := os.WriteFile(filepath.Join(state, "sessions", SettingsFileName), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := NewServer(cfg, &fakeLauncher{}, fakeProber{readyChecks()}, &audit.Memory{}, nil, "t").LoadSettings(state); err == nil {
		t.Fatal("a corrupt settings file was accepted")
	}
}

func TestSettingsAuditFailureChangesNothing(t *testing.T) {
	state := t.TempDir()
	if err := os.Mkdir(filepath.Join(state, "sessions"), 0o700); err != nil {
		t.Fatal(err)
	}
	srv := NewServer(testConfig(), &fakeLauncher{}, fakeProber{readyChecks()}, failingSink{}, nil, "t")
	if err := srv.LoadSettings(state); err != nil {
		t.Fatal(err)
	}
	resp := asUID(srv, 0, http.MethodPatch, api.AdminSettingsPath, `{"max_sessions": 1}`)
	if resp.StatusCode != 503 || srv.liveConfig().MaxSessions != testConfig().MaxSessions {
		t.Fatalf("status %d, max_sessions %d", resp.StatusCode, srv.liveConfig().MaxSessions)
	}
	if b, err := os.ReadFile(filepath.Join(state, "sessions", SettingsFileName)); err == nil && strings.Contains(string(b), "max_sessions") {
		t.Fatalf("the unaudited change persisted: %s", b)
	}
}

// TestSettingsReachSessionStore: max_sessions and idle_ttl_seconds apply to
// the next create without a restart; existing sessions stay.
func TestSettingsReachSessionStore(t *testing.T) {
	cfg := testConfig()
	st, err := session.Open(session.Config{StateDir: t.TempDir(), MaxSessions: cfg.MaxSessions, MaxPerCaller: cfg.SessionShare(),
		TTLDefault: cfg.IdleTTLSeconds, TTLCap: cfg.IdleTTLCapSeconds, SelfUID: os.Getuid(), Log: discardLog()})
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(cfg, &fakeLauncher{}, fakeProber{readyChecks()}, &audit.Memory{}, nil, "t")
	srv.SetSessions(st)
	first, err := st.Create(launch.Caller{UID: 1000}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if resp := asUID(srv, 0, http.MethodPatch, api.AdminSettingsPath, `{"max_sessions": 1, "idle_ttl_seconds": 60}`); resp.StatusCode != 200 {
		t.Fatalf("patch: %d", resp.StatusCode)
	}
	if _, err := st.Create(launch.Caller{UID: 1001}, nil, ""); !errors.Is(err, session.ErrTooMany) {
		t.Fatalf("a second session under max_sessions 1: %v", err)
	}
	if _, err := st.Get(first.ID, launch.Caller{UID: 1000}); err != nil {
		t.Fatalf("the existing session went away: %v", err)
	}
	if resp := asUID(srv, 0, http.MethodPatch, api.AdminSettingsPath, `{"max_sessions": null}`); resp.StatusCode != 200 {
		t.Fatalf("reset: %d", resp.StatusCode)
	}
	s2, err := st.Create(launch.Caller{UID: 1001}, nil, "")
	if err != nil || s2.TTLSeconds != 60 {
		t.Fatalf("after reset: %v, ttl %v", err, s2)
	}
}

// TestSettingsArchiveBackendNone: archive_backend none stops archiving and
// restoring keyed sessions live; the operator's backend turns them back on.
func TestSettingsArchiveBackendNone(t *testing.T) {
	cfg := testConfig()
	state := t.TempDir()
	st, err := session.Open(session.Config{StateDir: state, MaxSessions: 4, TTLDefault: 60, TTLCap: 60, ArchiveDir: filepath.Join(state, "archives"),
		ArchiveMaxBytes: 1 << 20, SelfUID: os.Getuid(), Log: discardLog()})
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(cfg, &fakeLauncher{}, fakeProber{readyChecks()}, &audit.Memory{}, nil, "t")
	srv.SetSessions(st)
	owner := launch.Caller{UID: 1000}
	cycle := func(want bool) {
		t.Helper()
		s, err := st.Create(owner, nil, "conv")
		if err != nil {
			t.Fatal(err)
		}
		if s.Restored != want {
			t.Fatalf("restored %v, want %v", s.Restored, want)
		}
		if err := os.WriteFile(filepath.Join(st.WorkspaceDir(s), "f"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := st.Delete(s.ID, owner, "delete"); err != nil {
			t.Fatal(err)
		}
	}
	cycle(false) // archived
	if resp := asUID(srv, 0, http.MethodPatch, api.AdminSettingsPath, `{"archive_backend": "none"}`); resp.StatusCode != 200 {
		t.Fatalf("patch: %d", resp.StatusCode)
	}
	cycle(false) // not restored, not archived
	if resp := asUID(srv, 0, http.MethodPatch, api.AdminSettingsPath, `{"archive_backend": "local"}`); resp.StatusCode != 200 {
		t.Fatalf("patch: %d", resp.StatusCode)
	}
	cycle(true) // the archive of the first cycle, untouched by the second
	if resp := asUID(srv, 0, http.MethodPatch, api.AdminSettingsPath, `{"archive_backend": "s3"}`); resp.StatusCode != 400 {
		t.Fatalf("s3 without the operator's S3: %d", resp.StatusCode)
	}
}
