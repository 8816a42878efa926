package supervisor

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/apikey"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/policy"
)

const (
	testKeyOps   = "0123456789abcdef0123456789abcdef0123456789abcdef"
	testKeyAlice = "fedcba9876543210fedcba9876543210fedcba9876543210"
)

// revokedServer starts a server on state with cfg and sink, loads the
// persisted settings and the keys file text keys.
func revokedServer(t *testing.T, state string, cfg policy.Config, sink audit.Sink, keys string) *Server {
	t.Helper()
	srv := NewServer(cfg, &fakeLauncher{}, fakeProber{readyChecks()}, sink, nil, "t")
	if err := srv.LoadSettings(state); err != nil {
		t.Fatal(err)
	}
	set, err := apikey.Parse([]byte(keys))
	if err != nil {
		t.Fatal(err)
	}
	srv.SetAuth(Auth{Keys: set})
	return srv
}

// TestSettingsOfRevokedSetter: settings set by uid 1001 (then an admin by
// --admin-uid) and by uid 0 persist with their setter. After a restart
// without --admin-uid 1001, AuditRevokedSetters writes one
// settings.setter_revoked record per setting of uid 1001: the archive
// backend is reset to the operator's (also in the file), the tightened
// max_sessions stays; uid 0's setting is neither audited nor reset.
func TestSettingsOfRevokedSetter(t *testing.T) {
	state := t.TempDir()
	if err := os.Mkdir(filepath.Join(state, "sessions"), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.AllowUIDs, cfg.AdminUIDs = []int{1001}, []int{1001}
	before := revokedServer(t, state, cfg, &audit.Memory{}, "ops:"+testKeyOps+":admin\n")
	for uid, patch := range map[int]string{1001: `{"archive_backend": "none", "max_sessions": 2}`, 0: `{"idle_ttl_seconds": 30}`} {
		if resp := asUID(before, uid, http.MethodPatch, api.AdminSettingsPath, patch); resp.StatusCode != 200 {
			t.Fatalf("uid %d patch: %d", uid, resp.StatusCode)
		}
	}
	resp := asUID(before, 0, http.MethodGet, api.AdminSettingsPath, "")
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	rows := settingsOf(t, body)
	if rows["archive_backend"].SetBy != "uid:1001" || rows["idle_ttl_seconds"].SetBy != "uid:0" || rows["exec_timeout_ms"].SetBy != "" {
		t.Fatalf("set_by in GET: %+v", rows)
	}

	cfg.AdminUIDs = nil
	mem := &audit.Memory{}
	after := revokedServer(t, state, cfg, mem, "ops:"+testKeyOps+":admin\n")
	if err := after.AuditRevokedSetters(RevokedAtStart); err != nil {
		t.Fatal(err)
	}
	got := map[string]facts.SettingsSetterRevoked{}
	for _, r := range mem.Records {
		if f, ok := r.Facts.(*facts.SettingsSetterRevoked); ok && r.Step == facts.StepSettingsSetterRevoked {
			got[f.Setting] = *f
		}
	}
	want := map[string]facts.SettingsSetterRevoked{
		"archive_backend": {Setting: "archive_backend", Value: "none", SetBy: "uid:1001", Reset: true, Trigger: "start"},
		"max_sessions":    {Setting: "max_sessions", Value: "2", SetBy: "uid:1001", Trigger: "start"},
	}
	if len(got) != len(want) || got["archive_backend"] != want["archive_backend"] || got["max_sessions"] != want["max_sessions"] {
		t.Fatalf("records %+v, want %+v", got, want)
	}
	eff := after.liveConfig()
	if eff.ArchiveBackend != cfg.ArchiveBackend || eff.MaxSessions != 2 || eff.IdleTTLSeconds != 30 {
		t.Fatalf("after: backend %q max_sessions %d idle_ttl %d", eff.ArchiveBackend, eff.MaxSessions, eff.IdleTTLSeconds)
	}
	b, err := os.ReadFile(filepath.Join(state, "sessions", SettingsFileName))
	if err != nil || strings.Contains(string(b), "archive_backend") {
		t.Fatalf("persisted after the reset: %s %v", b, err)
	}
	n := len(mem.Records)
	if err := after.AuditRevokedSetters(RevokedAtSIGHUP); err != nil || len(mem.Records) != n+1 {
		t.Fatalf("a second pass: %v, %d new records (want max_sessions again)", err, len(mem.Records)-n)
	}
}

// TestSettingsOfRevokedKey: a key's settings are judged by the keys in
// force: kept while the key is admin, audited (and the archive ones reset)
// once the key is gone or loses "admin"; a failed audit write resets nothing.
func TestSettingsOfRevokedKey(t *testing.T) {
	for _, tc := range []struct {
		name, keys string
		sink       audit.Sink
		revoked    bool
	}{
		{"still admin", "ops:" + testKeyOps + ":admin\n", &audit.Memory{}, false},
		{"removed", "alice:" + testKeyAlice + "\n", &audit.Memory{}, true},
		{"no longer admin", "ops:" + testKeyOps + "\n", &audit.Memory{}, true},
		{"audit fails", "alice:" + testKeyAlice + "\n", failingSink{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := t.TempDir()
			if err := os.Mkdir(filepath.Join(state, "sessions"), 0o700); err != nil {
				t.Fatal(err)
			}
			ov := `{"archive_backend":"none","set_by":{"archive_backend":"key:ops"}}`
			if err := os.WriteFile(filepath.Join(state, "sessions", SettingsFileName), []byte(ov), 0o600); err != nil {
				t.Fatal(err)
			}
			srv := revokedServer(t, state, testConfig(), tc.sink, tc.keys)
			err := srv.AuditRevokedSetters(RevokedAtSIGHUP)
			if _, failing := tc.sink.(failingSink); failing != (err != nil) {
				t.Fatalf("err %v", err)
			}
			if reset := srv.liveConfig().ArchiveBackend != "none"; reset != tc.revoked {
				t.Fatalf("backend %q, revoked %v", srv.liveConfig().ArchiveBackend, tc.revoked)
			}
			b, _ := os.ReadFile(filepath.Join(state, "sessions", SettingsFileName))
			if strings.Contains(string(b), "archive_backend") == tc.revoked {
				t.Fatalf("persisted: %s", b)
			}
		})
	}
}
