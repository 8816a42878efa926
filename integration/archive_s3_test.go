package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/archive/archivetest"
)

// s3Flags points a supervisor at srv, with a credentials file only the
// test user can read and a prefix of its own.
func s3Flags(t *testing.T, in *installation, srv *archivetest.Server, prefix string) []string {
	t.Helper()
	dir := in.path("state", "s3-creds-"+randID())
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	creds := srv.CredentialsFile(dir)
	for _, p := range []string{dir, creds} {
		if err := os.Chown(p, in.uid, in.gid); err != nil {
			t.Fatal(err)
		}
	}
	return []string{"--archive-backend", "s3", "--s3-endpoint", srv.Endpoint, "--s3-bucket", srv.Bucket,
		"--s3-credentials-file", creds, "--s3-prefix", prefix, "--s3-timeout", "5s"}
}

// emptyState moves what a supervisor keeps in the state directory aside
// (sessions, workspaces, local archives, spool), so the next supervisor
// starts with nothing of the last one's; the cleanup puts it back.
func emptyState(t *testing.T, in *installation) {
	t.Helper()
	aside := in.path("state", "aside-"+randID())
	if err := os.Mkdir(aside, 0o700); err != nil {
		t.Fatal(err)
	}
	names := []string{"sessions", "workspaces", "archives"}
	for _, n := range names {
		if err := os.Rename(in.path("state", n), filepath.Join(aside, n)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	for _, n := range names {
		if err := os.Mkdir(in.path("state", n), 0o700); err != nil {
			t.Fatal(err)
		}
		_ = os.Chown(in.path("state", n), in.uid, in.gid) // the state dir is root's, as install.sh makes it
	}
	t.Cleanup(func() {
		for _, n := range names {
			_ = os.RemoveAll(in.path("state", n))
			_ = os.Rename(filepath.Join(aside, n), in.path("state", n))
		}
		_ = os.RemoveAll(aside)
	})
}

func (s *supervisor) health(t *testing.T) api.Health {
	t.Helper()
	_, b := s.do("GET", "/v1/health", nil)
	var h api.Health
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatalf("health: %v: %s", err, b)
	}
	return h
}

// TestArchiveS3HandOff: supervisor A archives a keyed session to a real S3
// server (versitygw) and is stopped; supervisor B, with an empty state
// directory, restores it byte for byte (files, modes, symlinks). Then S3
// is stopped mid-archive: the delete and an exec still succeed, health is
// degraded (still ready), the failure is counted in /metrics and audited,
// and the next restore gets the last whole archive, never half of the new
// one. No log line or audit record of either supervisor holds a credential.
func TestArchiveS3HandOff(t *testing.T) {
	in := setup(t)
	srv := archivetest.Start(t)
	flags := s3Flags(t, in, srv, "it-"+randID()+"/")
	key := "conversation-" + randID()
	blob := make([]byte, 5<<20+3)
	for i := range blob {
		blob[i] = byte(i*7 + i>>11)
	}

	a := in.startSupervisor(t, supervisorOpts{extra: flags})
	sa := a.createSession(t, map[string]any{"key": key})
	if sa.Restored {
		t.Fatal("a new key restored something")
	}
	if st, b := a.raw("PUT", "/v1/sessions/"+sa.ID+"/files/dir/blob.bin", blob); st != 201 {
		t.Fatalf("upload: %d %s", st, b)
	}
	a.sessionExec(t, sa.ID, py("import os; open('made.txt','w').write('by payload'); os.symlink('made.txt', 'link'); os.chmod('made.txt', 0o640); os.chmod('dir', 0o750)"))
	if st, _ := a.do("DELETE", "/v1/sessions/"+sa.ID, nil); st != 204 {
		t.Fatalf("delete: %d", st)
	}
	if h := a.health(t); checkNamed(h, "archive") != "ok" {
		t.Fatalf("health after a good archive: %+v", h.Checks)
	}
	objects := 0
	for o := range srv.Client().ListObjects(context.Background(), srv.Bucket, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err == nil && strings.HasSuffix(o.Key, ".tar") {
			objects++
		}
	}
	if objects != 1 {
		t.Fatalf("%d archives in the bucket, want 1", objects)
	}
	a.stop()

	emptyState(t, in)
	b := in.startSupervisor(t, supervisorOpts{extra: flags})
	sb := b.createSession(t, map[string]any{"key": key})
	if !sb.Restored {
		t.Fatalf("B did not restore A's archive:\n%s", b.logs)
	}
	st, got := b.raw("GET", "/v1/sessions/"+sb.ID+"/files/dir/blob.bin", nil)
	if st != 200 || !bytes.Equal(got, blob) {
		t.Fatalf("restored blob differs (%d, %d bytes)", st, len(got))
	}
	r := b.sessionExec(t, sb.ID, py("import os, stat; print(open('made.txt').read(), os.readlink('link'), oct(stat.S_IMODE(os.stat('made.txt').st_mode)), oct(stat.S_IMODE(os.stat('dir').st_mode)))"))
	if r.Stdout != "by payload made.txt 0o640 0o750\n" {
		t.Fatalf("restored workspace: %+v", r)
	}

	// S3 stopped mid-archive of a new, larger version of the workspace.
	b.sessionExec(t, sb.ID, py("open('v2.bin','wb').write(b'x'*(60<<20))"))
	done := make(chan int, 1)
	start := time.Now()
	go func() { st, _ := b.do("DELETE", "/v1/sessions/"+sb.ID, nil); done <- st }()
	time.Sleep(150 * time.Millisecond)
	srv.Stop()
	if st := <-done; st != 204 {
		t.Fatalf("delete with S3 stopped mid-archive: %d", st)
	}
	t.Logf("delete with S3 stopped mid-archive answered 204 in %v", time.Since(start))
	if r := b.exec(py("print('still runs')")); r.Stdout != "still runs\n" {
		t.Fatalf("exec with S3 down: %+v", r)
	}
	h := b.health(t)
	if !h.OK || !strings.HasPrefix(checkNamed(h, "archive"), "degraded") {
		t.Fatalf("health with S3 down: ok %v, checks %+v (want ready and archive degraded)", h.OK, h.Checks)
	}
	_, m := b.do("GET", "/metrics", nil)
	if !bytes.Contains(m, []byte(`sandboxd_archive_failures_total{backend="s3",op="put"} 1`)) {
		t.Fatalf("metrics:\n%s", m)
	}
	failed := false
	for _, rec := range b.auditRecords() {
		if rec["step"] == "session.archive" && rec["ok"] == false {
			failed = true
		}
	}
	if !failed {
		t.Fatal("the failed archive is not audited")
	}

	// Back: the last whole archive (without v2.bin), never half the new one.
	srv.Restart()
	sc := b.createSession(t, map[string]any{"key": key})
	if !sc.Restored {
		t.Fatalf("the last whole archive was not restored:\n%s", b.logs)
	}
	if st, _ := b.raw("GET", "/v1/sessions/"+sc.ID+"/files/v2.bin", nil); st != 404 {
		t.Fatalf("v2.bin, written only by the interrupted archive, came back: %d", st)
	}
	if st, got := b.raw("GET", "/v1/sessions/"+sc.ID+"/files/dir/blob.bin", nil); st != 200 || !bytes.Equal(got, blob) {
		t.Fatalf("blob after recovery: %d, %d bytes", st, len(got))
	}
	if h := b.health(t); checkNamed(h, "archive") != "ok" {
		t.Fatalf("health after recovery: %+v", h.Checks)
	}
	b.do("DELETE", "/v1/sessions/"+sc.ID, nil)
	b.stop()

	// No credential anywhere.
	for name, text := range map[string]string{"A's log": a.logs.String(), "B's log": b.logs.String(),
		"A's audit log": readFile(t, a.audit), "B's audit log": readFile(t, b.audit)} {
		for _, secret := range []string{srv.SecretKey, srv.AccessKey} {
			if strings.Contains(text, secret) {
				t.Errorf("%s holds a credential", name)
			}
		}
		if len(text) == 0 {
			t.Errorf("%s is empty: nothing was checked", name)
		}
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestArchiveDefaultOn: with no archive setting at all (the `make run`
// configuration), a keyed session deleted and created again gets its files
// back from <state-dir>/archives, and the archive is stored with its
// checksum there.
func TestArchiveDefaultOn(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	key := "default-" + randID()
	a := s.createSession(t, map[string]any{"key": key})
	if st, b := s.raw("PUT", "/v1/sessions/"+a.ID+"/files/notes.txt", []byte("kept across the reap\n")); st != 201 {
		t.Fatalf("upload: %d %s", st, b)
	}
	if st, _ := s.do("DELETE", "/v1/sessions/"+a.ID, nil); st != 204 {
		t.Fatalf("delete: %d", st)
	}
	sums, _ := filepath.Glob(in.path("state", "archives", "u*", "*.tar.sha256"))
	if len(sums) == 0 {
		t.Fatalf("no archive with its checksum under %s", in.path("state", "archives"))
	}
	b := s.createSession(t, map[string]any{"key": key})
	t.Cleanup(func() { s.do("DELETE", "/v1/sessions/"+b.ID, nil) })
	if !b.Restored {
		t.Fatalf("not restored under the default configuration:\n%s", s.logs)
	}
	if st, got := s.raw("GET", "/v1/sessions/"+b.ID+"/files/notes.txt", nil); st != 200 || string(got) != "kept across the reap\n" {
		t.Fatalf("restored file: %d %q", st, got)
	}
	if h := s.health(t); checkNamed(h, "archive") != "ok" {
		t.Fatalf("health: %+v", h.Checks)
	}
}
