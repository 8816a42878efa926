package egress

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/internal/testca"
	"github.com/sandboxd/sandboxd/internal/testutil"
)

// nodeOrFail returns node's path; without node the test skips, except
// under CI, where it fails.
func nodeOrFail(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("node")
	if err != nil {
		testutil.SkipOrFail(t, "node is not installed: "+err.Error())
	}
	return p
}

// certFor makes a CA (written to dir/ca.pem) and a leaf for name.
func certFor(t *testing.T, dir, name string) (tls.Certificate, string) {
	t.Helper()
	ca := testca.New(t, "egress test CA")
	return ca.Issue(t, testca.Leaf{Name: name, DNS: []string{name}}), ca.WriteCA(t, dir)
}

// TestNodeFetchThroughProxy: with the NODE_OPTIONS import, node's
// built-in fetch reaches an allowlisted host over http and https through
// the real proxy (the relay's part, a TCP port, played by the proxy's own
// listener), an off-list host is refused with the proxy's reason, and
// without the import fetch does not use the proxy (Node < 24).
func TestNodeFetchThroughProxy(t *testing.T) {
	node := nodeOrFail(t)
	dir := t.TempDir()
	cert, caFile := certFor(t, dir, "pypi.test")
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "hello %s %s", r.Host, r.URL.Path) })
	plain := listenOn(t, hello, false)
	tlsL, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: hello, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
	go srv.ServeTLS(tlsL, "", "")
	t.Cleanup(func() { srv.Close() })
	pp, tp := port(t, plain), tlsL.Addr().(*net.TCPAddr).Port

	allow, _ := ParseAllowlist(fmt.Sprintf("pypi.test:%d,pypi.test:%d", pp, tp))
	p, err := New(Config{Allow: allow, TestOnly: &TestOnly{Resolve: defaultResolve(), PublicLoopback: pub}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := p.NewExec("e1", nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Serve(ctx, l) }()
	t.Cleanup(func() { cancel(); <-done })
	proxy := "http://" + l.Addr().String()

	script := fmt.Sprintf(`
(async () => {
  for (const u of ["http://pypi.test:%[1]d/a", "https://pypi.test:%[2]d/b", "https://off.test:%[2]d/c", "http://off.test:%[1]d/d"]) {
    try {
      const r = await fetch(u);
      console.log(r.status, (await r.text()).trim());
    } catch (e) {
      console.log("ERR", e.cause ? e.cause.message : e.message);
    }
  }
})();
`, pp, tp)
	run := func(withImport bool) string {
		cmd := exec.Command(node, "-e", script)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HTTP_PROXY=" + proxy, "HTTPS_PROXY=" + proxy, "NODE_EXTRA_CA_CERTS=" + caFile}
		if withImport {
			cmd.Env = append(cmd.Env, "NODE_OPTIONS="+WithNodeOptionsImport(""))
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("node: %v\n%s", err, out)
		}
		return string(out)
	}
	out := run(true)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := []string{
		fmt.Sprintf("200 hello pypi.test:%d /a", pp),
		fmt.Sprintf("200 hello pypi.test:%d /b", tp),
		"ERR sandboxd egress proxy refused CONNECT off.test:",
		"403 sandboxd egress proxy refused GET off.test:",
	}
	if len(lines) != len(want) {
		t.Fatalf("node output:\n%s", out)
	}
	for i := range want {
		if !strings.HasPrefix(lines[i], want[i]) {
			t.Errorf("line %d: %q, want %q…", i, lines[i], want[i])
		}
	}
	if r := waitRecords(t, e, 4); len(r) != 4 {
		t.Errorf("records: %+v", r)
	}

	// Without the import, the fetch of Node before 24 ignores the proxy
	// variables: it resolves pypi.test itself and fails (no such name).
	v, _ := exec.Command(node, "-p", "process.versions.node.split('.')[0]").Output()
	if major := strings.TrimSpace(string(v)); major < "24" && len(major) == 2 {
		if out := run(false); strings.Contains(out, "200 hello") {
			t.Errorf("node %s fetch reached the server without the import:\n%s", major, out)
		}
	}
}
