package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/nsinit/spec"
)

// helperReport is one report line of the helper with its facts as a map,
// and what the supervisor's strict decoder (spec.ParseReport) said of it.
type helperReport struct {
	Step   string         `json:"step"`
	OK     bool           `json:"ok"`
	Error  string         `json:"error"`
	Fix    string         `json:"fix"`
	Facts  map[string]any `json:"facts"`
	strict error
}

// directHelper is the real helper started by the test itself, as the
// service user, with the fds the supervisor would give it: the test holds
// every other end, so it can withhold the release byte, hang up, or pass
// an extra fd, and watch the live process from outside.
type directHelper struct {
	cmd      *exec.Cmd
	specW    *os.File
	releaseW *os.File
	reports  chan helperReport
	done     chan struct{}
	started  time.Time
	state    *os.ProcessState // set when done is closed
}

type directOpts struct {
	helper     string     // libexec name, default "nsinit"
	argvPrefix []string   // e.g. prlimit, run as the service user before the helper
	extra      []*os.File // fds 7, 8, ... (the test closes its copies after start)
	groups     []uint32   // supplementary groups of the service user
	hangUp     bool       // the release pipe's write end closed before start: the supervisor is gone
}

// startDirect starts the helper as the service user.
func (in *installation) startDirect(t *testing.T, o directOpts) *directHelper {
	t.Helper()
	if o.helper == "" {
		o.helper = "nsinit"
	}
	specR, specW := mustPipe(t)
	reportR, reportW := mustPipe(t)
	statusR, statusW := mustPipe(t)
	releaseR, releaseW := mustPipe(t)
	argv := append(append([]string{}, o.argvPrefix...), in.path("libexec", o.helper))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.ExtraFiles = append([]*os.File{specR, reportW, statusW, releaseR}, o.extra...)
	groups := o.groups
	if groups == nil {
		groups = []uint32{}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(in.uid), Gid: uint32(in.gid), Groups: groups}}
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.Dir = "/"
	d := &directHelper{cmd: cmd, specW: specW, releaseW: releaseW, reports: make(chan helperReport, 16), done: make(chan struct{})}
	if o.hangUp {
		releaseW.Close()
	}
	d.started = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start helper: %v", err)
	}
	for _, f := range append([]*os.File{specR, reportW, statusW, releaseR}, o.extra...) {
		f.Close()
	}
	go func() {
		sc := bufio.NewScanner(reportR)
		for sc.Scan() {
			var r helperReport
			if json.Unmarshal(sc.Bytes(), &r) == nil {
				_, _, r.strict = spec.ParseReport(sc.Bytes())
				d.reports <- r
			}
		}
		close(d.reports)
		reportR.Close()
	}()
	go func() { d.state, _ = cmd.Process.Wait(); statusR.Close(); close(d.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-d.done
		specW.Close()
		releaseW.Close()
	})
	return d
}

func mustPipe(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	return r, w
}

// report waits for the helper's next report.
func (d *directHelper) report(t *testing.T, timeout time.Duration) helperReport {
	t.Helper()
	select {
	case r, ok := <-d.reports:
		if !ok {
			t.Fatalf("the helper wrote no further report")
		}
		if r.strict != nil {
			t.Errorf("the supervisor would refuse this report: %v", r.strict)
		}
		return r
	case <-time.After(timeout):
		t.Fatalf("no helper report within %v", timeout)
	}
	return helperReport{}
}

// sendSpec writes a valid launch spec for a new workspace of the service
// user and closes the spec pipe.
func (d *directHelper) sendSpec(t *testing.T, in *installation, code string) {
	t.Helper()
	id := randID()
	ws := in.path("state/workspaces", "direct-"+id)
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(ws, in.uid, in.gid); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(ws) })
	s := spec.LaunchSpec{Version: spec.Version, ExecID: id, Runtime: "python", Workspace: filepath.Base(ws),
		Code: []byte(code), Network: spec.NetworkNone}
	if err := json.NewEncoder(d.specW).Encode(s); err != nil {
		t.Fatal(err)
	}
	d.specW.Close()
}

// statusOf reads /proc/PID/status into a map.
func statusOf(pid int) (map[string]string, error) {
	return statusOf0(fmt.Sprintf("/proc/%d/status", pid))
}

// capsZero says whether every capability set of a status but the bounding one is empty.
func capsZero(st map[string]string) bool {
	for _, k := range []string{"CapInh", "CapPrm", "CapEff", "CapAmb"} {
		if strings.Trim(st[k], "0") != "" {
			return false
		}
	}
	return true
}

// tasksOf counts the tasks (threads) whose real uid is uid: what the
// kernel's RLIMIT_NPROC counts.
func tasksOf(uid int) int {
	n := 0
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		tasks, _ := os.ReadDir("/proc/" + p.Name() + "/task")
		for _, task := range tasks {
			st, err := statusOf0("/proc/" + p.Name() + "/task/" + task.Name() + "/status")
			if err == nil && len(strings.Fields(st["Uid"])) > 0 && strings.Fields(st["Uid"])[0] == strconv.Itoa(uid) {
				n++
			}
		}
	}
	return n
}

func statusOf0(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out, nil
}
