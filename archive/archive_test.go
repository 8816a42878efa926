package archive_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/sandboxd/sandboxd/archive"
	"github.com/sandboxd/sandboxd/archive/archivetest"
	"github.com/sandboxd/sandboxd/workspace"
)

func openS3(t *testing.T, srv *archivetest.Server, timeout time.Duration) *archive.S3 {
	t.Helper()
	s, err := archive.OpenS3(context.Background(), archive.S3Config{Endpoint: srv.Endpoint, Bucket: srv.Bucket,
		Prefix: "test/", CredentialsFile: srv.CredentialsFile(t.TempDir()), SpoolDir: filepath.Join(t.TempDir(), "spool"),
		Timeout: timeout, MetaTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func stores(t *testing.T) map[string]func(t *testing.T) archive.Store {
	return map[string]func(t *testing.T) archive.Store{
		"local": func(t *testing.T) archive.Store {
			l, err := archive.OpenLocal(filepath.Join(t.TempDir(), "archives"))
			if err != nil {
				t.Fatal(err)
			}
			return l
		},
		"s3": func(t *testing.T) archive.Store { return openS3(t, archivetest.Start(t), 20*time.Second) },
	}
}

// makeTree fills dir with files of several modes, a nested directory and
// symlinks (relative, absolute, dangling).
func makeTree(t *testing.T, dir string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	big := make([]byte, 3<<20+17)
	_, _ = rand.Read(big)
	must(os.MkdirAll(filepath.Join(dir, "sub", "deep"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "a.txt"), []byte("hello\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\necho hi\n"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "sub", "secret"), []byte("s"), 0o600))
	must(os.WriteFile(filepath.Join(dir, "sub", "deep", "big.bin"), big, 0o640))
	must(os.Symlink("../a.txt", filepath.Join(dir, "sub", "rel-link")))
	must(os.Symlink("/etc/passwd", filepath.Join(dir, "abs-link")))
	must(os.Symlink("missing", filepath.Join(dir, "dangling")))
	must(os.Chmod(filepath.Join(dir, "sub", "deep"), 0o750))
}

// snapshot describes a tree: type, mode, content or target of each entry.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "link " + target
		case fi.IsDir():
			out[rel] = "dir " + fi.Mode().Perm().String()
		default:
			b, _ := os.ReadFile(p)
			out[rel] = "file " + fi.Mode().Perm().String() + " " + string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	delete(out, ".")
	return out
}

func put(t *testing.T, s archive.Store, k archive.Key, dir string) archive.Info {
	t.Helper()
	ws, err := workspace.Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	info, err := s.Put(context.Background(), k, func(w io.Writer) (int64, error) { return workspace.ArchiveTo(ws, w, 0) })
	if err != nil {
		t.Fatalf("put: %v", err)
	}
	return info
}

func restore(s archive.Store, k archive.Key, dir string) error {
	r, err := s.Get(context.Background(), k)
	if err != nil {
		return err
	}
	defer r.Close()
	return workspace.RestoreFrom(r, dir, 0)
}

func TestRoundTrip(t *testing.T) {
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			src, dst := t.TempDir(), t.TempDir()
			makeTree(t, src)
			k := archive.KeyFor("uid:1000", "conversation-1")
			info := put(t, s, k, src)
			if info.Size < 3<<20 || len(info.SHA256) != 64 {
				t.Fatalf("info %+v", info)
			}
			if err := restore(s, k, dst); err != nil {
				t.Fatalf("restore: %v", err)
			}
			want, got := snapshot(t, src), snapshot(t, dst)
			if len(want) != len(got) {
				t.Fatalf("restored %d entries, want %d", len(got), len(want))
			}
			for p, w := range want {
				if got[p] != w {
					t.Errorf("%s: got %.60q, want %.60q", p, got[p], w)
				}
			}
			// Another owner with the same key names another archive.
			if err := restore(s, archive.KeyFor("uid:1001", "conversation-1"), t.TempDir()); !archive.IsNotFound(err) {
				t.Fatalf("other owner's restore: %v, want not found", err)
			}
			l, err := s.List(context.Background(), "uid:1000")
			if err != nil || len(l) != 1 || l[0].Key != k || l[0].Size != info.Size {
				t.Fatalf("list: %+v %v", l, err)
			}
			if err := s.Delete(context.Background(), k); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Get(context.Background(), k); !archive.IsNotFound(err) {
				t.Fatalf("get after delete: %v", err)
			}
		})
	}
}

// A failing archive writer stores nothing and keeps the earlier archive.
func TestPutFailureKeepsOld(t *testing.T) {
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			src := t.TempDir()
			makeTree(t, src)
			k := archive.KeyFor("uid:7", "k")
			first := put(t, s, k, src)
			_, err := s.Put(context.Background(), k, func(w io.Writer) (int64, error) {
				_, _ = w.Write(bytes.Repeat([]byte("x"), 1<<20))
				return 0, workspace.ErrTooLarge
			})
			if !errors.Is(err, workspace.ErrTooLarge) {
				t.Fatalf("put: %v", err)
			}
			r, err := s.Get(context.Background(), k)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if r.Info.SHA256 != first.SHA256 {
				t.Fatalf("the earlier archive was replaced")
			}
		})
	}
}

// Altered bytes are refused before a single byte reaches a workspace.
func TestChecksumRefused(t *testing.T) {
	t.Run("local", func(t *testing.T) {
		root := filepath.Join(t.TempDir(), "archives")
		s, err := archive.OpenLocal(root)
		if err != nil {
			t.Fatal(err)
		}
		src := t.TempDir()
		makeTree(t, src)
		k := archive.KeyFor("uid:5", "k")
		put(t, s, k, src)
		p := filepath.Join(root, "u5", k.Name+".tar")
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = f.WriteAt([]byte("X"), 700)
		_ = f.Close()
		dst := t.TempDir()
		if err := restore(s, k, dst); !errors.Is(err, archive.ErrChecksum) {
			t.Fatalf("restore of altered archive: %v", err)
		}
		if ents, _ := os.ReadDir(dst); len(ents) != 0 {
			t.Fatalf("restored %d entries from an altered archive", len(ents))
		}
	})
	t.Run("s3", func(t *testing.T) {
		srv := archivetest.Start(t)
		s := openS3(t, srv, 20*time.Second)
		src := t.TempDir()
		makeTree(t, src)
		k := archive.KeyFor("uid:5", "k")
		info := put(t, s, k, src)
		// Replace the object with a truncated copy that keeps the
		// recorded sha256: a half-written upload as another writer
		// could leave it.
		half := make([]byte, info.Size/2)
		obj, err := srv.Client().GetObject(context.Background(), srv.Bucket, "test/u5/"+k.Name+".tar", minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.ReadFull(obj, half)
		_, err = srv.Client().PutObject(context.Background(), srv.Bucket, "test/u5/"+k.Name+".tar", bytes.NewReader(half), int64(len(half)),
			minio.PutObjectOptions{UserMetadata: map[string]string{"sha256": info.SHA256}})
		if err != nil {
			t.Fatal(err)
		}
		dst := t.TempDir()
		if err := restore(s, k, dst); !errors.Is(err, archive.ErrChecksum) {
			t.Fatalf("restore of half an archive: %v", err)
		}
		if ents, _ := os.ReadDir(dst); len(ents) != 0 {
			t.Fatalf("restored %d entries from half an archive", len(ents))
		}
	})
}

// S3 stopped mid-archive, or hung: the put fails within the timeout with
// ErrUnavailable, is counted, health turns degraded, the error names no
// credential, the earlier archive is what a restore gets, and a success
// clears the degraded state.
func TestS3DownOrSlow(t *testing.T) {
	srv := archivetest.Start(t)
	s3 := openS3(t, srv, 2*time.Second)
	s := archive.Observe(s3)
	src := t.TempDir()
	makeTree(t, src)
	k := archive.KeyFor("uid:9", "k")
	first := put(t, s, k, src)

	ws, err := workspace.Open(src, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	// Stopped while the archive is being written.
	_, err = s.Put(context.Background(), k, func(w io.Writer) (int64, error) {
		n, err := workspace.ArchiveTo(ws, w, 0)
		srv.Stop()
		return n, err
	})
	if !errors.Is(err, archive.ErrUnavailable) {
		t.Fatalf("put with the server down: %v", err)
	}
	checkNoSecret(t, srv, err.Error())
	if d, msg, _ := s.Health(); !d {
		t.Fatalf("not degraded after a failed put")
	} else {
		checkNoSecret(t, srv, msg)
	}
	// Stopped mid-upload: the spool is complete, the multipart upload of
	// its 4 parts is under way when the server dies.
	srv.Restart()
	var spooled time.Time
	_, err = s.Put(context.Background(), k, func(w io.Writer) (int64, error) {
		n, err := io.Copy(w, io.LimitReader(rand.Reader, 64<<20))
		spooled = time.Now()
		go func() { time.Sleep(150 * time.Millisecond); srv.Stop() }()
		return n, err
	})
	t.Logf("upload of 64 MiB failed %v after the spool was complete (server stopped at 150 ms): %v", time.Since(spooled).Round(time.Millisecond), err)
	if !errors.Is(err, archive.ErrUnavailable) {
		t.Fatalf("put with the server stopped mid-upload: %v", err)
	}
	checkNoSecret(t, srv, err.Error())
	// Hung (SIGSTOP: connections are accepted, never answered): bounded.
	srv.Restart()
	if err := srv.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = s.Put(context.Background(), k, func(w io.Writer) (int64, error) { return workspace.ArchiveTo(ws, w, 0) })
	took := time.Since(start)
	_ = srv.Signal(syscall.SIGCONT)
	if !errors.Is(err, archive.ErrUnavailable) || took > 10*time.Second {
		t.Fatalf("put to a hung server: %v after %v", err, took)
	}
	var m bytes.Buffer
	s.WriteMetrics(&m)
	if !strings.Contains(m.String(), `sandboxd_archive_failures_total{backend="s3",op="put"} 3`) ||
		!strings.Contains(m.String(), `sandboxd_archive_degraded{backend="s3"} 1`) {
		t.Fatalf("metrics:\n%s", m.String())
	}
	// Back: the earlier archive, whole, and the degraded state clears.
	r, err := s.Get(context.Background(), k)
	if err != nil {
		t.Fatalf("get after recovery: %v", err)
	}
	defer r.Close()
	if r.Info.SHA256 != first.SHA256 || r.Info.Size != first.Size {
		t.Fatalf("restored something other than the last whole archive")
	}
	if l, err := s.List(context.Background(), "uid:9"); err != nil || len(l) != 1 || l[0].Size != first.Size {
		t.Fatalf("the bucket holds %+v (%v), want only the first archive", l, err)
	}
	if d, _, _ := s.Health(); d {
		t.Fatalf("still degraded after a success")
	}
	// Down again, then back with no archive moving: Recheck clears it.
	srv.Stop()
	if _, err := s.Get(context.Background(), k); err == nil {
		t.Fatal("get with the server down succeeded")
	}
	s.Recheck(context.Background())
	if d, _, _ := s.Health(); !d {
		t.Fatal("Recheck cleared the degraded state while the server is down")
	}
	srv.Restart()
	time.Sleep(10 * time.Second) // Recheck pings at most every 10 s
	s.Recheck(context.Background())
	if d, _, _ := s.Health(); d {
		t.Fatal("still degraded once the server answers again")
	}
	t.Logf("put failed in %v against a hung server (timeout 2s)", took)
}

func checkNoSecret(t *testing.T, srv *archivetest.Server, s string) {
	t.Helper()
	if strings.Contains(s, srv.SecretKey) || strings.Contains(s, srv.AccessKey) {
		t.Fatalf("a credential leaks: %s", s)
	}
}

func TestRetention(t *testing.T) {
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			src := t.TempDir()
			makeTree(t, src)
			a, b := archive.KeyFor("uid:3", "a"), archive.KeyFor("uid:3", "b")
			ia := put(t, s, a, src)
			time.Sleep(1100 * time.Millisecond) // S3 times are to the second
			ib := put(t, s, b, src)
			removed, err := archive.Trim(context.Background(), s, "uid:3", ia.Size+ib.Size-1)
			if err != nil || len(removed) != 1 || removed[0].Key != a {
				t.Fatalf("trim: %+v %v (want the oldest, a, removed)", removed, err)
			}
			removed, err = archive.Expire(context.Background(), s, time.Hour, time.Now().Add(2*time.Hour))
			if err != nil || len(removed) != 1 || removed[0].Key != b {
				t.Fatalf("expire: %+v %v", removed, err)
			}
			if l, _ := s.List(context.Background(), ""); len(l) != 0 {
				t.Fatalf("left: %+v", l)
			}
		})
	}
}

func TestKeyScheme(t *testing.T) {
	k := archive.KeyFor("uid:1000", "abc")
	if !k.Valid() || k == archive.KeyFor("uid:1001", "abc") || k != archive.KeyFor("uid:1000", "abc") {
		t.Fatalf("key %+v", k)
	}
	// Compatibility: a uid archive keeps the name uid archives always had,
	// sha256("<uid>:<key>"), so archives written before identities were
	// introduced still restore.
	if sum := sha256.Sum256([]byte("1000:abc")); k.Name != hex.EncodeToString(sum[:]) {
		t.Fatalf("uid archive name changed: %s", k.Name)
	}
	// A key caller and a uid caller never share a name, nor two keys.
	names := map[string]string{}
	for _, owner := range []string{"uid:1000", "key:1000", "key:alice", "key:bob", "key:..", "uid:0"} {
		k := archive.KeyFor(owner, "abc")
		if !k.Valid() {
			t.Errorf("%s: key %+v invalid", owner, k)
		}
		if o, dup := names[k.Name]; dup {
			t.Errorf("%s and %s share the archive name %s", owner, o, k.Name)
		}
		names[k.Name] = owner
	}
	for _, bad := range []archive.Key{
		{Owner: "uid:1", Name: "../../etc"}, {Owner: "uid:-1", Name: k.Name}, {Owner: "uid:1", Name: strings.ToUpper(k.Name)},
		{Owner: "1000", Name: k.Name}, {Owner: "key:a/b", Name: k.Name}, {Owner: "key:", Name: k.Name}, {Owner: "uid:01", Name: k.Name},
		{Owner: "", Name: k.Name}, archive.KeyFor("key:a:b", "abc"), archive.KeyFor("anonymous", "abc"),
	} {
		if bad.Valid() {
			t.Errorf("%+v valid", bad)
		}
	}
}

// TestKeyOwnersApart: on a real local store, an API key's archive lives in
// its own directory, lists under its owner only, and the same session key
// of another key or of a uid finds nothing.
func TestKeyOwnersApart(t *testing.T) {
	dir := t.TempDir()
	s, err := archive.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	k := archive.KeyFor("key:alice", "conv")
	if _, err := s.Put(ctx, k, func(w io.Writer) (int64, error) { n, err := w.Write([]byte("alice")); return int64(n), err }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "kalice", k.Name+".tar")); err != nil {
		t.Fatalf("not under kalice/: %v", err)
	}
	for _, other := range []string{"key:bob", "uid:1000", "key:Alice"} {
		if _, err := s.Get(ctx, archive.KeyFor(other, "conv")); !archive.IsNotFound(err) {
			t.Errorf("%s restores alice's archive: %v", other, err)
		}
		if l, err := s.List(ctx, other); err != nil || len(l) != 0 {
			t.Errorf("%s lists %v, %v", other, l, err)
		}
	}
	if l, err := s.List(ctx, "key:alice"); err != nil || len(l) != 1 || l[0].Key != k {
		t.Fatalf("alice lists %+v, %v", l, err)
	}
	if l, err := s.List(ctx, ""); err != nil || len(l) != 1 || l[0].Key != k {
		t.Fatalf("all lists %+v, %v", l, err)
	}
	if _, err := s.List(ctx, "key:../x"); err == nil {
		t.Fatal("a bad owner was listed")
	}
	if _, err := archive.Trim(ctx, s, "", 1); err == nil {
		t.Fatal("Trim without an owner")
	}
}

func TestS3ConfigRefused(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	spool := t.TempDir()
	for _, c := range []archive.S3Config{
		{Endpoint: "ftp://x", Bucket: "b", SpoolDir: spool},
		{Endpoint: "http://x/path", Bucket: "b", SpoolDir: spool},
		{Endpoint: "http://user:pw@x", Bucket: "b", SpoolDir: spool},
		{Endpoint: "http://x", SpoolDir: spool},
		{Endpoint: "http://x", Bucket: "b", Prefix: "/abs/", SpoolDir: spool},
		{Endpoint: "http://x", Bucket: "b", SpoolDir: spool}, // no credentials
		{Endpoint: "http://x", Bucket: "b", SpoolDir: spool, CredentialsFile: "/nonexistent"},
	} {
		if _, err := archive.OpenS3(context.Background(), c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// TestS3GetRefusesOversized: an object under an archive's name that is
// larger than MaxBytes (planted by another writer of the bucket) is refused
// from its recorded size, before a byte is downloaded: the spool directory
// stays empty. One within the cap restores.
func TestS3GetRefusesOversized(t *testing.T) {
	srv := archivetest.Start(t)
	spool := filepath.Join(t.TempDir(), "spool")
	const maxBytes = 1 << 20
	s, err := archive.OpenS3(context.Background(), archive.S3Config{Endpoint: srv.Endpoint, Bucket: srv.Bucket,
		Prefix: "test/", CredentialsFile: srv.CredentialsFile(t.TempDir()), SpoolDir: spool,
		Timeout: 20 * time.Second, MetaTimeout: 20 * time.Second, MaxBytes: maxBytes})
	if err != nil {
		t.Fatal(err)
	}
	plant := func(k archive.Key, size int) {
		t.Helper()
		body := make([]byte, size)
		sum := sha256.Sum256(body)
		_, err := srv.Client().PutObject(context.Background(), srv.Bucket, "test/"+archive.Name(k), bytes.NewReader(body), int64(size),
			minio.PutObjectOptions{UserMetadata: map[string]string{"sha256": hex.EncodeToString(sum[:])}})
		if err != nil {
			t.Fatal(err)
		}
	}
	big, small := archive.KeyFor("uid:5", "big"), archive.KeyFor("uid:5", "small")
	plant(big, maxBytes+1)
	plant(small, maxBytes)
	// A watcher: the spool must never hold a byte of the big object.
	stop := make(chan struct{})
	seen := make(chan int64, 1)
	go func() {
		var most int64
		defer func() { seen <- most }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			ents, _ := os.ReadDir(spool)
			for _, e := range ents {
				if fi, err := e.Info(); err == nil && fi.Size() > most {
					most = fi.Size()
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	r, err := s.Get(context.Background(), big)
	close(stop)
	if err == nil {
		r.Close()
		t.Fatal("an object over MaxBytes was restored")
	}
	if !errors.Is(err, archive.ErrTooLarge) {
		t.Errorf("Get of an oversized object: %v, want ErrTooLarge", err)
	}
	if most := <-seen; most != 0 {
		t.Errorf("the spool held %d bytes of the oversized object", most)
	}
	if ents, _ := os.ReadDir(spool); len(ents) != 0 {
		t.Errorf("spool files left: %v", ents)
	}
	r, err = s.Get(context.Background(), small)
	if err != nil {
		t.Fatalf("Get of an object at the cap: %v", err)
	}
	if r.Info.Size != maxBytes {
		t.Errorf("size %d", r.Info.Size)
	}
	r.Close()
}

// TestS3CredentialsFileChecked: the credentials file must be a regular
// file of root or the service user with no access for group or others, as
// the API keys file; anything else is refused, naming the fix.
func TestS3CredentialsFileChecked(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "credentials")
	if err := os.WriteFile(file, []byte("[default]\naws_access_key_id = AKTEST\naws_secret_access_key = SKTEST\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	open := func() error {
		_, err := archive.OpenS3(context.Background(), archive.S3Config{Endpoint: "http://127.0.0.1:9", Bucket: "b",
			CredentialsFile: file, SpoolDir: filepath.Join(dir, "spool")})
		return err
	}
	if err := open(); err != nil || !archive.HasCredentials(file) {
		t.Fatalf("a 0600 credentials file: %v", err)
	}
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604} {
		if err := os.Chmod(file, mode); err != nil {
			t.Fatal(err)
		}
		if err := open(); err == nil || !strings.Contains(err.Error(), "group and others must have no access") {
			t.Errorf("mode %04o: OpenS3 = %v, want it refused", mode, err)
		}
		if archive.HasCredentials(file) {
			t.Errorf("mode %04o: HasCredentials true", mode)
		}
	}
	os.Chmod(file, 0o600)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	if _, err := archive.OpenS3(context.Background(), archive.S3Config{Endpoint: "http://127.0.0.1:9", Bucket: "b",
		CredentialsFile: link, SpoolDir: filepath.Join(dir, "spool")}); err == nil {
		t.Error("a credentials file reached through a symbolic link was accepted")
	}
}
