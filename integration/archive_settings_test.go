package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/archive/archivetest"
	"github.com/sandboxd/sandboxd/client"
)

// TestArchiveSettingsSwitchS3: with real privilege separation and a real S3
// server (versitygw), an admin switches the archive backend from local to
// s3 with `sandboxctl admin settings set archive.backend=s3 ...`, without a
// restart: the next keyed session's archive lands in the bucket. The switch
// survives a SIGKILL restart (the session restores from S3), is audited old
// -> new with no credential in any log line or record, and an admin switch
// back to local archives locally again.
func TestArchiveSettingsSwitchS3(t *testing.T) {
	in := setup(t)
	srv := archivetest.Start(t)
	emptyState(t, in) // also drops an earlier run's admin-settings.state
	prefix := "sw-" + randID() + "/"
	// The operator: local archives, s3 allowed to admins on this endpoint
	// with its credentials file.
	var flags []string
	s3 := s3Flags(t, in, srv, "unused/")
	for i := 0; i < len(s3); i += 2 {
		if s3[i] != "--archive-backend" && s3[i] != "--s3-prefix" {
			flags = append(flags, s3[i], s3[i+1])
		}
	}
	flags = append(flags, "--admin-archive-backends", "local,s3,none", "--admin-s3-endpoint", srv.Endpoint)
	opts := supervisorOpts{extra: flags}
	s := in.startSupervisor(t, opts)

	ctl := func(s *supervisor, args ...string) string {
		t.Helper()
		out, err := exec.Command(in.path("bin/sandboxctl"), append([]string{"admin", "settings", "--socket", s.socket}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("sandboxctl admin settings %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	out := ctl(s, "set", "archive.backend=s3", "archive.s3.prefix="+prefix)
	for _, row := range [][4]string{{"archive_backend", "s3", "local|s3|none", "admin"}, {"archive_s3_prefix", prefix, "any", "admin"},
		{"archive_s3_credentials", "set", "operator only", "flag/env"}} {
		if !regexpSetting(row[0], row[1], row[2], row[3]).MatchString(out) {
			t.Fatalf("no row %v in:\n%s", row, out)
		}
	}

	key := "switch-" + randID()
	a := s.createSession(t, map[string]any{"key": key})
	if st, b := s.raw("PUT", "/v1/sessions/"+a.ID+"/files/notes.txt", []byte("in s3\n")); st != 201 {
		t.Fatalf("upload: %d %s", st, b)
	}
	if st, _ := s.do("DELETE", "/v1/sessions/"+a.ID, nil); st != 204 {
		t.Fatalf("delete: %d", st)
	}
	var objects []string
	for o := range srv.Client().ListObjects(context.Background(), srv.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err == nil && strings.HasSuffix(o.Key, ".tar") {
			objects = append(objects, o.Key)
		}
	}
	if len(objects) != 1 {
		t.Fatalf("archives under %s in the bucket: %v, want 1\n%s", prefix, objects, s.logs)
	}
	if local, _ := filepath.Glob(in.path("state", "archives", "*", "*.tar")); len(local) != 0 {
		t.Fatalf("archived locally after the switch: %v", local)
	}

	// SIGKILL, restart: still s3, and the session restores from it.
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	s2 := in.startSupervisor(t, opts)
	b := s2.createSession(t, map[string]any{"key": key})
	if !b.Restored {
		t.Fatalf("not restored from S3 after a SIGKILL restart:\n%s", s2.logs)
	}
	if st, got := s2.raw("GET", "/v1/sessions/"+b.ID+"/files/notes.txt", nil); st != 200 || string(got) != "in s3\n" {
		t.Fatalf("restored file: %d %q", st, got)
	}
	if st, _ := s2.do("DELETE", "/v1/sessions/"+b.ID, nil); st != 204 {
		t.Fatalf("delete: %d", st)
	}

	// Back to local, live.
	out = ctl(s2, "set", "archive.backend=local")
	if !regexpSetting("archive_backend", "local", "local|s3|none", "admin").MatchString(out) {
		t.Fatalf("after the switch back:\n%s", out)
	}
	c := s2.createSession(t, map[string]any{"key": "local-" + randID()})
	s2.raw("PUT", "/v1/sessions/"+c.ID+"/files/x", []byte("x"))
	if st, _ := s2.do("DELETE", "/v1/sessions/"+c.ID, nil); st != 204 {
		t.Fatalf("delete: %d", st)
	}
	if local, _ := filepath.Glob(in.path("state", "archives", "*", "*.tar")); len(local) != 1 {
		t.Fatalf("local archives after the switch back: %v", local)
	}
	_, m := s2.do("GET", "/metrics", nil)
	for _, want := range []string{`sandboxd_archive_operations_total{backend="local",op="put"} 1`, `sandboxd_archive_operations_total{backend="s3",op="get"}`} {
		if !strings.Contains(string(m), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	s2.stop()

	// Audited old -> new in the first supervisor's log; no credential in
	// any log line or audit record of either.
	var audited bool
	for _, rec := range s.auditRecords() {
		facts, _ := json.Marshal(rec["facts"])
		if rec["step"] == "settings.change" && rec["ok"] == true && strings.Contains(string(facts), `"archive_backend":{"new":"s3","old":"local","source":"admin"}`) {
			audited = true
		}
	}
	if !audited {
		t.Fatal("no settings.change record with archive_backend local -> s3")
	}
	for name, text := range map[string]string{"log": s.logs.String() + s2.logs.String(), "audit": readFile(t, s.audit) + readFile(t, s2.audit)} {
		for _, secret := range []string{srv.SecretKey, srv.AccessKey} {
			if strings.Contains(text, secret) {
				t.Errorf("the %s holds a credential", name)
			}
		}
	}
}

// itAdminKey is the API key of the integration tests' admin key ("ops").
const itAdminKey = "c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00"

// startKeyed starts a supervisor on an empty state with a TCP listener and
// the keys file text keys; it returns the supervisor, the keys file's path
// and a maker of clients for a key.
func startKeyed(t *testing.T, in *installation, keys string) (*supervisor, string, func(key string) *client.Client) {
	t.Helper()
	emptyState(t, in)
	path := writeOwned(t, in, "keys", []byte(keys), 0o600)
	addr := "127.0.0.1:" + freePort(t)
	s := in.startSupervisor(t, supervisorOpts{extra: []string{"--listen", "tcp://" + addr, "--api-keys-file", path}})
	waitTCP(t, s, addr)
	return s, path, func(key string) *client.Client {
		c, err := client.NewRemote(client.Remote{URL: "http://" + addr, APIKey: key})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
}

// TestArchiveKeyCallersTCP: with real privilege separation, over TCP, an
// API key's keyed session is archived when it ends and restored for the
// same key only (another key naming the same session key gets an empty
// workspace); an API key marked admin reads and changes the live settings,
// a plain key is 403.
func TestArchiveKeyCallersTCP(t *testing.T) {
	in := setup(t)
	s, _, remote := startKeyed(t, in, "alice:"+itKeyAlice+"\nbob:"+itKeyBob+"\nops:"+itAdminKey+":admin\n")
	ctx := context.Background()
	alice, bob, ops := remote(itKeyAlice), remote(itKeyBob), remote(itAdminKey)

	key := "conv-" + randID()
	a, _, err := alice.CreateSession(ctx, nil, key)
	if err != nil || a.Restored {
		t.Fatalf("alice's first session: %+v %v", a, err)
	}
	if _, err := alice.PutFile(ctx, a.ID, "notes.txt", strings.NewReader("alice's\n"), 8); err != nil {
		t.Fatal(err)
	}
	if err := alice.DeleteSession(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if tars, _ := filepath.Glob(in.path("state", "archives", "kalice", "*.tar")); len(tars) != 1 {
		t.Fatalf("alice's archives under kalice/: %v", tars)
	}
	b, _, err := bob.CreateSession(ctx, nil, key)
	if err != nil || b.Restored {
		t.Fatalf("bob naming alice's key: %+v %v", b, err)
	}
	var buf strings.Builder
	if _, err := bob.GetFile(ctx, b.ID, "notes.txt", &buf); err == nil {
		t.Fatalf("bob reads alice's notes: %q", buf.String())
	}
	a2, _, err := alice.CreateSession(ctx, nil, key)
	if err != nil || !a2.Restored {
		t.Fatalf("alice's session not restored: %+v %v\n%s", a2, err, s.logs)
	}
	buf.Reset()
	if _, err := alice.GetFile(ctx, a2.ID, "notes.txt", &buf); err != nil || buf.String() != "alice's\n" {
		t.Fatalf("alice's restored notes: %q %v", buf.String(), err)
	}

	// Live settings: the admin key yes, a plain key no.
	if _, err := ops.PatchSettings(ctx, map[string]any{"max_sessions": 5}); err != nil {
		t.Fatalf("admin key patch: %v", err)
	}
	var apiE *client.APIError
	if _, err := alice.Settings(ctx); !errors.As(err, &apiE) || apiE.Status != 403 {
		t.Fatalf("plain key get: %v, want 403", err)
	}
	if _, err := bob.PatchSettings(ctx, map[string]any{"max_sessions": 1}); !errors.As(err, &apiE) || apiE.Status != 403 {
		t.Fatalf("plain key patch: %v, want 403", err)
	}
	got, err := ops.Settings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range got.Settings {
		if x.Key == "max_sessions" && x.Value != float64(5) {
			t.Fatalf("max_sessions %v after the admin key's patch", x.Value)
		}
	}
}

// TestSettingsOfRevokedAdminKey: an admin API key sets an archive setting
// (archive_backend none: workspaces are no longer archived) and a limit
// (max_sessions) over TCP; GET shows both as set by key:ops. The operator
// rewrites the keys file without that key and sends SIGHUP: the audit log
// gains one settings.setter_revoked record per setting, the archive
// setting is back to the operator's value (reset: true) and the limit, a
// tightening, stays (reset: false).
func TestSettingsOfRevokedAdminKey(t *testing.T) {
	in := setup(t)
	s, keys, remote := startKeyed(t, in, "alice:"+itKeyAlice+"\nops:"+itAdminKey+":admin\nops2:"+itKeyBob+":admin\n")
	ctx := context.Background()
	ops, ops2 := remote(itAdminKey), remote(itKeyBob)
	if _, err := ops.PatchSettings(ctx, map[string]any{"archive_backend": "none", "max_sessions": 5}); err != nil {
		t.Fatalf("admin key patch: %v", err)
	}
	row := func(c *client.Client, key string) api.Setting {
		t.Helper()
		got, err := c.Settings(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range got.Settings {
			if x.Key == key {
				return x
			}
		}
		t.Fatalf("no setting %s in %+v", key, got.Settings)
		return api.Setting{}
	}
	for _, k := range []string{"archive_backend", "max_sessions"} {
		if r := row(ops, k); r.Source != "admin" || r.SetBy != "key:ops" {
			t.Fatalf("%s after the admin key's patch: %+v, want source admin, set_by key:ops", k, r)
		}
	}

	if err := os.WriteFile(keys, []byte("alice:"+itKeyAlice+"\nops2:"+itKeyBob+":admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	revoked := map[string]map[string]any{}
	for deadline := time.Now().Add(15 * time.Second); len(revoked) < 2; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("settings.setter_revoked records after the key was revoked: %v\n%s", revoked, s.logs)
		}
		for _, r := range s.auditRecords() {
			if r["step"] == "settings.setter_revoked" {
				f, _ := r["facts"].(map[string]any)
				revoked[fmt.Sprint(f["setting"])] = f
			}
		}
	}
	want := map[string]map[string]any{
		"archive_backend": {"setting": "archive_backend", "value": "none", "set_by": "key:ops", "reset": true, "trigger": "SIGHUP"},
		"max_sessions":    {"setting": "max_sessions", "value": "5", "set_by": "key:ops", "trigger": "SIGHUP"},
	}
	if !reflect.DeepEqual(revoked, want) {
		t.Fatalf("settings.setter_revoked facts:\n got %v\nwant %v", revoked, want)
	}
	if _, err := ops.Settings(ctx); err == nil {
		t.Fatal("the revoked key still reads the settings")
	}
	if r := row(ops2, "archive_backend"); r.Value != "local" || r.Source == "admin" || r.SetBy != "" {
		t.Fatalf("archive_backend after the revocation: %+v, want the operator's local", r)
	}
	if r := row(ops2, "max_sessions"); r.Value != float64(5) || r.SetBy != "key:ops" {
		t.Fatalf("max_sessions after the revocation: %+v, want the tightening kept", r)
	}
}
