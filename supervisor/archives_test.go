package supervisor

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/archive"
	"github.com/sandboxd/sandboxd/archive/archivetest"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/launch"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/session"
)

// switchRig is a server on local archives whose operator lets admins
// choose s3 on one real S3 server (versitygw), with its state persisted.
type switchRig struct {
	state string
	cfg   policy.Config
	srv   *Server
	st    *session.Store
	sink  *audit.Memory
}

func newSwitchRig(t *testing.T, state string, cfg policy.Config) *switchRig {
	t.Helper()
	st, err := session.Open(session.Config{StateDir: state, MaxSessions: 4, TTLDefault: 60, TTLCap: 60,
		ArchiveDir: cfg.ArchiveLocalDir(), ArchiveMaxBytes: 1 << 20, SelfUID: os.Getuid(), Log: discardLog()})
	if err != nil {
		t.Fatal(err)
	}
	sink := &audit.Memory{}
	srv := NewServer(cfg, &fakeLauncher{}, fakeProber{readyChecks()}, sink, nil, "t")
	srv.SetSessions(st)
	if err := srv.LoadSettings(state); err != nil {
		t.Fatal(err)
	}
	return &switchRig{state: state, cfg: cfg, srv: srv, st: st, sink: sink}
}

func switchConfig(state string, s3 *archivetest.Server) policy.Config {
	cfg := testConfig()
	cfg.StateDir = state
	cfg.AdminArchiveBackends = []string{"local", "s3", "none"}
	cfg.AdminS3Endpoints = []string{s3.Endpoint}
	cfg.S3Bucket = s3.Bucket
	return cfg
}

func (r *switchRig) patch(t *testing.T, body string) (int, string) {
	t.Helper()
	resp := asUID(r.srv, 0, http.MethodPatch, api.AdminSettingsPath, body)
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// cycle creates a keyed session as uid 1000, writes a file when it is new,
// deletes it (archiving it), and reports whether it was restored.
func (r *switchRig) cycle(t *testing.T, key string) bool {
	t.Helper()
	owner := launch.Caller{UID: 1000}
	s, err := r.st.Create(owner, nil, key)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(r.st.WorkspaceDir(s), "notes.txt")
	if s.Restored {
		if b, err := os.ReadFile(p); err != nil || string(b) != "kept" {
			t.Fatalf("restored notes.txt: %q, %v", b, err)
		}
	} else if err := os.WriteFile(p, []byte("kept"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.st.Delete(s.ID, owner, "delete"); err != nil {
		t.Fatal(err)
	}
	return s.Restored
}

// TestSettingsArchiveSwitchS3: an admin switches archives from local to a
// real S3 server and back, live: the next keyed session's archive lands in
// the bucket and restores from it; the switch survives a restart, is
// audited old -> new with no credential anywhere, and the metrics keep
// both backends.
func TestSettingsArchiveSwitchS3(t *testing.T) {
	s3 := archivetest.Start(t)
	state := t.TempDir()
	cfg := switchConfig(state, s3)
	cfg.S3CredentialsFile = s3.CredentialsFile(t.TempDir())
	r := newSwitchRig(t, state, cfg)

	if r.cycle(t, "before") {
		t.Fatal("a fresh key restored")
	}
	code, body := r.patch(t, `{"archive_backend":"s3","archive_s3_endpoint":"`+s3.Endpoint+`","archive_s3_prefix":"live/"}`)
	if code != http.StatusOK {
		t.Fatalf("patch s3: %d %s", code, body)
	}
	got := settingsOf(t, []byte(body))
	if got[policy.SettingArchiveBackend].Value != "s3" || got[policy.SettingS3Credentials].Value != "set" || got[policy.SettingArchiveBackend].Source != policy.SourceAdmin {
		t.Fatalf("settings after the switch: %+v", got)
	}
	if r.cycle(t, "conv") || !r.cycle(t, "conv") {
		t.Fatal("the keyed session did not round-trip through S3")
	}
	// The archive is in the bucket, under the prefix and the owner's
	// directory, and not in the local directory.
	k := archive.KeyFor(archive.UIDOwner(1000), "conv")
	if _, err := s3.Client().StatObject(context.Background(), s3.Bucket, "live/"+archive.Name(k), minio.StatObjectOptions{}); err != nil {
		t.Fatalf("not in the bucket: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cfg.ArchiveLocalDir(), archive.Name(k))); err == nil {
		t.Fatal("archived locally after the switch to s3")
	}

	// A restart (a new server on the same state directory) keeps s3.
	r2 := newSwitchRig(t, state, cfg)
	if a := r2.st.Archives(); a == nil || a.Backend() != "s3" {
		t.Fatalf("after a restart the store is %v, want s3", a)
	}
	if !r2.cycle(t, "conv") {
		t.Fatal("not restored from S3 after the restart")
	}
	if code, body := r2.patch(t, `{"archive_backend":"local"}`); code != http.StatusOK {
		t.Fatalf("patch local: %d %s", code, body)
	}
	if !r2.cycle(t, "before") {
		t.Fatal("the local archive written before the switch did not restore after switching back")
	}

	// Metrics: each family once, both backends counted.
	resp := asUID(r2.srv, 0, http.MethodGet, "/metrics", "")
	m, _ := io.ReadAll(resp.Body)
	for _, want := range []string{`sandboxd_archive_operations_total{backend="s3",op="put"} 1`, `sandboxd_archive_operations_total{backend="local",op="put"} 1`,
		`sandboxd_settings_changes_total 1`} {
		if !strings.Contains(string(m), want) {
			t.Errorf("metrics lack %s:\n%s", want, m)
		}
	}
	if n := strings.Count(string(m), "# TYPE sandboxd_archive_operations_total"); n != 1 {
		t.Errorf("archive operations family written %d times", n)
	}

	// Audited old -> new; no credential in any record or answer.
	var change map[string]facts.SettingChange
	for _, rec := range r.sink.Records {
		if f, ok := rec.Facts.(*facts.SettingsChange); ok && rec.OK {
			change = f.Changes
		}
	}
	if be := change[policy.SettingArchiveBackend]; be.Old != "local" || be.New != "s3" {
		t.Fatalf("audited change %v", change)
	}
	requireStrictFacts(t, r.sink.Records, facts.StepSettingsChange)
	all, _ := json.Marshal(append(r.sink.Records, r2.sink.Records...))
	for _, secret := range []string{s3.SecretKey, s3.AccessKey} {
		if strings.Contains(string(all), secret) || strings.Contains(body, secret) {
			t.Fatal("a credential appears in an audit record or an answer")
		}
	}
}

// TestSettingsArchiveS3NoCredentials: choosing s3 when the operator set no
// credentials is a 400 naming them; nothing changes, nothing persists.
func TestSettingsArchiveS3NoCredentials(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	s3 := archivetest.Start(t)
	state := t.TempDir()
	r := newSwitchRig(t, state, switchConfig(state, s3))
	code, body := r.patch(t, `{"archive_backend":"s3","archive_s3_endpoint":"`+s3.Endpoint+`"}`)
	if code != http.StatusBadRequest || !strings.Contains(body, "no s3 credentials") || !strings.Contains(body, "--s3-credentials-file") {
		t.Fatalf("patch without credentials: %d %s", code, body)
	}
	if a := r.st.Archives(); a == nil || a.Backend() != "local" {
		t.Fatalf("store changed to %v", a)
	}
	if _, err := os.Stat(filepath.Join(state, "sessions", SettingsFileName)); err == nil {
		t.Fatal("a refused patch was persisted")
	}
	resp := asUID(r.srv, 0, http.MethodGet, api.AdminSettingsPath, "")
	b, _ := io.ReadAll(resp.Body)
	if got := settingsOf(t, b)[policy.SettingS3Credentials]; got.Value != "unset" {
		t.Fatalf("credentials shown as %v", got.Value)
	}
}

// TestSettingsArchiveS3CredentialsGoneAtStart: persisted s3 settings whose
// credentials the operator removed stop the start with a message saying
// so, rather than archiving somewhere the admin did not choose.
func TestSettingsArchiveS3CredentialsGoneAtStart(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	s3 := archivetest.Start(t)
	state := t.TempDir()
	cfg := switchConfig(state, s3)
	cfg.S3CredentialsFile = s3.CredentialsFile(t.TempDir())
	r := newSwitchRig(t, state, cfg)
	if code, body := r.patch(t, `{"archive_backend":"s3","archive_s3_endpoint":"`+s3.Endpoint+`"}`); code != http.StatusOK {
		t.Fatalf("patch: %d %s", code, body)
	}
	if err := os.Remove(cfg.S3CredentialsFile); err != nil {
		t.Fatal(err)
	}
	srv := NewServer(cfg, &fakeLauncher{}, fakeProber{readyChecks()}, &audit.Memory{}, nil, "t")
	srv.SetSessions(r.st)
	if err := srv.LoadSettings(state); err == nil || !strings.Contains(err.Error(), "no s3 credentials") {
		t.Fatalf("start without the credentials: %v", err)
	}
}
