package integration

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/internal/testca"

	"github.com/sandboxd/sandboxd/api"
)

// The egress tests never send a packet to a non-loopback address: every
// name resolves, through the TESTONLY resolver, to 127.0.0.2 (which the
// TESTONLY switch lets the proxy reach) or to an address the proxy must
// refuse before dialling; the raw TCP and UDP attempts run inside the
// sandbox, whose only interface is lo (checked first), so they fail with
// "network unreachable" in the kernel.

// internet is the loopback stand-in for the internet: one plain-HTTP and
// one HTTPS server on 127.0.0.2, serving a PEP 503 index with one wheel.
type internet struct {
	httpPort, httpsPort int
	caPEM               []byte
	hits                atomic.Int64
	wheel               []byte
}

const wheelName = "demo-1.0-py3-none-any.whl"

func startInternet(t *testing.T) *internet {
	t.Helper()
	in := &internet{wheel: buildWheel(t)}
	cert, caPEM := testCert(t, "pypi.test")
	in.caPEM = caPEM
	sum := sha256.Sum256(in.wheel)
	mux := http.NewServeMux()
	mux.HandleFunc("/simple/demo/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!DOCTYPE html><html><body><a href="/files/%s#sha256=%s">%s</a></body></html>`, wheelName, hex.EncodeToString(sum[:]), wheelName)
	})
	mux.HandleFunc("/files/"+wheelName, func(w http.ResponseWriter, r *http.Request) { w.Write(in.wheel) })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "hello from %s", r.Host) })
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { in.hits.Add(1); mux.ServeHTTP(w, r) })

	pl, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	tl, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	ps, ts := &http.Server{Handler: h}, &http.Server{Handler: h, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
	go ps.Serve(pl)
	go ts.ServeTLS(tl, "", "")
	t.Cleanup(func() { ps.Close(); ts.Close() })
	in.httpPort, in.httpsPort = pl.Addr().(*net.TCPAddr).Port, tl.Addr().(*net.TCPAddr).Port
	return in
}

// testCert makes a CA and a leaf for name, valid for an hour.
func testCert(t *testing.T, name string) (tls.Certificate, []byte) {
	t.Helper()
	ca := testca.New(t, "sandboxd egress test CA")
	return ca.Issue(t, testca.Leaf{Name: name, DNS: []string{name}}), ca.PEM
}

// buildWheel makes a minimal valid wheel of package "demo" 1.0.
func buildWheel(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	z := zip.NewWriter(&b)
	files := map[string]string{
		"demo/__init__.py":            "X = 1\n",
		"demo-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n",
		"demo-1.0.dist-info/WHEEL":    "Wheel-Version: 1.0\nGenerator: sandboxd-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
	}
	var record strings.Builder
	for _, name := range []string{"demo/__init__.py", "demo-1.0.dist-info/METADATA", "demo-1.0.dist-info/WHEEL"} {
		w, _ := z.Create(name)
		w.Write([]byte(files[name]))
		sum := sha256.Sum256([]byte(files[name]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", name, base64.RawURLEncoding.EncodeToString(sum[:]), len(files[name]))
	}
	record.WriteString("demo-1.0.dist-info/RECORD,,\n")
	w, _ := z.Create("demo-1.0.dist-info/RECORD")
	w.Write([]byte(record.String()))
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// startEgressSupervisor builds the supervisor with the sandboxd_testonly tag
// (the only build that honours the TESTONLY switches) and starts it.
func startEgressSupervisor(t *testing.T, in *installation, net *internet) *supervisor {
	t.Helper()
	bin := in.path("bin/sandboxd-testonly")
	if _, err := os.Stat(bin); err != nil {
		cmd := exec.Command("go", "build", "-tags", "sandboxd_testonly", "-o", bin, "./cmd/sandboxd")
		cmd.Dir = in.repo
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("build the test-only supervisor: %v\n%s", err, out)
		}
	}
	p, s := net.httpPort, net.httpsPort
	allow := fmt.Sprintf("pypi.test:%d,pypi.test:%d,localhost:%d,private.test:%d,rebind.test:%d,127.0.0.2:%d", p, s, p, p, p, p)
	allow = strings.TrimSuffix(allow, fmt.Sprintf(",127.0.0.2:%d", p)) // IP literals cannot even be listed
	return in.startSupervisor(t, supervisorOpts{
		bin:   "bin/sandboxd-testonly",
		extra: []string{"--egress-allow", allow, "--egress-allow-uid", "0"},
		env: []string{
			"TESTONLY_EGRESS_RESOLVE=pypi.test=127.0.0.2,off.test=127.0.0.2,localhost=127.0.0.1,private.test=10.0.0.1,rebind.test=127.0.0.2;10.0.0.1",
			"TESTONLY_EGRESS_PUBLIC_LOOPBACK=127.0.0.2",
		},
	})
}

func (n *internet) files() []map[string]any {
	return []map[string]any{{"path": "ca.pem", "content_base64": base64.StdEncoding.EncodeToString(n.caPEM)}}
}

func egressExec(t *testing.T, s *supervisor, lang, code string, n *internet) execResult {
	t.Helper()
	r := s.exec(map[string]any{"language": lang, "code": code, "network": "egress", "files": n.files(),
		"env": map[string]string{"NODE_EXTRA_CA_CERTS": "/workspace/ca.pem"}, "timeout_ms": 60000})
	if r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("exec failed: exit %v signal %v\nstdout: %s\nstderr: %s", r.ExitCode, r.Signal, r.Stdout, r.Stderr)
	}
	if r.Network == nil || r.Network.Mode != "egress" {
		t.Fatalf("result has no network object: %+v", r.Network)
	}
	return r
}

func conns(r execResult, allowed bool) []api.Connection {
	var out []api.Connection
	for _, c := range r.Network.Connections {
		if c.Allowed == allowed {
			out = append(out, c)
		}
	}
	return out
}

func TestEgress(t *testing.T) {
	in := setup(t)
	n := startInternet(t)
	s := startEgressSupervisor(t, in, n)
	hp, sp := n.httpPort, n.httpsPort

	t.Run("urllib", func(t *testing.T) {
		r := egressExec(t, s, "python", fmt.Sprintf(`
import ssl, urllib.request
print(urllib.request.urlopen("http://pypi.test:%d/plain").read().decode())
ctx = ssl.create_default_context(cafile="/workspace/ca.pem")
print(urllib.request.urlopen("https://pypi.test:%d/tls", context=ctx).read().decode())
`, hp, sp), n)
		if strings.Count(r.Stdout, "hello from pypi.test") != 2 || len(conns(r, true)) != 2 {
			t.Fatalf("stdout %q, connections %+v", r.Stdout, r.Network.Connections)
		}
		for _, c := range conns(r, true) {
			if c.BytesIn == 0 || c.BytesOut == 0 {
				t.Errorf("connection without bytes: %+v", c)
			}
		}
	})

	t.Run("requests", func(t *testing.T) {
		r := egressExec(t, s, "python", fmt.Sprintf(`
import requests
print(requests.get("https://pypi.test:%d/req", verify="/workspace/ca.pem", timeout=20).text)
`, sp), n)
		if !strings.Contains(r.Stdout, "hello from pypi.test") {
			t.Fatalf("stdout %q stderr %q", r.Stdout, r.Stderr)
		}
	})

	t.Run("pip download", func(t *testing.T) {
		r := egressExec(t, s, "python", fmt.Sprintf(`
import subprocess, sys, os
p = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir", "--disable-pip-version-check",
    "--index-url", "https://pypi.test:%d/simple/", "--cert", "/workspace/ca.pem", "-d", "/tmp/dl", "demo"],
    capture_output=True, text=True)
print(p.returncode, p.stdout, p.stderr)
print(os.listdir("/tmp/dl") if os.path.isdir("/tmp/dl") else "no dir")
`, sp), n)
		if !strings.Contains(r.Stdout, wheelName) || !strings.HasPrefix(r.Stdout, "0 ") {
			t.Fatalf("pip download: %s\n%s", r.Stdout, r.Stderr)
		}
	})

	t.Run("node", func(t *testing.T) {
		// Node before 24 ignores the proxy variables in its built-in
		// fetch; the supervisor's NODE_OPTIONS import sends it through
		// the relay (http and https), and the http module reaches the
		// proxy the variables name, as an http client with proxy support
		// does.
		r := egressExec(t, s, "javascript", fmt.Sprintf(`
const http = require("http");
const proxy = new URL(process.env.HTTP_PROXY);
(async () => {
  for (const u of ["http://pypi.test:%[1]d/fetch", "https://pypi.test:%[2]d/fetchtls"]) {
    const res = await fetch(u);
    console.log("fetch", res.status, await res.text());
  }
  try { await fetch("https://off.test:%[2]d/"); } catch (e) { console.log("refused", e.cause.message); }
  http.get({host: proxy.hostname, port: proxy.port, path: "http://pypi.test:%[1]d/node", headers: {Host: "pypi.test:%[1]d"}}, res => {
    let b = ""; res.on("data", d => b += d); res.on("end", () => console.log(res.statusCode, b));
  });
})();
`, hp, sp), n)
		if strings.Count(r.Stdout, "fetch 200 hello from pypi.test") != 2 || !strings.Contains(r.Stdout, "200 hello from pypi.test") ||
			!strings.Contains(r.Stdout, "refused sandboxd egress proxy refused CONNECT off.test") {
			t.Fatalf("stdout %q stderr %q", r.Stdout, r.Stderr)
		}
		if len(conns(r, true)) != 3 || len(conns(r, false)) != 1 {
			t.Errorf("connections: %+v", r.Network.Connections)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		before := n.hits.Load()
		targets := []struct{ url, why string }{
			{fmt.Sprintf("http://off.test:%d/", hp), "not on the operator's egress allowlist"},
			{fmt.Sprintf("http://127.0.0.2:%d/", hp), "IP literal"},
			{fmt.Sprintf("http://localhost:%d/", hp), "loopback"},
			{"http://169.254.169.254/latest/meta-data/", "IP literal"},
			{"http://10.0.0.1/", "IP literal"},
			{fmt.Sprintf("http://private.test:%d/", hp), "10.0.0.1, a private address"},
			{fmt.Sprintf("http://rebind.test:%d/first", hp), ""},
			{fmt.Sprintf("http://rebind.test:%d/second", hp), "10.0.0.1, a private address"},
		}
		var urls []string
		for _, tg := range targets {
			urls = append(urls, tg.url)
		}
		enc, _ := json.Marshal(urls)
		r := egressExec(t, s, "python", fmt.Sprintf(`
import urllib.request, urllib.error
for u in %s:
    try:
        print("OK", u, urllib.request.urlopen(u, timeout=20).status)
    except urllib.error.HTTPError as e:
        print("REFUSED", u, e.code, e.read().decode().strip())
`, enc), n)
		lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
		if len(lines) != len(targets) {
			t.Fatalf("stdout %q stderr %q", r.Stdout, r.Stderr)
		}
		for i, tg := range targets {
			if tg.why == "" {
				if !strings.HasPrefix(lines[i], "OK ") {
					t.Errorf("%s: %s", tg.url, lines[i])
				}
				continue
			}
			if !strings.HasPrefix(lines[i], "REFUSED "+tg.url+" 403 sandboxd egress proxy refused") || !strings.Contains(lines[i], tg.why) {
				t.Errorf("%s: %q, want a 403 saying %q", tg.url, lines[i], tg.why)
			}
		}
		if got := n.hits.Load() - before; got != 1 {
			t.Errorf("the stand-in internet saw %d requests, want 1 (the first rebind.test lookup)", got)
		}
		if len(conns(r, false)) != len(targets)-1 {
			t.Errorf("refused connection records: %+v", r.Network.Connections)
		}
		// The audit trail has one egress record per attempt, with the reason.
		var recs int
		for _, rec := range s.auditRecords() {
			if rec["exec_id"] == r.ID && rec["step"] == "egress" {
				recs++
				f, _ := rec["facts"].(map[string]any)
				if rec["ok"] == false && (rec["error"] == "" || f["reason"] == "") {
					t.Errorf("refused egress record without a reason: %v", rec)
				}
			}
		}
		if recs != len(targets) {
			t.Errorf("%d egress audit records, want %d", recs, len(targets))
		}
		// The chain, egress records included, verifies (facts decoded strictly).
		if out, code := sandboxctlAudit(t, in, "verify", s.audit); code != 0 {
			t.Errorf("audit verify: exit %d\n%s", code, out)
		}
	})

	t.Run("SNI must be the CONNECT host", func(t *testing.T) {
		before := n.hits.Load()
		r := egressExec(t, s, "python", fmt.Sprintf(`
import socket, ssl
s = socket.create_connection(("127.0.0.1", 3128))
s.sendall(b"CONNECT pypi.test:%d HTTP/1.1\r\nHost: pypi.test:%d\r\n\r\n")
print(s.recv(100).split(b"\r\n")[0].decode())
ctx = ssl.create_default_context(cafile="/workspace/ca.pem")
ctx.check_hostname = False
try:
    ctx.wrap_socket(s, server_hostname="evil.example").do_handshake()
    print("HANDSHAKE")
except (OSError, ssl.SSLError) as e:
    print("closed")
`, sp, sp), n)
		if r.Stdout != "HTTP/1.1 200 Connection established\nclosed\n" {
			t.Fatalf("stdout %q stderr %q", r.Stdout, r.Stderr)
		}
		if c := r.Network.Connections; len(c) != 1 || c[0].Allowed || !strings.Contains(c[0].Reason, `"evil.example" does not match the CONNECT host pypi.test`) {
			t.Errorf("connections: %+v", c)
		}
		if got := n.hits.Load() - before; got != 0 {
			t.Errorf("the stand-in internet saw %d requests", got)
		}
	})

	t.Run("no other way out", func(t *testing.T) {
		// Only after checking that lo is the sandbox's only interface does
		// the payload try anything: a packet can then not leave the host.
		r := egressExec(t, s, "python", `
import socket, sys
ifs = [n for _, n in socket.if_nameindex()]
if ifs != ["lo"]:
    print("ABORT interfaces", ifs); sys.exit(0)
for what, fam, typ, addr in [("tcp", socket.AF_INET, socket.SOCK_STREAM, ("93.184.216.34", 80)),
                             ("udp", socket.AF_INET, socket.SOCK_DGRAM, ("8.8.8.8", 53)),
                             ("tcp6", socket.AF_INET6, socket.SOCK_STREAM, ("2606:4700::1", 443))]:
    s = socket.socket(fam, typ)
    s.settimeout(5)
    try:
        if typ == socket.SOCK_DGRAM:
            s.sendto(b"x", addr)
        else:
            s.connect(addr)
        print(what, "CONNECTED")
    except OSError as e:
        print(what, "errno", e.errno)
try:
    socket.getaddrinfo("pypi.org", 443)
    print("dns RESOLVED")
except OSError as e:
    print("dns failed")
`, n)
		want := "tcp errno 101\nudp errno 101\ntcp6 errno 101\ndns failed"
		if strings.TrimSpace(r.Stdout) != want {
			t.Fatalf("stdout %q, want %q (stderr %q)", r.Stdout, want, r.Stderr)
		}
		if len(r.Network.Connections) != 0 {
			t.Errorf("the proxy saw connections: %+v", r.Network.Connections)
		}
	})

	t.Run("network none unchanged", func(t *testing.T) {
		status, body := s.do("POST", "/v1/exec", py(`
import os, socket
print(sorted(k for k in os.environ if "proxy" in k.lower()), os.path.exists("/run/sandboxd/egress"), os.path.exists("/run/sandboxd/relay"))
s = socket.socket(); s.settimeout(2)
print(s.connect_ex(("127.0.0.1", 3128)))
`))
		if status != 200 || strings.Contains(string(body), `"network"`) {
			t.Fatalf("status %d body %s", status, body)
		}
		var r execResult
		json.Unmarshal(body, &r)
		if r.Stdout != "[] False False\n111\n" {
			t.Fatalf("network none sandbox: %q %q", r.Stdout, r.Stderr)
		}
	})

	t.Run("production binary refuses TESTONLY", func(t *testing.T) {
		cmd := exec.Command(in.path("bin/sandboxd"), "--socket", in.path("run", "testonly-"+randID()+".sock"),
			"--state-dir", in.path("state"), "--audit-log", in.path("state/logs", "audit-testonly-"+randID()+".log"),
			"--helper", in.path("libexec", "nsinit"), "--helper-config", in.path("etc/nsinit.json"),
			"--cgroup-parent", in.cgroupParent, "--egress-allow", "pypi.test")
		cmd.Env = []string{"PATH=/usr/bin:/bin", "TESTONLY_EGRESS_PUBLIC_LOOPBACK=127.0.0.2"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(in.uid), Gid: uint32(in.gid), Groups: []uint32{}}}
		in.placeSupervisor(t, cmd)
		done := make(chan struct{})
		var out []byte
		var err error
		go func() { out, err = cmd.CombinedOutput(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Fatalf("the production supervisor started with a TESTONLY switch set:\n%s", out)
		}
		if err == nil || !strings.Contains(string(out), "not built for tests") {
			t.Fatalf("err %v, output:\n%s", err, out)
		}
	})

	t.Run("forbidden without --egress-allow-uid", func(t *testing.T) {
		s2 := in.startSupervisor(t, supervisorOpts{extra: []string{"--egress-allow", "pypi.test"}})
		status, body := s2.do("POST", "/v1/exec", map[string]any{"language": "python", "code": "1", "network": "egress"})
		if status != 403 || !strings.Contains(string(body), "egress") {
			t.Fatalf("status %d body %s", status, body)
		}
	})
}

// TestEgressKernel: a session's network holds for its kernels. A python
// kernel of an egress session reaches the allowlisted stand-in in exec 1
// and exec 2 through one relay and one proxy that last as long as the
// kernel; each exec's connections are in its own result and audited under
// its own id; a connection a background thread makes between execs is
// audited under the kernel's launch id; an off-list host is refused; a
// kernel of a plain session still has no way out; the kernel's socket
// directory is gone once the kernel is.
func TestEgressKernel(t *testing.T) {
	in := setup(t)
	n := startInternet(t)
	s := startEgressSupervisor(t, in, n)
	hp := n.httpPort

	sess := s.createSession(t, map[string]any{"network": "egress"})
	t.Cleanup(func() { s.do("DELETE", "/v1/sessions/"+sess.ID, nil); in.dropSession(sess.ID) })
	get := fmt.Sprintf(`
import urllib.request, urllib.error
def get(u):
    try:
        return "OK " + urllib.request.urlopen(u, timeout=20).read().decode()
    except urllib.error.HTTPError as e:
        return "REFUSED %%d %%s" %% (e.code, e.read().decode().strip())
print(get("http://pypi.test:%[1]d/one"))
print(get("http://off.test:%[1]d/"))
`, hp)
	r1 := s.kexec(t, sess.ID, lang("python", get))
	if r1.Kernel == nil || r1.Network == nil || r1.Network.Mode != "egress" {
		t.Fatalf("exec 1: kernel %+v network %+v stderr %q", r1.Kernel, r1.Network, r1.Stderr)
	}
	lines := strings.Split(strings.TrimSpace(r1.Stdout), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "OK hello from pypi.test") ||
		!strings.HasPrefix(lines[1], "REFUSED 403 sandboxd egress proxy refused") || !strings.Contains(lines[1], "not on the operator's egress allowlist") {
		t.Fatalf("exec 1 stdout %q", r1.Stdout)
	}
	if c := r1.Network.Connections; len(c) != 2 || len(conns(r1, true)) != 1 || conns(r1, true)[0].BytesIn == 0 {
		t.Fatalf("exec 1 connections: %+v", c)
	}

	// Exec 2, in the same kernel (its state survives), leaves a thread
	// that reaches out after the exec has ended.
	r2 := s.kexec(t, sess.ID, lang("python", fmt.Sprintf(`
import threading, time
print(get("http://pypi.test:%[1]d/two"))
later = []
def bg():
    time.sleep(1.5)
    later.append(get("http://pypi.test:%[1]d/background"))
threading.Thread(target=bg, daemon=True).start()
`, hp)))
	if r2.Kernel == nil || r2.Kernel.ID != r1.Kernel.ID || !strings.HasPrefix(r2.Stdout, "OK hello from pypi.test") {
		t.Fatalf("exec 2: kernel %+v stdout %q stderr %q", r2.Kernel, r2.Stdout, r2.Stderr)
	}
	if c := r2.Network.Connections; len(c) != 1 || !c[0].Allowed {
		t.Fatalf("exec 2 connections: %+v", c)
	}
	time.Sleep(4 * time.Second)
	r3 := s.kexec(t, sess.ID, lang("python", `print(later)`))
	if !strings.Contains(r3.Stdout, "OK hello from pypi.test") || r3.Network == nil || len(r3.Network.Connections) != 0 {
		t.Fatalf("exec 3: stdout %q network %+v", r3.Stdout, r3.Network)
	}

	// A javascript kernel of the session: its fetch goes through the
	// kernel's proxy too.
	rj := s.kexec(t, sess.ID, map[string]any{"language": "javascript", "code": fmt.Sprintf(`
const res = await fetch("http://pypi.test:%d/js");
console.log(res.status, await res.text());
`, hp)})
	if rj.Kernel == nil || rj.Kernel.ID == r1.Kernel.ID || !strings.HasPrefix(rj.Stdout, "200 hello from pypi.test") ||
		rj.Network == nil || len(conns(rj, true)) != 1 {
		t.Fatalf("javascript kernel: kernel %+v stdout %q stderr %q network %+v", rj.Kernel, rj.Stdout, rj.Stderr, rj.Network)
	}

	// A restarted kernel of the session keeps the session's way out.
	if status, body := s.do("POST", "/v1/sessions/"+sess.ID+"/kernels/python/restart", nil); status != 200 {
		t.Fatalf("restart: %d %s", status, body)
	}
	rr := s.kexec(t, sess.ID, lang("python", fmt.Sprintf(`
import urllib.request
print(urllib.request.urlopen("http://pypi.test:%d/restarted", timeout=20).read().decode())
`, hp)))
	if rr.Kernel == nil || rr.Kernel.ID == r1.Kernel.ID || !strings.HasPrefix(rr.Stdout, "hello from pypi.test") || rr.Network == nil || len(conns(rr, true)) != 1 {
		t.Fatalf("restarted kernel: kernel %+v stdout %q stderr %q network %+v", rr.Kernel, rr.Stdout, rr.Stderr, rr.Network)
	}

	// The audit trail: each exec's attempts under its id, the thread's
	// under the kernel's launch id.
	count := map[string]int{}
	for _, rec := range s.auditRecords() {
		if rec["step"] == "egress" {
			count[fmt.Sprint(rec["exec_id"])]++
		}
	}
	if count[r1.ID] != 2 || count[r2.ID] != 1 || count[r3.ID] != 0 || count[r1.Kernel.ID] != 1 {
		t.Errorf("egress audit records by id %v; want exec 1: 2, exec 2: 1, exec 3: 0, kernel %s: 1", count, r1.Kernel.ID)
	}
	if out, code := sandboxctlAudit(t, in, "verify", s.audit); code != 0 {
		t.Errorf("audit verify: exit %d\n%s", code, out)
	}

	// A kernel of a plain session: no proxy variable, relay or socket.
	plain := s.kernelSession(t)
	rp := s.kexec(t, plain.ID, lang("python", `
import os, socket
print(sorted(k for k in os.environ if "proxy" in k.lower()), os.path.exists("/run/sandboxd/egress"), os.path.exists("/run/sandboxd/relay"))
s = socket.socket(); s.settimeout(2)
print(s.connect_ex(("127.0.0.1", 3128)))
`))
	if rp.Kernel == nil || rp.Network != nil || rp.Stdout != "[] False False\n111\n" {
		t.Fatalf("plain kernel: kernel %+v network %+v stdout %q stderr %q", rp.Kernel, rp.Network, rp.Stdout, rp.Stderr)
	}

	// The proxy ends with the kernel.
	if status, body := s.do("DELETE", "/v1/sessions/"+sess.ID, nil); status != 204 {
		t.Fatalf("delete: %d %s", status, body)
	}
	for _, id := range []string{r1.Kernel.ID, rr.Kernel.ID, rj.Kernel.ID} {
		dir := in.path("state", "egress", id)
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, err := os.Stat(dir); os.IsNotExist(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the kernel's egress directory %s outlived the kernel", dir)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
