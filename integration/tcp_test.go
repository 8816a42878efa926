package integration

// Issue 13: the TCP listener with bearer keys and TLS, the Go client and
// sandboxctl over it, and the MCP server, all against the real supervisor
// running as the non-root test user.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/internal/testca"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/client"
	"github.com/sandboxd/sandboxd/mcp/mcptest"
)

const (
	itKeyAlice = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718"
	itKeyBob   = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a6978"
)

// freePort returns a loopback port nothing listens on right now.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, p, _ := net.SplitHostPort(l.Addr().String())
	return p
}

// writeOwned writes a file the test user owns, in a directory of its own.
func writeOwned(t *testing.T, in *installation, name string, data []byte, mode os.FileMode) string {
	t.Helper()
	dir := in.path("n13-" + randID())
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	for _, x := range []string{dir, p} {
		if err := os.Chown(x, in.uid, in.gid); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// ownedDir is a directory the test user owns.
func ownedDir(t *testing.T, in *installation) string {
	t.Helper()
	dir := in.path("n13-" + randID())
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, in.uid, in.gid); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func chownAll(t *testing.T, in *installation, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if err := os.Chown(p, in.uid, in.gid); err != nil {
			t.Fatal(err)
		}
	}
}

// refusedStart runs sandboxd as the test user with extra flags and
// expects it to exit non-zero at once; it returns the output.
func refusedStart(t *testing.T, in *installation, extra ...string) string {
	t.Helper()
	id := randID()
	args := append([]string{"--socket", in.path("run", "r-"+id+".sock"), "--state-dir", in.path("state"),
		"--audit-log", in.path("state/logs", "audit-r-"+id+".log"), "--helper", in.path("libexec", "nsinit"),
		"--helper-config", in.path("etc/nsinit.json"), "--cgroup-parent", in.cgroupParent}, extra...)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, in.path("bin/sandboxd"), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(in.uid), Gid: uint32(in.gid), Groups: []uint32{}}}
	in.placeSupervisor(t, cmd)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if ctx.Err() != nil || !errors.As(err, &ee) {
		t.Fatalf("sandboxd %v did not refuse to start (err %v):\n%s", extra, err, out)
	}
	return string(out)
}

// waitTCP waits until addr accepts connections.
func waitTCP(t *testing.T, s *supervisor, addr string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("nothing listens on %s:\n%s", addr, s.logs)
}

// nonLoopbackIPv4 is one of the machine's own non-loopback addresses.
func nonLoopbackIPv4() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	return ""
}

// TestI13TCPRefusesToStart: no keys, --allow-no-auth off loopback, a keys
// file with a loose mode or a short key: the supervisor does not start.
func TestI13TCPRefusesToStart(t *testing.T) {
	in := setup(t)
	port := freePort(t)
	cases := []struct {
		name  string
		extra []string
		want  string
	}{
		{"no keys", []string{"--listen", "tcp://127.0.0.1:" + port}, "refusing to listen on TCP without API keys"},
		{"no auth on 0.0.0.0", []string{"--listen", "tcp://0.0.0.0:" + port, "--allow-no-auth"}, "is not a loopback address"},
		{"no auth on [::]", []string{"--listen", "tcp://[::]:" + port, "--allow-no-auth"}, "is not a loopback address"},
		{"keys file 0644", []string{"--listen", "tcp://127.0.0.1:" + port, "--api-keys-file",
			writeOwned(t, in, "keys", []byte("alice:"+itKeyAlice+"\n"), 0o644)}, "group and others must have no access"},
		{"short key", []string{"--listen", "tcp://127.0.0.1:" + port, "--api-keys-file",
			writeOwned(t, in, "keys", []byte("alice:0123456789abcdef\n"), 0o600)}, "at least 32 are required"},
		{"duplicate name", []string{"--listen", "tcp://127.0.0.1:" + port, "--api-keys-file",
			writeOwned(t, in, "keys", []byte("alice:"+itKeyAlice+"\nalice:"+itKeyBob+"\n"), 0o600)}, "names must be unique"},
	}
	if ip := nonLoopbackIPv4(); ip != "" {
		cases = append(cases, struct {
			name  string
			extra []string
			want  string
		}{"no auth on " + ip, []string{"--listen", "tcp://" + ip + ":" + port, "--allow-no-auth"}, "is not a loopback address"})
	} else if os.Getenv("CI") == "true" {
		t.Error("no non-loopback IPv4 address on this machine to test --allow-no-auth with")
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := refusedStart(t, in, tc.extra...)
			if !strings.Contains(out, tc.want) {
				t.Fatalf("output lacks %q:\n%s", tc.want, out)
			}
			if strings.Contains(out, itKeyAlice) || strings.Contains(out, itKeyBob) {
				t.Fatalf("the refusal shows a key:\n%s", out)
			}
			t.Logf("refused: %s", strings.TrimSpace(out))
		})
	}
}

type tcpSup struct {
	*supervisor
	url, keysFile string
}

func startTCPSupervisor(t *testing.T, in *installation, scheme string, extra ...string) *tcpSup {
	t.Helper()
	keys := writeOwned(t, in, "keys", []byte("# test keys\nalice:"+itKeyAlice+"\nbob:"+itKeyBob+"\n"), 0o600)
	addr := "127.0.0.1:" + freePort(t)
	s := in.startSupervisor(t, supervisorOpts{extra: append([]string{"--listen", "tcp://" + addr, "--api-keys-file", keys}, extra...)})
	waitTCP(t, s, addr)
	return &tcpSup{supervisor: s, url: scheme + "://" + addr, keysFile: keys}
}

func rawReq(t *testing.T, c *http.Client, method, url, auth string) (int, []byte) {
	t.Helper()
	r, _ := http.NewRequest(method, url, nil)
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	resp, err := c.Do(r)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestI13TCPKeys: /healthz without a key; a missing, wrong or extended key
// is 401; two keys run code and hold sessions invisible to each other; the
// audit trail names the key.
func TestI13TCPKeys(t *testing.T) {
	in := setup(t)
	s := startTCPSupervisor(t, in, "http")
	hc := &http.Client{Timeout: 20 * time.Second}
	st, b := rawReq(t, hc, "GET", s.url+"/healthz", "")
	var live map[string]any
	if err := json.Unmarshal(b, &live); err != nil || st != 200 || live["ok"] != true || len(live) != 2 {
		t.Fatalf("healthz: %d %s", st, b)
	}
	for _, auth := range []string{"", "Bearer " + strings.Repeat("0", 48), "Bearer " + itKeyAlice + "x", "Bearer " + itKeyAlice[:47]} {
		start := time.Now()
		st, b := rawReq(t, hc, "GET", s.url+"/v1/health", auth)
		var e api.ErrorBody
		if err := json.Unmarshal(b, &e); err != nil || st != 401 || e.Error.Code != api.CodeUnauthenticated {
			t.Fatalf("auth %q: %d %s", auth, st, b)
		}
		t.Logf("401 after %v", time.Since(start).Round(time.Millisecond))
	}
	ctx := context.Background()
	alice, err := client.NewRemote(client.Remote{URL: s.url, APIKey: itKeyAlice})
	if err != nil {
		t.Fatal(err)
	}
	bob, _ := client.NewRemote(client.Remote{URL: s.url, APIKey: itKeyBob})
	res, _, err := alice.Exec(ctx, api.ExecRequest{Language: "python", Code: "print(6*7)"})
	if err != nil || strings.TrimSpace(res.Stdout) != "42" {
		t.Fatalf("alice's exec: %+v %v", res, err)
	}
	// Streaming (NDJSON events) over TCP carries the key too.
	var events int
	sres, _, err := alice.ExecStream(ctx, "", api.ExecRequest{Language: "python", Code: "print('streamed')"}, func(client.Event) { events++ })
	if err != nil || strings.TrimSpace(sres.Stdout) != "streamed" || events == 0 {
		t.Fatalf("stream over TCP: %+v, %d events, %v", sres, events, err)
	}
	sa, _, err := alice.CreateSession(ctx, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	sb, _, err := bob.CreateSession(ctx, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	la, _, _ := alice.ListSessions(ctx)
	lb, _, _ := bob.ListSessions(ctx)
	if len(la) != 1 || la[0].ID != sa.ID || len(lb) != 1 || lb[0].ID != sb.ID {
		t.Fatalf("alice sees %v, bob sees %v", la, lb)
	}
	var apiE *client.APIError
	if _, _, err := bob.GetSession(ctx, sa.ID); !errors.As(err, &apiE) || apiE.Status != 404 {
		t.Fatalf("bob reads alice's session: %v", err)
	}
	if _, _, err := bob.SessionExec(ctx, sa.ID, api.ExecRequest{Language: "python", Code: "print(1)"}); !errors.As(err, &apiE) || apiE.Status != 404 {
		t.Fatalf("bob runs in alice's session: %v", err)
	}
	// Over the socket the test's root is a third caller (uid:0, which sees
	// all, as documented); the keys' sessions are still both there.
	found := map[string]bool{}
	for _, r := range s.auditRecords() {
		if c, _ := r["caller"].(string); c != "" {
			found[c+" "+r["step"].(string)] = true
		}
	}
	for _, want := range []string{"key:alice accept", "key:alice session.create", "key:bob session.create"} {
		if !found[want] {
			t.Errorf("no audit record %q; have %v", want, found)
		}
	}
	// SIGHUP reloads the keys file: a key removed from it is revoked.
	if err := os.WriteFile(s.keysFile, []byte("alice:"+itKeyAlice+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, _, err := bob.Health(ctx)
		if errors.As(err, &apiE) && apiE.Status == 401 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bob's key still works after it was removed and SIGHUP sent: %v\n%s", err, s.logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, _, err := alice.Health(ctx); err != nil {
		t.Fatalf("alice after the reload: %v", err)
	}
	// The chain, with the refusals' remote_addr and auth facts, verifies
	// strictly (every fact typed); no record carries a key.
	s.stop()
	if out, err := exec.Command(in.path("bin/sandboxctl"), "audit", "verify", s.audit).CombinedOutput(); err != nil {
		t.Fatalf("audit verify: %v\n%s", err, out)
	}
	raw, _ := os.ReadFile(s.audit)
	if bytes.Contains(raw, []byte(itKeyAlice[:16])) || !bytes.Contains(raw, []byte(`"auth":"bad_key"`)) {
		t.Fatal("the audit log holds a key, or no bad_key refusal")
	}
}

// loopback is the address the test supervisors' certificates name.
var loopback = []net.IP{net.ParseIP("127.0.0.1")}

// TestI13TLS: HTTPS with a test CA; a client certificate is required with
// --tls-client-ca; the Go client and sandboxctl --url https://… work; SIGHUP
// serves a renewed certificate.
func TestI13TLS(t *testing.T) {
	in := setup(t)
	dir := ownedDir(t, in)
	ca := testca.New(t, "it CA")
	srvCert, srvKey := ca.WriteLeaf(t, dir, testca.Leaf{Name: "server", Serial: 100, IPs: loopback})
	cliCert, cliKey := ca.WriteLeaf(t, dir, testca.Leaf{Name: "client", Serial: 200, Client: true})
	caFile := ca.WriteCA(t, dir)
	chownAll(t, in, srvCert, srvKey, caFile)
	s := startTCPSupervisor(t, in, "https", "--tls-cert", srvCert, "--tls-key", srvKey, "--tls-client-ca", caFile)
	t0 := time.Now()

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	noCert := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if resp, err := noCert.Get(s.url + "/healthz"); err == nil {
		resp.Body.Close()
		t.Fatal("served a client without a certificate")
	} else {
		t.Logf("without a client certificate: %v", err)
	}

	ctx := context.Background()
	c, err := client.NewRemote(client.Remote{URL: s.url, APIKey: itKeyAlice, CAFile: caFile, ClientCert: cliCert, ClientKey: cliKey})
	if err != nil {
		t.Fatal(err)
	}
	res, _, err := c.Exec(ctx, api.ExecRequest{Language: "javascript", Code: "console.log(2**10)"})
	if err != nil || strings.TrimSpace(res.Stdout) != "1024" {
		t.Fatalf("Go client over TLS: %+v %v", res, err)
	}

	keyFile := filepath.Join(dir, "alice.key")
	if err := os.WriteFile(keyFile, []byte(itKeyAlice+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(in.path("bin/sandboxctl"), "run", "--url", s.url, "--api-key-file", keyFile, "--ca-file", caFile,
		"--client-cert", cliCert, "--client-key", cliKey, "--lang", "python", "-c", "print(sum(range(10)))").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "45" {
		t.Fatalf("sandboxctl --url %s: %v\n%s", s.url, err, out)
	}
	cmd := exec.Command(in.path("bin/sandboxctl"), "health", "--url", s.url, "--ca-file", caFile, "--client-cert", cliCert, "--client-key", cliKey)
	cmd.Env = append(os.Environ(), "SANDBOXD_API_KEY="+itKeyBob)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sandboxctl health with SANDBOXD_API_KEY: %v\n%s", err, out)
	}

	t.Logf("clients done after %v", time.Since(t0).Round(time.Millisecond))
	serial := func() int64 {
		conf := &tls.Config{RootCAs: pool}
		pair, _ := tls.LoadX509KeyPair(cliCert, cliKey)
		conf.Certificates = []tls.Certificate{pair}
		conn, err := tls.Dial("tcp", strings.TrimPrefix(s.url, "https://"), conf)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	}
	if got := serial(); got != 100 {
		t.Fatalf("serial %d; want 100", got)
	}
	ca.WriteLeaf(t, dir, testca.Leaf{Name: "server", Serial: 101, IPs: loopback})
	chownAll(t, in, srvCert, srvKey)
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for serial() != 101 {
		if time.Now().After(deadline) {
			t.Fatalf("the served certificate did not change after SIGHUP:\n%s", s.logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("reloaded after %v", time.Since(t0).Round(time.Millisecond))
	// Still serving after the reload.
	if _, _, err := c.Health(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestI13MCP: a scripted MCP client drives `sandboxctl mcp` (over TCP with
// a key) against the real supervisor: initialize, tools/list, run_code in
// python and javascript, create_session, upload_file, run_code in the
// session, download_file; every message's shape is checked.
func TestI13MCP(t *testing.T) {
	in := setup(t)
	s := startTCPSupervisor(t, in, "http")
	keyFile := filepath.Join(ownedDir(t, in), "k")
	if err := os.WriteFile(keyFile, []byte(itKeyAlice), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(in.path("bin/sandboxctl"), "mcp", "--url", s.url, "--api-key-file", keyFile)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("sandboxctl mcp exited with %v:\n%s", err, stderr.String())
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			t.Error("sandboxctl mcp did not exit when its stdin closed")
		}
	}()
	c := mcptest.New(stdin, stdout)
	c.Log = t.Logf
	const to = 60 * time.Second
	call := func(method string, params any) json.RawMessage {
		t.Helper()
		res, err := c.Call(method, params, to)
		if err != nil {
			t.Fatalf("%s: %v\nstderr: %s", method, err, stderr.String())
		}
		return res
	}
	tool := func(name string, args map[string]any) *mcptest.ToolResult {
		t.Helper()
		tr, err := mcptest.CheckToolResult(call("tools/call", map[string]any{"name": name, "arguments": args}))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if tr.IsError {
			t.Fatalf("%s failed: %s", name, tr.Text())
		}
		return tr
	}

	var init struct {
		ProtocolVersion string         `json:"protocolVersion"`
		Capabilities    map[string]any `json:"capabilities"`
		ServerInfo      struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"serverInfo"`
	}
	if err := json.Unmarshal(call("initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "it", "version": "1"}}), &init); err != nil {
		t.Fatal(err)
	}
	if init.ProtocolVersion != "2025-06-18" || init.Capabilities["tools"] == nil || init.ServerInfo.Name != "sandboxd" || init.ServerInfo.Version == "" {
		t.Fatalf("initialize result: %+v", init)
	}
	if err := c.Notify("notifications/initialized", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	var list struct {
		Tools []struct {
			Name        string         `json:"name"`
			Description string         `json:"description"`
			InputSchema map[string]any `json:"inputSchema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(call("tools/list", map[string]any{}), &list); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tl := range list.Tools {
		if tl.Description == "" || tl.InputSchema["type"] != "object" {
			t.Errorf("tool %s: no description or object inputSchema", tl.Name)
		}
		names[tl.Name] = true
	}
	for _, n := range []string{"run_code", "create_session", "upload_file", "download_file", "list_files", "delete_session"} {
		if !names[n] {
			t.Errorf("tools/list lacks %s", n)
		}
	}
	if r := tool("run_code", map[string]any{"language": "python", "code": "print('py', 6*7)"}); !strings.Contains(r.Text(), "py 42") || !strings.Contains(r.Text(), "exit code 0") {
		t.Fatalf("python: %s", r.Text())
	}
	if r := tool("run_code", map[string]any{"language": "javascript", "code": "console.log('js', [1,2,3].map(x => x*2).join(','))"}); !strings.Contains(r.Text(), "js 2,4,6") {
		t.Fatalf("javascript: %s", r.Text())
	}
	if r := tool("run_code", map[string]any{"language": "python", "code": "def main(a):\n    return {'double': a * 2}",
		"entrypoint": "main", "inputs": map[string]any{"a": 21}}); !strings.Contains(r.Text(), `"double":42`) && !strings.Contains(r.Text(), `"double": 42`) {
		t.Fatalf("entrypoint: %s", r.Text())
	}
	var sess struct {
		ID string `json:"id"`
	}
	cr := tool("create_session", map[string]any{})
	if err := json.Unmarshal(cr.StructuredContent, &sess); err != nil || sess.ID == "" {
		t.Fatalf("create_session: %s", cr.StructuredContent)
	}
	tool("upload_file", map[string]any{"session": sess.ID, "path": "in.txt", "content": "hello from mcp\n"})
	if r := tool("run_code", map[string]any{"language": "python", "session": sess.ID,
		"code": "s = open('in.txt').read()\nopen('out.txt', 'w').write(s.upper())\nprint(len(s))"}); !strings.Contains(r.Text(), "15") {
		t.Fatalf("session run: %s", r.Text())
	}
	if r := tool("download_file", map[string]any{"session": sess.ID, "path": "out.txt"}); r.Text() != "HELLO FROM MCP\n" {
		t.Fatalf("download_file: %q", r.Text())
	}
	if r := tool("list_files", map[string]any{"session": sess.ID}); !strings.Contains(r.Text(), "out.txt") {
		t.Fatalf("list_files: %s", r.Text())
	}
	// A tool failure is a result with isError, not a protocol error.
	tr, err := mcptest.CheckToolResult(call("tools/call", map[string]any{"name": "download_file", "arguments": map[string]any{"session": sess.ID, "path": "missing.txt"}}))
	if err != nil || !tr.IsError || !strings.Contains(tr.Text(), "not_found") {
		t.Fatalf("missing file: %+v %v", tr, err)
	}
	tool("delete_session", map[string]any{"session": sess.ID})
	if _, err := c.Call("ping", nil, to); err != nil {
		t.Fatal(err)
	}
}

// TestI13DoctorRemote: `sandboxctl doctor --url https://…` against the real
// supervisor over TLS with a client CA: with the right CA, client
// certificate and key every remote check passes and the host checks are
// named local-only; without the CA, without the client certificate, or
// with a wrong key, it fails and names the fix.
func TestI13DoctorRemote(t *testing.T) {
	in := setup(t)
	dir := ownedDir(t, in)
	ca := testca.New(t, "it CA")
	srvCert, srvKey := ca.WriteLeaf(t, dir, testca.Leaf{Name: "server", Serial: 100, IPs: loopback})
	cliCert, cliKey := ca.WriteLeaf(t, dir, testca.Leaf{Name: "client", Serial: 200, Client: true})
	caFile := ca.WriteCA(t, dir)
	chownAll(t, in, srvCert, srvKey, caFile)
	s := startTCPSupervisor(t, in, "https", "--tls-cert", srvCert, "--tls-key", srvKey, "--tls-client-ca", caFile)
	keyFile, badKey := filepath.Join(dir, "alice.key"), filepath.Join(dir, "bad.key")
	os.WriteFile(keyFile, []byte(itKeyAlice+"\n"), 0o600)
	os.WriteFile(badKey, []byte(strings.Repeat("0", 48)+"\n"), 0o600)
	doctor := func(args ...string) (int, map[string]map[string]any) {
		t.Helper()
		cmd := exec.Command(in.path("bin/sandboxctl"), append([]string{"doctor", "--json", "--url", s.url}, args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		out, err := cmd.Output()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		var rep struct {
			Checks []map[string]any `json:"checks"`
		}
		if err := json.Unmarshal(out, &rep); err != nil {
			t.Fatalf("doctor %v: %v\n%s", args, err, out)
		}
		by := map[string]map[string]any{}
		for _, c := range rep.Checks {
			by[c["name"].(string)] = c
		}
		t.Logf("doctor %v: exit %d %v", args, code, rep.Checks)
		return code, by
	}
	code, by := doctor("--api-key-file", keyFile, "--ca-file", caFile, "--client-cert", cliCert, "--client-key", cliKey)
	if code != 0 {
		t.Fatalf("doctor with everything right: exit %d", code)
	}
	for _, name := range []string{"remote.healthz", "remote.auth", "supervisor.bwrap", "supervisor.userns", "supervisor.seccomp", "supervisor.helper", "supervisor"} {
		if by[name]["status"] != "ok" {
			t.Errorf("%s: %v", name, by[name])
		}
	}
	// The test CA's certificates live an hour: a warning, not a failure.
	if c := by["remote.connect"]; c["status"] != "warn" || !strings.Contains(fmt.Sprint(c["detail"]), "TLS 1.3") ||
		!strings.Contains(fmt.Sprint(c["detail"]), "0 days left") || by["local"]["status"] != "skip" {
		t.Errorf("connect %v, local %v", by["remote.connect"], by["local"])
	}
	for _, tc := range []struct {
		name, check, fix string
		args             []string
	}{
		{"no CA", "remote.connect", "--ca-file", []string{"--api-key-file", keyFile, "--client-cert", cliCert, "--client-key", cliKey}},
		{"no client certificate", "remote.connect", "--client-cert", []string{"--api-key-file", keyFile, "--ca-file", caFile}},
		{"wrong key", "remote.auth", "--api-key-file", []string{"--api-key-file", badKey, "--ca-file", caFile, "--client-cert", cliCert, "--client-key", cliKey}},
	} {
		code, by := doctor(tc.args...)
		if code != 1 || by[tc.check]["status"] != "fail" || !strings.Contains(fmt.Sprint(by[tc.check]["fix"]), tc.fix) {
			t.Errorf("%s: exit %d, %s %v; want fail with a fix naming %s", tc.name, code, tc.check, by[tc.check], tc.fix)
		}
	}
}
