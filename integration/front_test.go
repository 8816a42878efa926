package integration

// The TCP front against browsers and floods, and key reloads, on the real
// supervisor running as the non-root test user: a no-auth loopback listener
// refuses what a web page can send it, idle TCP connections cannot take the
// Unix socket's connections, and a keys file that fails validation on
// SIGHUP keeps the old keys and says so in health and the audit log.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/client"
)

// frontReq sends method path to base with hdr ("Host" sets the request's
// host) and returns the status and the error code, if any.
func frontReq(t *testing.T, base, method, path, body string, hdr map[string]string) (int, api.ErrorCode) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		if k == "Host" {
			r.Host = v
		} else {
			r.Header.Set(k, v)
		}
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(r)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e api.ErrorBody
	_ = json.Unmarshal(b, &e)
	return resp.StatusCode, e.Error.Code
}

// TestI13NoAuthLoopbackRefusesBrowsers: `--allow-no-auth` on loopback. A
// rebinding page's Host, an Origin, a cross-site fetch and a POST not
// declared JSON are refused and run nothing; the Go client and sandboxctl
// (which declare their bodies) still run code, create a session and upload
// a file over it.
func TestI13NoAuthLoopbackRefusesBrowsers(t *testing.T) {
	in := setup(t)
	port := freePort(t)
	addr := "127.0.0.1:" + port
	s := in.startSupervisor(t, supervisorOpts{extra: []string{"--listen", "tcp://" + addr, "--allow-no-auth"}})
	waitTCP(t, s, addr)
	base := "http://" + addr
	exec1 := `{"language":"python","code":"open('/tmp/ran','w')"}`
	for _, tc := range []struct {
		name   string
		method string
		path   string
		body   string
		hdr    map[string]string
		status int
	}{
		{"DNS rebinding", "GET", "/v1/sessions", "", map[string]string{"Host": "rebind.attacker.example:" + port}, 403},
		{"Origin", "POST", "/v1/exec", exec1, map[string]string{"Content-Type": "application/json", "Origin": "http://attacker.example"}, 403},
		{"cross-site", "POST", "/v1/exec", exec1, map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}, 403},
		{"simple POST (no Content-Type)", "POST", "/v1/exec", exec1, nil, 400},
		{"simple POST (text/plain)", "POST", "/v1/sessions", "{}", map[string]string{"Content-Type": "text/plain"}, 400},
	} {
		if st, code := frontReq(t, base, tc.method, tc.path, tc.body, tc.hdr); st != tc.status {
			t.Errorf("%s: %d %s; want %d", tc.name, st, code, tc.status)
		}
	}
	for _, r := range s.auditRecords() {
		if r["step"] == "decide" {
			t.Fatalf("a refused browser request reached the decide step: %v", r)
		}
	}
	ctx := context.Background()
	c, err := client.NewRemote(client.Remote{URL: base})
	if err != nil {
		t.Fatal(err)
	}
	res, _, err := c.Exec(ctx, api.ExecRequest{Language: "python", Code: "print(6*7)"})
	if err != nil || strings.TrimSpace(res.Stdout) != "42" {
		t.Fatalf("the Go client over the no-auth listener: %+v %v", res, err)
	}
	sess, _, err := c.CreateSession(ctx, nil, "")
	if err != nil {
		t.Fatalf("create a session: %v", err)
	}
	// The state directory is the suite's: leave no session to the next test.
	defer func() { _ = c.DeleteSession(ctx, sess.ID) }()
	if _, err := c.PutFile(ctx, sess.ID, "in.bin", strings.NewReader("abc"), 3); err != nil {
		t.Fatalf("upload (application/octet-stream): %v", err)
	}
	put := exec.Command(in.path("bin/sandboxctl"), "files", "put", "--url", base, sess.ID, "two.bin", "-")
	put.Stdin = strings.NewReader("def")
	if out, err := put.CombinedOutput(); err != nil {
		t.Fatalf("sandboxctl files put --url over the no-auth listener: %v\n%s", err, out)
	}
	out, err := exec.Command(in.path("bin/sandboxctl"), "run", "--url", base, "--session", sess.ID, "--lang", "python",
		"-c", "print(open('in.bin').read() + open('two.bin').read())").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "abcdef") {
		t.Fatalf("sandboxctl --url over the no-auth listener: %v\n%s", err, out)
	}
}

// TestI11IdleTCPDoesNotStarveUnixSocket: 300 TCP connections from ten
// loopback addresses that never send a byte (more than --max-connections)
// leave the Unix socket its own budget: an exec over it runs.
func TestI11IdleTCPDoesNotStarveUnixSocket(t *testing.T) {
	in := setup(t)
	s := startTCPSupervisor(t, in, "http")
	addr := strings.TrimPrefix(s.url, "http://")
	const n = 300
	for i := 0; i < n; i++ {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i%10))}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		defer c.Close()
	}
	// Wait until the supervisor has accepted (or refused) every one of them.
	deadline := time.Now().Add(15 * time.Second)
	for seen := 0; seen < n; seen = connectionsSeen(t, s.supervisor) {
		if time.Now().After(deadline) {
			t.Fatalf("the supervisor saw %d of %d connections", seen, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := s.exec(py("print('unix')")); strings.TrimSpace(r.Stdout) != "unix" {
		t.Fatalf("Unix-socket exec with %d idle TCP connections: %+v", n, r)
	}
	// The TCP side is bounded on its own: while the idle connections hold
	// the listener's budget for unauthenticated connections, a new TCP
	// connection is refused at accept, whoever opens it.
	// The refusal is written at accept, before any request is read, so
	// it is read from a bare connection: an HTTP client that has not sent
	// its request yet may see only the close (Go's transport reports an
	// unsolicited answer on an idle connection as a failed read).
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial while the unauthenticated budget is held: %v", err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	answer, _ := io.ReadAll(c)
	if !strings.HasPrefix(string(answer), "HTTP/1.1 429 ") || !strings.Contains(string(answer), "not authenticated yet") {
		t.Fatalf("a new TCP connection while the unauthenticated budget is held got %q; want a 429 saying so", answer)
	}
}

// connectionsSeen is the connections the supervisor holds open plus those
// it refused, from /metrics over the socket (whose own connection is one
// of those open).
func connectionsSeen(t *testing.T, s *supervisor) int {
	t.Helper()
	st, b := s.do("GET", "/metrics", nil)
	if st != 200 {
		t.Fatalf("metrics: %d %s", st, b)
	}
	seen := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "sandboxd_connections_open ") || strings.HasPrefix(line, "sandboxd_connections_refused_total{") {
			var v int
			if _, err := fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &v); err == nil {
				seen += v
			}
		}
	}
	return seen - 1
}

// healthKeys reads the keys section of GET /v1/health as alice.
func healthKeys(t *testing.T, s *tcpSup) map[string]any {
	t.Helper()
	st, b := rawReq(t, &http.Client{Timeout: 30 * time.Second}, "GET", s.url+"/v1/health", "Bearer "+itKeyAlice)
	var h map[string]any
	if err := json.Unmarshal(b, &h); err != nil || (st != 200 && st != 503) {
		t.Fatalf("health as alice: %d %s", st, b)
	}
	k, _ := h["keys"].(map[string]any)
	if k == nil {
		t.Fatalf("health has no keys section: %s", b)
	}
	return k
}

// TestI13KeysReloadFailureKeepsKeys: a SIGHUP whose keys file fails
// validation (mode 0644) keeps the old keys, and says so in health
// (keys.last_reload_error) and in the audit log (a failed keys.reload
// record); fixing the file and SIGHUP again applies it and clears the error.
func TestI13KeysReloadFailureKeepsKeys(t *testing.T) {
	in := setup(t)
	s := startTCPSupervisor(t, in, "http")
	k := healthKeys(t, s)
	if k["loaded_at"] == nil || k["last_reload_error"] != nil {
		t.Fatalf("keys at start: %v", k)
	}
	// Revoke bob, but leave the file readable by all: validation fails.
	if err := os.WriteFile(s.keysFile, []byte("alice:"+itKeyAlice+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(s.keysFile, 0o644); err != nil {
		t.Fatal(err)
	}
	hup := func() {
		if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	hup()
	deadline := time.Now().Add(10 * time.Second)
	for k = healthKeys(t, s); k["last_reload_error"] == nil; k = healthKeys(t, s) {
		if time.Now().After(deadline) {
			t.Fatalf("no last_reload_error in health after a failed reload: %v\n%s", k, s.logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if msg := fmt.Sprint(k["last_reload_error"]); !strings.Contains(msg, "mode") {
		t.Errorf("last_reload_error %q does not say what was wrong", msg)
	}
	bob, _ := client.NewRemote(client.Remote{URL: s.url, APIKey: itKeyBob})
	if _, _, err := bob.Health(context.Background()); err != nil {
		t.Fatalf("the old keys were not kept: bob %v", err)
	}
	if !strings.Contains(s.logs.String(), "not reloaded") {
		t.Errorf("the failed reload is not logged:\n%s", s.logs)
	}
	failed := false
	for _, r := range s.auditRecords() {
		if r["step"] == "keys.reload" && r["ok"] == false {
			failed = true
		}
	}
	if !failed {
		t.Error("no failed keys.reload record in the audit log")
	}
	if err := os.Chmod(s.keysFile, 0o600); err != nil {
		t.Fatal(err)
	}
	hup()
	deadline = time.Now().Add(10 * time.Second)
	for k = healthKeys(t, s); k["last_reload_error"] != nil; k = healthKeys(t, s) {
		if time.Now().After(deadline) {
			t.Fatalf("the error stays after a good reload: %v", k)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, _, err := bob.Health(context.Background()); err == nil {
		t.Fatal("bob's key still works after the good reload removed it")
	}
}

// TestAdminExecNotInForeignKernel: an admin (an admin key over TCP, root
// over the socket) may not run code in another caller's session kernel,
// where the owner's threads would see it; it may run a process exec in the
// same workspace, and the owner's kernel goes on as before.
func TestAdminExecNotInForeignKernel(t *testing.T) {
	in := setup(t)
	adminKey := strings.Repeat("c", 48)
	keys := writeOwned(t, in, "keys", []byte("alice:"+itKeyAlice+"\nops:"+adminKey+":admin\n"), 0o600)
	addr := "127.0.0.1:" + freePort(t)
	s := in.startSupervisor(t, supervisorOpts{extra: []string{"--listen", "tcp://" + addr, "--api-keys-file", keys}})
	waitTCP(t, s, addr)
	ctx := context.Background()
	alice, _ := client.NewRemote(client.Remote{URL: "http://" + addr, APIKey: itKeyAlice})
	ops, _ := client.NewRemote(client.Remote{URL: "http://" + addr, APIKey: adminKey})
	sess, _, err := alice.CreateSession(ctx, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	// The state directory is the suite's: leave no session of alice's to
	// the next test that counts them.
	defer func() { _ = alice.DeleteSession(ctx, sess.ID) }()
	r, _, err := alice.SessionExec(ctx, sess.ID, api.ExecRequest{Language: "python", Code: "secret = 41\nopen('f.txt','w').write('x')", Mode: api.ModeKernel})
	if err != nil || r.Kernel == nil {
		t.Fatalf("alice's kernel exec: %+v %v", r, err)
	}
	var apiE *client.APIError
	_, _, err = ops.SessionExec(ctx, sess.ID, api.ExecRequest{Language: "python", Code: "print(secret)", Mode: api.ModeKernel})
	if !errors.As(err, &apiE) || apiE.Status != 403 || !strings.Contains(apiE.Message, "process") {
		t.Fatalf("an admin key's exec in alice's kernel: %v; want 403 naming mode process", err)
	}
	st, body := s.do("POST", "/v1/sessions/"+sess.ID+"/exec", map[string]any{"language": "python", "code": "print(secret)", "mode": "kernel"})
	if st != 403 {
		t.Fatalf("root's exec in alice's kernel over the socket: %d %s", st, body)
	}
	r, _, err = ops.SessionExec(ctx, sess.ID, api.ExecRequest{Language: "python", Code: "print(open('f.txt').read())", Mode: api.ModeProcess})
	if err != nil || strings.TrimSpace(r.Stdout) != "x" || r.Kernel != nil {
		t.Fatalf("an admin's process exec in alice's workspace: %+v %v", r, err)
	}
	r, _, err = alice.SessionExec(ctx, sess.ID, api.ExecRequest{Language: "python", Code: "print(secret + 1)", Mode: api.ModeKernel})
	if err != nil || strings.TrimSpace(r.Stdout) != "42" {
		t.Fatalf("alice's kernel after the refusal: %+v %v", r, err)
	}
}
