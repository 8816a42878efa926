package integration

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// mirrorNet is an internal package mirror stood up for a test: a network
// namespace joined to the host by a veth pair, the host end 10.254.N.1/24
// (an address of the host), the far end 10.254.N.5 (not the host's), and an
// HTTP server listening there. Nothing leaves the machine: the /24 is
// routed to the veth alone.
type mirrorNet struct {
	ns, hostIf, prefix string // prefix: "10.254.N."
	port               int
	hits               atomic.Int64
}

func startMirrorNet(t *testing.T) *mirrorNet {
	t.Helper()
	id := randID()[:6]
	m := &mirrorNet{ns: "sbxeg-" + id, hostIf: "vh" + id, prefix: fmt.Sprintf("10.254.%d.", 1+rand.IntN(250))}
	mustRun(t, "ip", "netns", "add", m.ns)
	t.Cleanup(func() { _ = run("ip", "netns", "del", m.ns) }) // takes the veth pair with it
	mustRun(t, "ip", "link", "add", m.hostIf, "type", "veth", "peer", "name", "vn"+id, "netns", m.ns)
	mustRun(t, "ip", "addr", "add", m.prefix+"1/24", "dev", m.hostIf)
	mustRun(t, "ip", "link", "set", m.hostIf, "up")
	mustRun(t, "ip", "-n", m.ns, "addr", "add", m.prefix+"5/24", "dev", "vn"+id)
	mustRun(t, "ip", "-n", m.ns, "link", "set", "vn"+id, "up")
	mustRun(t, "ip", "-n", m.ns, "link", "set", "lo", "up")

	l := listenInNetns(t, "/run/netns/"+m.ns, m.prefix+"5:0")
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.hits.Add(1)
		fmt.Fprintf(w, "hello from the mirror %s", r.Host)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	m.port = l.Addr().(*net.TCPAddr).Port
	return m
}

func mustRun(t *testing.T, name string, args ...string) {
	t.Helper()
	if err := run(name, args...); err != nil {
		t.Fatal(err)
	}
}

// listenInNetns opens a TCP listener inside the network namespace at
// nsPath: a socket belongs to the namespace it was made in, whichever
// thread uses it later. The thread that entered the namespace is never
// unlocked, so it ends with its goroutine instead of serving others.
func listenInNetns(t *testing.T, nsPath, addr string) net.Listener {
	t.Helper()
	type result struct {
		l   net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		f, err := os.Open(nsPath)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("setns %s: %w", nsPath, err)}
			return
		}
		l, err := net.Listen("tcp", addr)
		ch <- result{l, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { r.l.Close() })
	return r.l
}

// refusesToStart runs the production supervisor with extra flags and env
// (besides PATH) and returns its output once it exits non-zero; it fails
// the test if the supervisor keeps running or exits 0.
func refusesToStart(t *testing.T, in *installation, env []string, extra ...string) string {
	t.Helper()
	args := append([]string{"--socket", in.path("run", "refuse-"+randID()+".sock"),
		"--state-dir", in.path("state"), "--audit-log", in.path("state/logs", "audit-refuse-"+randID()+".log"),
		"--helper", in.path("libexec", "nsinit"), "--helper-config", in.path("etc/nsinit.json"),
		"--cgroup-parent", in.cgroupParent}, extra...)
	cmd := exec.Command(in.path("bin/sandboxd"), args...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(in.uid), Gid: uint32(in.gid), Groups: []uint32{}}}
	in.placeSupervisor(t, cmd)
	out, finished, err := combinedWithin(cmd, 20*time.Second)
	if !finished {
		t.Fatalf("the supervisor started with %v:\n%s", extra, out)
	}
	if err == nil {
		t.Fatalf("the supervisor exited 0 with %v:\n%s", extra, out)
	}
	return string(out)
}

// TestEgressAllowNet: with --egress-allow-net an allowlisted name that
// resolves into the opted-in range reaches the internal mirror (a server
// in another network namespace, over a veth), and its audit record names
// the range; the range admits no name off the allowlist and no IP literal;
// an address the host gained after start inside the range is refused as
// the host's own; without the flag the same name is refused; a range
// holding loopback, link-local or a host address refuses to start.
func TestEgressAllowNet(t *testing.T) {
	in := setup(t)
	m := startMirrorNet(t)
	opted := m.prefix + "4/30" // .4-.7: the mirror's .5, not the host's .1
	resolve := fmt.Sprintf("TESTONLY_EGRESS_RESOLVE=mirror.test=%[1]s5,offlist.test=%[1]s5,self.test=%[1]s6,outside.test=%[1]s9", m.prefix)
	allow := fmt.Sprintf("mirror.test:%[1]d,self.test:%[1]d,outside.test:%[1]d", m.port)
	s := in.startSupervisor(t, supervisorOpts{bin: testOnlySupervisor(t, in), env: []string{resolve},
		extra: []string{"--egress-allow", allow, "--egress-allow-uid", "0", "--egress-allow-net", opted}})
	// An address the host gains after start: refused although in range.
	mustRun(t, "ip", "addr", "add", m.prefix+"6/32", "dev", m.hostIf)

	targets := []struct{ url, want string }{
		{fmt.Sprintf("http://mirror.test:%d/simple/", m.port), "OK hello from the mirror mirror.test"},
		{fmt.Sprintf("http://offlist.test:%d/", m.port), "not on the operator's egress allowlist"},
		{fmt.Sprintf("http://%s5:%d/", m.prefix, m.port), "IP literal"},
		{fmt.Sprintf("http://self.test:%d/", m.port), "local address of the supervisor's host"},
		{fmt.Sprintf("http://outside.test:%d/", m.port), "private address"},
	}
	r := fetchAll(t, s, targets)
	if got := m.hits.Load(); got != 1 {
		t.Errorf("the mirror saw %d requests, want 1", got)
	}
	if ok := conns(r, true); len(ok) != 1 || !strings.Contains(ok[0].Reason, opted) {
		t.Errorf("allowed connections: %+v", r.Network.Connections)
	}
	var admitted []string
	for _, rec := range s.auditRecords() {
		if rec["exec_id"] == r.ID && rec["step"] == "egress" {
			f, _ := rec["facts"].(map[string]any)
			if an, ok := f["allow_net"].(string); ok {
				admitted = append(admitted, fmt.Sprint(rec["ok"], " ", f["host"], " ", an))
			}
		}
	}
	if want := []string{"true mirror.test " + opted}; fmt.Sprint(admitted) != fmt.Sprint(want) {
		t.Errorf("egress records naming a range: %q, want %q", admitted, want)
	}
	if out, code := sandboxctlAudit(t, in, "verify", s.audit); code != 0 {
		t.Errorf("audit verify: exit %d\n%s", code, out)
	}
	s.stop()

	t.Run("without the flag", func(t *testing.T) {
		s2 := in.startSupervisor(t, supervisorOpts{bin: testOnlySupervisor(t, in), env: []string{resolve},
			extra: []string{"--egress-allow", allow, "--egress-allow-uid", "0"}})
		before := m.hits.Load()
		fetchAll(t, s2, []struct{ url, want string }{{targets[0].url, "REFUSED 403 sandboxd egress proxy refused GET mirror.test:" + fmt.Sprint(m.port) + ": mirror.test resolves to " + m.prefix + "5, a private address"}})
		if m.hits.Load() != before {
			t.Error("the mirror was reached without --egress-allow-net")
		}
	})

	t.Run("refused at start", func(t *testing.T) {
		for _, tc := range []struct{ net, want string }{
			{"127.0.0.0/8", "loopback"},
			{"169.254.0.0/16", "link-local"},
			{"0.0.0.0/0", "unspecified"},
			{m.prefix + "0/24", "an address of this host"},
		} {
			out := refusesToStart(t, in, nil, "--egress-allow", "mirror.test", "--egress-allow-net", tc.net)
			if !strings.Contains(out, "egress-allow-net") || !strings.Contains(out, tc.want) {
				t.Errorf("--egress-allow-net %s: output %q, want it to name the flag and %q", tc.net, out, tc.want)
			}
		}
	})
}

// testOnlySupervisor builds (once per installation) the supervisor with the
// sandboxd_testonly tag and returns its path below the prefix.
func testOnlySupervisor(t *testing.T, in *installation) string {
	t.Helper()
	bin := in.path("bin/sandboxd-testonly")
	if _, err := os.Stat(bin); err != nil {
		cmd := exec.Command("go", "build", "-tags", "sandboxd_testonly", "-o", bin, "./cmd/sandboxd")
		cmd.Dir = in.repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build the test-only supervisor: %v\n%s", err, out)
		}
	}
	return "bin/sandboxd-testonly"
}

// fetchAll fetches each url from one python egress exec and checks that
// the line printed for it contains want ("OK <body>" or the 403 body).
func fetchAll(t *testing.T, s *supervisor, targets []struct{ url, want string }) execResult {
	t.Helper()
	var urls []string
	for _, tg := range targets {
		urls = append(urls, tg.url)
	}
	enc, _ := json.Marshal(urls)
	r := s.exec(map[string]any{"language": "python", "network": "egress", "timeout_ms": 60000, "code": fmt.Sprintf(`
import urllib.request, urllib.error
for u in %s:
    try:
        print("OK", urllib.request.urlopen(u, timeout=20).read().decode())
    except urllib.error.HTTPError as e:
        print("REFUSED", e.code, e.read().decode().strip())
`, enc)})
	if r.ExitCode == nil || *r.ExitCode != 0 || r.Network == nil {
		t.Fatalf("exec: exit %v network %+v\nstdout %q\nstderr %q", r.ExitCode, r.Network, r.Stdout, r.Stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if len(lines) != len(targets) {
		t.Fatalf("stdout %q, want %d lines", r.Stdout, len(targets))
	}
	for i, tg := range targets {
		if !strings.Contains(lines[i], tg.want) || (strings.HasPrefix(tg.want, "OK") != strings.HasPrefix(lines[i], "OK")) {
			t.Errorf("%s: %q, want %q", tg.url, lines[i], tg.want)
		}
	}
	return r
}
