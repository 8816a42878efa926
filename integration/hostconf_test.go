//go:build hostconf

package integration

// The host-conformance suite: what a real host must give sandboxd, checked
// against a supervisor that is already installed and running there (the
// shipped systemd unit, or `make run`), not against one the harness starts.
// The host matrix (vm/) runs it inside each virtual machine row; on any
// other host: install, start the service, then as root
//
//	go test -tags hostconf -run '^TestHost' ./integration/
//
// Settings (environment): SANDBOXD_HC_SOCKET (default
// /run/sandboxd/sandboxd.sock); SANDBOXD_HC_CGROUPS, the cgroup mode the
// host must report (default v2); SANDBOXD_HC_RESTART, a shell command that
// restarts the service (default `systemctl restart sandboxd`);
// SANDBOXD_HC_STATE_DIR (default /var/lib/sandboxd); SANDBOXD_HC_LOAD_N,
// the execs of the reduced load and leak check (default 40).
//
// After a SIGKILL of the supervisor, something must start it again: systemd
// (Restart=on-failure) under the unit; the row's own loop under `make run`.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/internal/testutil"
)

// hcTimeoutMS is the timeout of the suite's execs (see hostService.exec).
const hcTimeoutMS = 60000

func hcEnv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// hostService is the installed supervisor, reached through its socket.
type hostService struct {
	t      *testing.T
	socket string
	client *http.Client
}

func hostSvc(t *testing.T) *hostService {
	t.Helper()
	testutil.RequireRoot(t, "signal the installed supervisor and read its cgroups")
	h := &hostService{t: t, socket: hcEnv("SANDBOXD_HC_SOCKET", "/run/sandboxd/sandboxd.sock")}
	h.client = &http.Client{Timeout: 3 * time.Minute, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", h.socket)
		},
		DisableKeepAlives: true,
	}}
	h.waitReady(3 * time.Minute)
	return h
}

// pid is the supervisor's pid: the credentials of the socket's listener.
func (h *hostService) pid() (int, error) {
	c, err := net.Dial("unix", h.socket)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	raw, err := c.(*net.UnixConn).SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *syscall.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if serr != nil {
		return 0, fmt.Errorf("SO_PEERCRED: %w", serr)
	}
	return int(cred.Pid), nil
}

// waitReady waits until the health endpoint answers ready.
func (h *hostService) waitReady(d time.Duration) api.Health {
	h.t.Helper()
	deadline := time.Now().Add(d)
	var last string
	for time.Now().Before(deadline) {
		status, body, err := h.try("GET", "/v1/health", nil)
		if err == nil && status == 200 {
			var hl api.Health
			if err := json.Unmarshal(body, &hl); err == nil && hl.OK {
				return hl
			}
		}
		last = fmt.Sprintf("status %d err %v body %s", status, err, body)
		time.Sleep(500 * time.Millisecond)
	}
	h.t.Fatalf("the service at %s is not ready after %v: %s", h.socket, d, last)
	return api.Health{}
}

func (h *hostService) try(method, path string, body any) (int, []byte, error) {
	var rd *strings.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = strings.NewReader(string(b))
	} else {
		rd = strings.NewReader("")
	}
	req, err := http.NewRequest(method, "http://sandboxd"+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, rerr := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if rerr != nil {
			break
		}
	}
	return resp.StatusCode, []byte(sb.String()), nil
}

// exec runs one request (path /v1/exec or a session's) and requires a 200.
// A request without timeout_ms gets a minute, the largest a one-shot may
// ask for by default: a virtual machine without KVM starts node in seconds.
func (h *hostService) exec(path string, req map[string]any) api.ExecResult {
	h.t.Helper()
	if _, ok := req["timeout_ms"]; !ok {
		req["timeout_ms"] = hcTimeoutMS
	}
	status, body, err := h.try("POST", path, req)
	if err != nil || status != 200 {
		h.t.Fatalf("POST %s: status %d err %v: %s", path, status, err, body)
	}
	var r api.ExecResult
	if err := json.Unmarshal(body, &r); err != nil {
		h.t.Fatalf("decode result: %v: %s", err, body)
	}
	h.t.Logf("exec %s: exit %s signal %s oom %v timed_out %v limits %+v stdout %.200q stderr %.200q",
		req["language"], deref(r.ExitCode), deref(r.Signal), r.OOMKilled, r.TimedOut, r.Policy.Limits, r.Stdout, r.Stderr)
	return r
}

// cgroupRoot is the cgroup v2 directory the supervisor's execs live below:
// the parent of its own cgroup when it sits in a leaf of its delegated
// subtree, else its own.
func (h *hostService) cgroupRoot() string {
	h.t.Helper()
	pid, err := h.pid()
	if err != nil {
		h.t.Fatalf("supervisor pid: %v", err)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		h.t.Fatal(err)
	}
	var rel string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.HasPrefix(line, "0::") {
			rel = strings.TrimPrefix(line, "0::")
		}
	}
	if rel == "" {
		h.t.Fatalf("the supervisor is in no cgroup v2 (%q): this suite is for v2 hosts", b)
	}
	own := filepath.Join("/sys/fs/cgroup", rel)
	if len(cgroupDirs(own)) == 1 && !strings.HasSuffix(own, ".service") {
		return filepath.Dir(own)
	}
	return own
}

// cgroupDirs lists every cgroup directory at and below root.
func cgroupDirs(root string) []string {
	var out []string
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	return out
}

func readTrim(p string) string {
	b, _ := os.ReadFile(p)
	return strings.TrimSpace(string(b))
}

// userPids lists the live (non-zombie) processes of the named users.
func userPids(names ...string) map[int]string {
	uids := map[string]bool{}
	for _, n := range names {
		if out, err := exec.Command("id", "-u", n).Output(); err == nil {
			uids[strings.TrimSpace(string(out))] = true
		}
	}
	out := map[int]string{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st := readTrim("/proc/" + e.Name() + "/status")
		var uid, state, name string
		for _, line := range strings.Split(st, "\n") {
			k, v, _ := strings.Cut(line, ":")
			switch k {
			case "Uid":
				if f := strings.Fields(v); len(f) > 1 {
					uid = f[1]
				}
			case "State":
				state = strings.TrimSpace(v)
			case "Name":
				name = strings.TrimSpace(v)
			}
		}
		if uids[uid] && !strings.HasPrefix(state, "Z") {
			out[pid] = name
		}
	}
	return out
}

// serviceUsers are the users a supervisor's processes run as: the service
// user and the namespace owner.
func serviceUsers() []string {
	return []string{hcEnv("SANDBOXD_HC_USER", "sandboxd"), hcEnv("SANDBOXD_HC_NS_USER", "sandboxd-ns")}
}

func TestHostHealth(t *testing.T) {
	h := hostSvc(t)
	hl := h.waitReady(time.Minute)
	t.Logf("health: %+v runtimes %v", hl.Checks, hl.Runtimes)
	if hl.Status != api.HealthReady {
		t.Errorf("health status %q, want %q (degraded: limits not enforced)", hl.Status, api.HealthReady)
	}
	if want := hcEnv("SANDBOXD_HC_CGROUPS", "v2"); hl.Checks.Cgroups != want {
		t.Errorf("checks.cgroups = %q, want %q on this host", hl.Checks.Cgroups, want)
	}
	for l, code := range map[string]string{"python": "print(6*7)", "javascript": "console.log(6*7)"} {
		if r := h.exec("/v1/exec", lang(l, code)); r.Stdout != "42\n" || !exitIs(r, 0) {
			t.Errorf("%s: %+v", l, r)
		}
	}
}
