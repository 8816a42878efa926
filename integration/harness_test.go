// Package integration runs sandboxd end to end under real privilege
// separation: the supervisor as a real non-root system user with no
// capability, the real helper with real file capabilities, real bubblewrap,
// python3 and node. Nothing at the kernel boundary is faked.
//
// Setting that up needs root. Without root the tests skip with the reason;
// under CI=true a missing prerequisite is a failure, never a skip.
package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/internal/testutil"
	"github.com/sandboxd/sandboxd/nsinit/config"
)

// testUser is the service user the supervisor runs as in these tests.
// SANDBOXD_IT_USER names another one, so that two checkouts can run their
// integration suites on one machine at once (each kills every process of
// its user at start).
var testUser = func() string {
	if u := os.Getenv("SANDBOXD_IT_USER"); u != "" {
		return u
	}
	return "sandboxd-it"
}()

// repoRoot is the checkout, two levels up from this package.
func repoRoot(t testing.TB) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(wd)
}

var (
	envOnce sync.Once
	envErr  error
	shared  *installation
)

// installation is one installed copy of sandboxd in a root-owned temporary
// prefix that the service user can reach (CI clones into a directory other
// users may not read, so nothing is run from the checkout).
type installation struct {
	// cgroupParent is the supervisors' --cgroup-parent: on v1 the
	// directory delegated to the test user below this test process's
	// cgroup in each hierarchy (the supervisor inherits the test's
	// cgroups), on v2 the exec cgroups' parent the supervisor makes in
	// cgroupRoot (cgroupharness_test.go).
	cgroupParent string
	cgroupDirs   []string // where exec cgroups are made
	cgroupMode   string   // "v1" or "v2"
	cgroupRoot   string   // v2: the cgroup delegated to the test user
	prefix       string   // root-owned, 0755
	uid          int
	gid          int
	created      bool // the test user was created by this run
	// ownerUID and ownerGID are the namespace owner's (testUser+"-ns"),
	// as make install creates sandboxd-ns.
	ownerUID     int
	ownerGID     int
	ownerCreated bool
	repo         string
}

func (in *installation) path(p ...string) string {
	return filepath.Join(append([]string{in.prefix}, p...)...)
}

// setup builds and installs sandboxd once per test binary.
func setup(t testing.TB) *installation {
	t.Helper()
	testutil.RequireRoot(t, "create a service user and install the helper with file capabilities")
	envOnce.Do(func() { shared, envErr = install(repoRoot(t)) })
	if envErr != nil {
		t.Fatalf("set up the installation: %v", envErr)
	}
	return shared
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

func install(repo string) (*installation, error) {
	in := &installation{repo: repo}
	if _, err := user.Lookup(testUser); err != nil {
		if err := run("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", testUser); err != nil {
			return nil, err
		}
		in.created = true
	}
	u, err := user.Lookup(testUser)
	if err != nil {
		return nil, err
	}
	// A test binary killed mid-run (a timeout) leaves its supervisors
	// behind; the process checks below count every process of this user.
	_ = exec.Command("pkill", "-KILL", "-u", testUser).Run()
	in.uid, _ = strconv.Atoi(u.Uid)
	in.gid, _ = strconv.Atoi(u.Gid)
	if err := in.createOwner(); err != nil {
		return nil, err
	}

	prefix, err := os.MkdirTemp("/tmp", "sandboxd-it-")
	if err != nil {
		return nil, err
	}
	in.prefix = prefix
	if err := os.Chmod(prefix, 0o755); err != nil {
		return nil, err
	}
	// As make install lays it out: the directory holding workspaces/ is
	// root-owned (the helper refuses a workspace root whose parent the
	// supervisor could rename), the supervisor's own state is below it.
	for _, d := range []string{"bin", "libexec", "etc", "etc/profiles", "state"} {
		if err := os.MkdirAll(in.path(d), 0o755); err != nil {
			return nil, err
		}
	}
	for _, d := range []string{"state/workspaces", "state/sessions", "state/logs", "state/archives", "state/egress", "run"} {
		if err := os.MkdirAll(in.path(d), 0o700); err != nil {
			return nil, err
		}
		if err := os.Chown(in.path(d), in.uid, in.gid); err != nil {
			return nil, err
		}
	}
	for _, b := range []string{"sandboxd", "sandboxctl", "sandboxd-exec", "sandboxd-relay"} {
		if err := copyFile(filepath.Join(repo, "bin", b), in.path("bin", b), 0o755); err != nil {
			return nil, fmt.Errorf("%w (run `make build` first)", err)
		}
	}
	for _, p := range []string{"payload.json", "kubernetes-worker.json"} {
		if err := copyFile(filepath.Join(repo, "profiles", p), in.path("etc/profiles", p), 0o644); err != nil {
			return nil, err
		}
	}
	// The namespace-owner file, as make install writes it.
	if err := os.WriteFile(in.path("etc/nsinit.owner"), []byte(fmt.Sprintf("%d:%d\n", in.ownerUID, in.ownerGID)), 0o644); err != nil {
		return nil, err
	}
	// The default helper, and its config.
	if err := in.buildHelper("nsinit", in.path("etc/nsinit.json"), true); err != nil {
		return nil, err
	}
	cfg := in.helperConfig()
	if err := writeJSON(in.path("etc/nsinit.json"), cfg); err != nil {
		return nil, err
	}
	if err := in.delegateCgroups(); err != nil {
		return nil, err
	}
	// As make install does: compile the payload profile once, as root.
	if err := run(in.path("libexec/nsinit"), "--compile-profile", in.path("etc/profiles/payload.json")); err != nil {
		return nil, err
	}
	return in, nil
}

// createOwner creates the namespace-owner user (testUser+"-ns"), as make
// install creates sandboxd-ns: a system user with its own group.
func (in *installation) createOwner() error {
	name := testUser + "-ns"
	if _, err := user.Lookup(name); err != nil {
		if err := run("useradd", "--system", "--no-create-home", "--user-group", "--shell", "/usr/sbin/nologin", name); err != nil {
			return err
		}
		in.ownerCreated = true
	}
	u, err := user.Lookup(name)
	if err != nil {
		return err
	}
	_ = exec.Command("pkill", "-KILL", "-u", name).Run()
	in.ownerUID, _ = strconv.Atoi(u.Uid)
	in.ownerGID, _ = strconv.Atoi(u.Gid)
	return nil
}

// helperConfig is the helper config of this installation.
func (in *installation) helperConfig() config.Config {
	return config.Default(in.path("state/workspaces"), in.path("bin/sandboxd-exec"), in.path("etc/profiles/payload.json"))
}

// helperFileCaps is the helper's file capability set (nsinit.FileCaps).
const helperFileCaps = "cap_setgid,cap_setuid,cap_net_admin,cap_sys_admin+p"

// buildHelper builds sandboxd-nsinit with configPath and this installation's
// owner file compiled in, installs it as libexec/<name> (root:<test group>,
// 0750) and, when withCaps, gives it its file capabilities.
func (in *installation) buildHelper(name, configPath string, withCaps bool) error {
	return in.buildHelperFrom(name, configPath, in.path("etc/nsinit.owner"), withCaps)
}

func (in *installation) buildHelperFrom(name, configPath, ownerPath string, withCaps bool) error {
	dst := in.path("libexec", name)
	// As the Makefile builds it (static), with this installation's paths.
	cmd := exec.Command("go", "build", "-trimpath", "-o", dst, "-tags", "netgo,osusergo",
		"-ldflags", "-X github.com/sandboxd/sandboxd/nsinit/config.DefaultPath="+configPath+" -linkmode external -extldflags -static",
		"./cmd/sandboxd-nsinit")
	cmd.Dir = in.repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1", `CGO_CFLAGS=-O2 -g '-DSBX_OWNER_PATH="`+ownerPath+`"'`)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build helper: %w: %s", err, out)
	}
	if err := os.Chown(dst, 0, in.gid); err != nil {
		return err
	}
	if err := os.Chmod(dst, 0o750); err != nil {
		return err
	}
	if withCaps {
		return run("setcap", helperFileCaps, dst)
	}
	return nil
}

func copyFile(src, dst string, mode os.FileMode) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.WriteFile(dst+".tmp", b, mode); err != nil {
		return err
	}
	if err := os.Chmod(dst+".tmp", mode); err != nil {
		return err
	}
	return os.Rename(dst+".tmp", dst)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// supervisor is one running sandboxd.
type supervisor struct {
	t      testing.TB
	in     *installation
	cmd    *exec.Cmd
	socket string
	audit  string
	logs   *bytes.Buffer
	client *http.Client
	done   chan struct{}
}

type supervisorOpts struct {
	helper  string   // libexec name, default "nsinit"
	extra   []string // extra flags
	env     []string // extra environment
	wrapper []string // argv prefix run as root before the supervisor (e.g. seccompexec)
	groups  []uint32 // supplementary groups of the supervisor (default none)
	bin     string   // the supervisor binary below the prefix, default "bin/sandboxd"
	// noCgroups starts the supervisor where no cgroup is delegated to it
	// (pass --allow-no-cgroups in extra, or it refuses to start).
	noCgroups bool
}

func randID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// startSupervisor starts sandboxd as the test user and waits for its socket.
func (in *installation) startSupervisor(t testing.TB, o supervisorOpts) *supervisor {
	t.Helper()
	if o.helper == "" {
		o.helper = "nsinit"
	}
	id := randID()
	s := &supervisor{t: t, in: in, logs: &bytes.Buffer{}, done: make(chan struct{}),
		socket: in.path("run", "s-"+id+".sock"), audit: in.path("state/logs", "audit-"+id+".log")}
	args := []string{
		"--socket", s.socket,
		"--state-dir", in.path("state"),
		"--audit-log", s.audit,
		"--helper", in.path("libexec", o.helper),
		"--helper-config", in.path("etc/nsinit.json"),
		"--cgroup-parent", in.cgroupParent,
	}
	if o.noCgroups {
		// v1: a parent nobody delegated; v2: the supervisor stays in the
		// test's own cgroup (not the test user's), so none is usable.
		args[len(args)-1] = in.cgroupParent + "-none"
	}
	// SANDBOXD_IT_WARM_POOL runs every supervisor of the suite with that
	// --warm-pool (0: the whole suite cold); a test's own flags still win.
	if n := os.Getenv("SANDBOXD_IT_WARM_POOL"); n != "" {
		args = append(args, "--warm-pool", n)
	}
	args = append(args, o.extra...)
	bin := in.path("bin/sandboxd")
	if o.bin != "" {
		bin = in.path(o.bin)
	}
	if len(o.wrapper) > 0 {
		argv := append(append(append([]string{}, o.wrapper...), "--", bin), args...)
		s.cmd = exec.Command(argv[0], argv[1:]...)
	} else {
		s.cmd = exec.Command(bin, args...)
		groups := o.groups
		if groups == nil {
			groups = []uint32{}
		}
		s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(in.uid), Gid: uint32(in.gid), Groups: groups}}
	}
	if !o.noCgroups {
		in.placeSupervisor(t, s.cmd)
	}
	s.cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, o.env...)
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	s.cmd.Dir = "/"
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start supervisor: %v", err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(s.stop)
	s.client = &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", s.socket)
		},
		DisableKeepAlives: true,
	}}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			t.Fatalf("supervisor exited early: %v\n%s", s.cmd.ProcessState, s.logs)
		default:
		}
		if c, err := net.Dial("unix", s.socket); err == nil {
			c.Close()
			return s
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("supervisor socket %s never appeared:\n%s", s.socket, s.logs)
	return nil
}

func (s *supervisor) stop() {
	select {
	case <-s.done:
		return // already gone (stopped or killed by the test)
	default:
	}
	if s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	if s.t.Failed() {
		s.t.Logf("supervisor log:\n%s", s.logs)
	}
}

func dialUnix(path string) (net.Conn, error) { return net.Dial("unix", path) }

// do sends a request and returns status and body.
func (s *supervisor) do(method, path string, body any) (int, []byte) {
	s.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			s.t.Fatal(err)
		}
		rd = bytes.NewReader(enc)
	}
	req, err := http.NewRequest(method, "http://sandboxd"+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v\nsupervisor log:\n%s", method, path, err, s.logs)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// The API's bodies, as package api defines them.
type (
	execResult = api.ExecResult
	apiError   = api.ErrorBody
)

// checkNamed returns the health check called name ("" when there is none).
func checkNamed(h api.Health, name string) string {
	for _, c := range h.Checks.List() {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

// exec runs code and requires a 200.
func (s *supervisor) exec(req map[string]any) execResult {
	s.t.Helper()
	status, body := s.do("POST", "/v1/exec", req)
	if status != 200 {
		s.t.Fatalf("exec: status %d: %s", status, body)
	}
	var r execResult
	if err := json.Unmarshal(body, &r); err != nil {
		s.t.Fatalf("decode result: %v: %s", err, body)
	}
	return r
}

func py(code string) map[string]any { return map[string]any{"language": "python", "code": code} }

// auditRecords reads the supervisor's audit log.
func (s *supervisor) auditRecords() []map[string]any {
	s.t.Helper()
	b, err := os.ReadFile(s.audit)
	if err != nil {
		s.t.Fatalf("read audit log: %v", err)
	}
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			s.t.Fatalf("audit line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// userProcesses lists the pids owned by uid other than exclude.
func userProcesses(uid int, exclude ...int) []string {
	skip := map[string]bool{}
	for _, p := range exclude {
		skip[strconv.Itoa(p)] = true
	}
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil || skip[e.Name()] {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		fields := map[string]string{}
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok {
				fields[k] = strings.TrimSpace(v)
			}
		}
		// A zombie adopted by pid 1 is dead and was orphaned by a supervisor
		// killed in an earlier test (a live supervisor is the subreaper of
		// everything an exec starts): the host's init reaps it in its time.
		if strings.HasPrefix(fields["State"], "Z") && fields["PPid"] == "1" {
			continue
		}
		if f := strings.Fields(fields["Uid"]); len(f) > 1 && f[1] == strconv.Itoa(uid) && !preStarted(e.Name()) {
			cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			out = append(out, fmt.Sprintf("%s(%s, state %s, ppid %s): %s", e.Name(), fields["Name"], fields["State"], fields["PPid"],
				strings.ReplaceAll(string(cmd), "\x00", " ")))
		}
	}
	return out
}

// preStarted reports whether pid is a helper of the supervisor's pool
// (--helper-pool), waiting for a launch in its own pool-* cgroup: no
// exec's process. A launch renames the cgroup to its exec id when it takes
// the helper, so a helper of an exec is never skipped.
func preStarted(pid string) bool {
	b, err := os.ReadFile("/proc/" + pid + "/cgroup")
	return err == nil && strings.Contains(string(b), "/pool-")
}

// statusField returns a field of /proc/PID/status.
func statusField(t testing.TB, pid int, field string) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == field {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return ""
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.removeCgroups()
		_ = os.RemoveAll(shared.prefix)
		if shared.created {
			_ = run("userdel", testUser)
		}
		if shared.ownerCreated {
			_ = run("userdel", testUser+"-ns")
		}
	}
	os.Exit(code)
}

// combinedWithin runs cmd and returns its combined output, killing it if
// it has not ended within d (then finished is false).
func combinedWithin(cmd *exec.Cmd, d time.Duration) (out []byte, finished bool, err error) {
	done := make(chan struct{})
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
		return out, true, err
	case <-time.After(d):
		_ = cmd.Process.Kill()
		<-done
		return out, false, err
	}
}
