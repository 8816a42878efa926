package integration

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
)

type sessionObj = api.Session

func (s *supervisor) createSession(t *testing.T, body map[string]any) sessionObj {
	t.Helper()
	if body == nil {
		body = map[string]any{}
	}
	status, b := s.do("POST", "/v1/sessions", body)
	if status != 201 {
		t.Fatalf("create session: %d %s", status, b)
	}
	var o sessionObj
	if err := json.Unmarshal(b, &o); err != nil || len(o.ID) != 32 {
		t.Fatalf("create session: %s", b)
	}
	return o
}

// dropSession removes a session's state directly (no supervisor needed).
func (in *installation) dropSession(id string) {
	_ = os.Remove(in.path("state", "sessions", id+".json"))
	_ = os.RemoveAll(in.path("state", "workspaces", "s-"+id))
}

func (s *supervisor) sessionExec(t *testing.T, id string, req map[string]any) execResult {
	t.Helper()
	status, body := s.do("POST", "/v1/sessions/"+id+"/exec", req)
	if status != 200 {
		t.Fatalf("session exec: %d %s", status, body)
	}
	var r execResult
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// raw sends a request with a raw (non-JSON) body.
func (s *supervisor) raw(method, path string, body []byte) (int, []byte) {
	req, _ := http.NewRequest(method, "http://sandboxd"+path, bytes.NewReader(body))
	resp, err := s.client.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// A tiny PNG writer, so the scenario needs nothing beyond the standard library.
const pngWriter = `
import struct, zlib
def png(path, w, h):
    raw = b''.join(b'\x00' + bytes([(x * 255 // w) for x in range(w)] * 3)[:w*3] for y in range(h))
    def chunk(t, d): return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)
    data = b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0)) + chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b'')
    open(path, 'wb').write(data)
`

// TestSessionScenario is the "done when": a session, a CSV upload,
// three execs building on each other's files, a PNG artifact, a restart,
// and the session still there.
func TestSessionScenario(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	sess := s.createSession(t, map[string]any{"ttl_seconds": 600})
	t.Cleanup(func() { in.dropSession(sess.ID) })

	csv := []byte("x,y\n1,2\n3,4\n5,6\n")
	status, b := s.raw("PUT", "/v1/sessions/"+sess.ID+"/files/data/in.csv", csv)
	sum := sha256.Sum256(csv)
	if status != 201 || !strings.Contains(string(b), hex.EncodeToString(sum[:])) {
		t.Fatalf("upload: %d %s", status, b)
	}
	r := s.sessionExec(t, sess.ID, py(`
import csv
rows = list(csv.DictReader(open('data/in.csv')))
open('sums.txt', 'w').write(str(sum(int(r['y']) for r in rows)))
print(len(rows))`))
	if r.Stdout != "3\n" {
		t.Fatalf("exec 1: %+v", r)
	}
	r = s.sessionExec(t, sess.ID, py("n = int(open('sums.txt').read()); open('helper_mod.py','w').write('TOTAL = %d\\n' % (n * 2)); print(n)"))
	if r.Stdout != "12\n" {
		t.Fatalf("exec 2: %+v", r)
	}
	req := py(pngWriter + "\nimport helper_mod, os\nos.makedirs('outputs', exist_ok=True)\npng('outputs/chart.png', helper_mod.TOTAL, 8)\nprint(helper_mod.TOTAL)")
	req["artifacts"] = []string{"outputs/*.png"}
	status, body := s.do("POST", "/v1/sessions/"+sess.ID+"/exec", req)
	var res api.ExecResult
	if err := json.Unmarshal(body, &res); err != nil || status != 200 || res.Stdout != "24\n" || len(res.Artifacts) != 1 {
		t.Fatalf("exec 3: %d %s", status, body)
	}
	png, _ := base64.StdEncoding.DecodeString(res.Artifacts[0].ContentBase64)
	psum := sha256.Sum256(png)
	if !bytes.HasPrefix(png, []byte("\x89PNG")) || hex.EncodeToString(psum[:]) != res.Artifacts[0].SHA256 || int64(len(png)) != res.Artifacts[0].Size {
		t.Fatalf("artifact %+v is not the PNG", res.Artifacts[0].Path)
	}
	// The same bytes through the file API.
	status, got := s.raw("GET", "/v1/sessions/"+sess.ID+"/files/outputs/chart.png", nil)
	if status != 200 || !bytes.Equal(got, png) {
		t.Fatalf("download: %d, %d bytes", status, len(got))
	}

	// Restart: the session, its files and its TTL survive.
	s.stop()
	s2 := in.startSupervisor(t, supervisorOpts{})
	status, b = s2.do("GET", "/v1/sessions/"+sess.ID, nil)
	if status != 200 {
		t.Fatalf("after restart: %d %s", status, b)
	}
	if r := s2.sessionExec(t, sess.ID, py("import helper_mod; print(helper_mod.TOTAL, open('data/in.csv').read().count('\\n'))")); r.Stdout != "24 4\n" {
		t.Fatalf("after restart: %+v", r)
	}
}

func TestSessionIsolation(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	a := s.createSession(t, nil)
	b := s.createSession(t, nil)
	t.Cleanup(func() { s.do("DELETE", "/v1/sessions/"+a.ID, nil); s.do("DELETE", "/v1/sessions/"+b.ID, nil) })
	s.raw("PUT", "/v1/sessions/"+a.ID+"/files/secret-of-a.txt", []byte("A's secret"))
	// B's payload walks everything it can see.
	r := s.sessionExec(t, b.ID, py(`
import os
hits = []
for d, dirs, files in os.walk('/'):
    if d.startswith(('/proc', '/sys', '/usr', '/run/sandboxd')): dirs[:] = []; continue
    for f in files:
        if 'secret-of-a' in f: hits.append(os.path.join(d, f))
        try:
            if "A's secret" in open(os.path.join(d, f), errors='ignore').read(1 << 16): hits.append(os.path.join(d, f))
        except Exception: pass
print(hits)`))
	if strings.TrimSpace(r.Stdout) != "[]" {
		t.Fatalf("session B's payload found A's file: %s %s", r.Stdout, r.Stderr)
	}
	if status, _ := s.raw("GET", "/v1/sessions/"+b.ID+"/files/secret-of-a.txt", nil); status != 404 {
		t.Fatalf("B's file API returned A's file: %d", status)
	}
	// Not even through a path that climbs out of B's workspace.
	for _, p := range []string{"../s-" + a.ID + "/secret-of-a.txt", "%2e%2e/s-" + a.ID + "/secret-of-a.txt"} {
		status, body := s.raw("GET", "/v1/sessions/"+b.ID+"/files/"+p, nil)
		if status == 200 || strings.Contains(string(body), "A's secret") {
			t.Fatalf("GET %s: %d %s", p, status, body)
		}
	}
}

// TestSessionSymlinkAttacks: a payload plants symlinks and hard links and
// swaps a directory for a symlink in a tight loop while every file endpoint
// and artifact collection runs against it; not a byte outside the workspace
// may be read or written.
func TestSessionSymlinkAttacks(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	sess := s.createSession(t, nil)
	t.Cleanup(func() { s.do("DELETE", "/v1/sessions/"+sess.ID, nil) })

	// "Outside": a host directory standing for another session or /etc.
	outside := filepath.Join(in.prefix, "outside-"+randID())
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	secret := "TOP SECRET HOST DATA"
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	// The payload: static traps, then a swap loop until killed.
	req := py(fmt.Sprintf(`
import os, time
out = %q
os.symlink(out, 'link_dir')
os.symlink(out + '/secret.txt', 'link_file.txt')
os.makedirs('outputs', exist_ok=True)
os.symlink(out + '/secret.txt', 'outputs/evil.txt')
os.mkfifo('fifo.txt')
print('ready', flush=True)
os.makedirs('swap', exist_ok=True)
while True:
    try:
        os.rename('swap', 'swap_real')
        os.symlink(out, 'swap')
        os.unlink('swap')
        os.rename('swap_real', 'swap')
    except OSError:
        pass
`, outside))
	req["timeout_ms"] = 12000
	done := make(chan execResult, 1)
	go func() { done <- s.sessionExec(t, sess.ID, req) }()
	// Wait for the traps (the FIFO is made last), not for a fixed time: a
	// kernel that starts slowly under load must not let the supervisor's
	// own PUT below create link_file.txt before the payload plants it.
	trapsSet := false
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if status, body := s.raw("GET", "/v1/sessions/"+sess.ID+"/files", nil); status == 200 && strings.Contains(string(body), `"fifo.txt"`) {
			trapsSet = true
			break
		}
	}
	if !trapsSet {
		t.Fatal("the payload did not set its traps within 30 s")
	}

	base := "/v1/sessions/" + sess.ID + "/files/"
	leaks := 0
	for i := 0; i < 150; i++ {
		for _, p := range []string{"link_dir/secret.txt", "link_file.txt", "swap/secret.txt", "outputs/evil.txt"} {
			if status, body := s.raw("GET", base+p, nil); status == 200 || strings.Contains(string(body), secret) {
				leaks++
				t.Errorf("GET %s: %d %q", p, status, body)
			}
		}
		for _, p := range []string{"link_dir/planted.txt", "swap/planted.txt", "link_file.txt"} {
			s.raw("PUT", base+p, []byte("written by the supervisor"))
		}
		for _, p := range []string{"link_dir/secret.txt", "swap/secret.txt"} {
			s.raw("DELETE", base+p, nil)
		}
		if i%30 == 0 {
			if status, body := s.raw("GET", "/v1/sessions/"+sess.ID+"/files", nil); status != 200 || strings.Contains(string(body), "secret.txt") {
				t.Errorf("listing: %d %s", status, body)
			}
		}
	}
	// FIFO: no hang.
	start := time.Now()
	if status, _ := s.raw("GET", base+"fifo.txt", nil); status == 200 || time.Since(start) > 5*time.Second {
		t.Errorf("GET of a FIFO: %d after %v", status, time.Since(start))
	}
	<-done
	// Artifact collection against the same traps.
	areq := py("print(1)")
	areq["artifacts"] = []string{"*.txt", "outputs/*", "link_dir/*", "swap/*"}
	_, body := s.do("POST", "/v1/sessions/"+sess.ID+"/exec", areq)
	if strings.Contains(string(body), base64.StdEncoding.EncodeToString([]byte(secret))) {
		t.Errorf("an artifact carried the outside secret: %s", body)
	}
	// The outside directory is exactly as it was.
	ents, _ := os.ReadDir(outside)
	if len(ents) != 1 || ents[0].Name() != "secret.txt" {
		t.Fatalf("outside directory changed: %v", ents)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret.txt")); string(b) != secret {
		t.Fatalf("outside file changed: %q", b)
	}
	if leaks > 0 {
		t.Fatalf("%d leaks", leaks)
	}
}

func TestSessionQuota(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{extra: []string{"--workspace-quota", "8MiB"}})
	sess := s.createSession(t, nil)
	t.Cleanup(func() { s.do("DELETE", "/v1/sessions/"+sess.ID, nil) })
	base := "/v1/sessions/" + sess.ID + "/files/"
	if status, b := s.raw("PUT", base+"a.bin", make([]byte, 6<<20)); status != 201 {
		t.Fatalf("6 MiB upload: %d %s", status, b)
	}
	if status, b := s.raw("PUT", base+"b.bin", make([]byte, 3<<20)); status != 507 || !strings.Contains(string(b), "quota_exceeded") {
		t.Fatalf("upload past the quota: %d %s", status, b)
	}
	// An exec writing past it is stopped.
	r := s.sessionExec(t, sess.ID, py("import time\nwith open('grow.bin','wb') as f:\n    for i in range(64):\n        f.write(b'x' * (1 << 20)); f.flush(); time.sleep(0.02)"))
	if !r.QuotaExceeded {
		t.Fatalf("exec past the quota: %+v", r)
	}
	// Usable again once files are deleted.
	s.raw("DELETE", base+"grow.bin", nil)
	s.raw("DELETE", base+"a.bin", nil)
	if status, b := s.raw("PUT", base+"b.bin", make([]byte, 3<<20)); status != 201 {
		t.Fatalf("after deleting: %d %s", status, b)
	}
	if r := s.sessionExec(t, sess.ID, py("print(len(open('b.bin','rb').read()))")); r.Stdout != fmt.Sprintf("%d\n", 3<<20) {
		t.Fatalf("%+v", r)
	}
	// A kernel exec that passes the quota in one write and returns before
	// the watcher's next poll is caught by the measurement after the exec.
	r = s.sessionExec(t, sess.ID, py("open('fast.bin','wb').write(b'x' * (6 << 20))"))
	if !r.QuotaExceeded {
		t.Fatalf("a fast write past the quota went unnoticed: %+v", r)
	}
}

func TestSessionTTLAndArchive(t *testing.T) {
	in := setup(t)
	archive := in.path("state/logs", "archive-"+randID())
	if err := os.Mkdir(archive, 0o700); err != nil {
		t.Fatal(err)
	}
	_ = os.Chown(archive, in.uid, in.gid)
	s := in.startSupervisor(t, supervisorOpts{extra: []string{"--archive-dir", archive}})

	t.Run("idle TTL reaps", func(t *testing.T) {
		sess := s.createSession(t, map[string]any{"ttl_seconds": 2})
		time.Sleep(4 * time.Second)
		if status, _ := s.do("GET", "/v1/sessions/"+sess.ID, nil); status != 404 {
			t.Fatalf("session still there after its TTL: %d", status)
		}
		if _, err := os.Stat(in.path("state/workspaces", "s-"+sess.ID)); !os.IsNotExist(err) {
			t.Fatalf("workspace still there: %v", err)
		}
	})
	t.Run("archive then restore byte for byte", func(t *testing.T) {
		key := "conversation-" + randID()
		a := s.createSession(t, map[string]any{"key": key})
		if a.Restored {
			t.Fatal("a new key restored something")
		}
		blob := make([]byte, 300000)
		for i := range blob {
			blob[i] = byte(i * 7)
		}
		s.raw("PUT", "/v1/sessions/"+a.ID+"/files/dir/blob.bin", blob)
		s.sessionExec(t, a.ID, py("import os; open('made.txt','w').write('by payload'); os.symlink('made.txt', 'link'); os.chmod('made.txt', 0o640)"))
		if status, _ := s.do("DELETE", "/v1/sessions/"+a.ID, nil); status != 204 {
			t.Fatalf("delete: %d", status)
		}
		b := s.createSession(t, map[string]any{"key": key})
		t.Cleanup(func() { s.do("DELETE", "/v1/sessions/"+b.ID, nil) })
		if !b.Restored {
			t.Fatal("not restored")
		}
		status, got := s.raw("GET", "/v1/sessions/"+b.ID+"/files/dir/blob.bin", nil)
		if status != 200 || !bytes.Equal(got, blob) {
			t.Fatalf("restored blob differs (%d, %d bytes)", status, len(got))
		}
		r := s.sessionExec(t, b.ID, py("import os, stat; print(open('made.txt').read(), os.readlink('link'), oct(stat.S_IMODE(os.stat('made.txt').st_mode)))"))
		if r.Stdout != "by payload made.txt 0o640\n" {
			t.Fatalf("restored workspace: %+v", r)
		}
	})
}

// TestSupervisorKilledMidExecAndUpload: SIGKILL at the worst moments, then a
// restart: sessions intact, no orphan process, no partial file.
func TestSupervisorKilledMidExecAndUpload(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	sess := s.createSession(t, nil)
	s.raw("PUT", "/v1/sessions/"+sess.ID+"/files/keep.txt", []byte("kept"))

	// Mid-exec.
	go func() {
		// The answer never comes: the supervisor is killed mid-exec.
		body, _ := json.Marshal(py("import time, os\nos.fork()\nopen('running','w').write('x')\ntime.sleep(60)"))
		req, _ := http.NewRequest("POST", "http://sandboxd/v1/sessions/"+sess.ID+"/exec", bytes.NewReader(body))
		if resp, err := s.client.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	s.awaitExecProcesses(3)
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	deadline := time.Now().Add(10 * time.Second)
	for len(userProcesses(in.uid)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if left := userProcesses(in.uid); len(left) > 0 {
		t.Fatalf("processes of the exec outlived the supervisor: %v", left)
	}

	// Mid-upload: a body that never finishes.
	s2 := in.startSupervisor(t, supervisorOpts{})
	conn, err := dialUnix(s2.socket)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "PUT /v1/sessions/%s/files/big.bin HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", sess.ID, 50<<20)
	_, _ = conn.Write(make([]byte, 4<<20))
	time.Sleep(300 * time.Millisecond)
	_ = s2.cmd.Process.Signal(syscall.SIGKILL)
	<-s2.done
	conn.Close()

	s3 := in.startSupervisor(t, supervisorOpts{})
	t.Cleanup(func() { s3.do("DELETE", "/v1/sessions/"+sess.ID, nil) })
	status, body := s3.do("GET", "/v1/sessions/"+sess.ID+"/files", nil)
	if status != 200 || !strings.Contains(string(body), "keep.txt") {
		t.Fatalf("session not intact: %d %s", status, body)
	}
	if strings.Contains(string(body), "big.bin") || strings.Contains(string(body), "sandboxd-upload") {
		t.Fatalf("a partial upload is visible: %s", body)
	}
	if status, _ := s3.raw("GET", "/v1/sessions/"+sess.ID+"/files/big.bin", nil); status != 404 {
		t.Fatalf("partial upload readable: %d", status)
	}
	if left := s3.execCgroupsLeft(); len(left) > 0 {
		t.Fatalf("exec cgroups left after the restart: %v", left)
	}
	if r := s3.sessionExec(t, sess.ID, py("print(open('keep.txt').read())")); r.Stdout != "kept\n" {
		t.Fatalf("session unusable after the restart: %+v", r)
	}
}

// TestSessionDeleteKillsItsExec: I6 for a session delete — every process of
// the running exec is gone when the 204 arrives.
func TestSessionDeleteKillsItsExec(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	sess := s.createSession(t, nil)
	t.Cleanup(func() { in.dropSession(sess.ID) })
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		body, _ := json.Marshal(py("import os, time\nif os.fork() == 0:\n    os.setsid()\n    os.fork()\ntime.sleep(60)"))
		req, _ := http.NewRequest("POST", "http://sandboxd/v1/sessions/"+sess.ID+"/exec", bytes.NewReader(body))
		if resp, err := s.client.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	if n := s.awaitExecProcesses(4); n < 4 {
		t.Fatalf("the exec never started its processes (%d)", n)
	}
	if status, b := s.do("DELETE", "/v1/sessions/"+sess.ID, nil); status != 204 {
		t.Fatalf("delete: %d %s", status, b)
	}
	if left := s.execProcesses(); len(left) > 0 {
		t.Fatalf("processes of the exec left after the delete answered: %v", left)
	}
	select {
	case <-answered:
	case <-time.After(10 * time.Second):
		t.Fatal("the exec's caller never got an answer")
	}
	if status, _ := s.do("GET", "/v1/sessions/"+sess.ID, nil); status != 404 {
		t.Fatalf("session still there: %d", status)
	}
}
