package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/errdefs"
)

// TestMain runs the fake helper when the launcher starts this binary under
// the helper's name (fakehelper_test.go); otherwise the tests.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == fakeHelperName {
		os.Exit(fakeHelper())
	}
	os.Exit(m.Run())
}

// newTestLauncher is a launcher whose helper is the fake (this binary),
// without cgroups, auditing into memory.
func newTestLauncher(t *testing.T, quota int64) (*HelperLauncher, *audit.Memory) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sink := &audit.Memory{}
	h, err := New(Config{HelperPath: self, WorkspaceRoot: t.TempDir(), Sink: sink, QuotaBytes: quota,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	h.grace = 300 * time.Millisecond
	return h, sink
}

// fakeRequest asks the fake helper for scenario (with its argument).
func fakeRequest(t *testing.T, scenario string) Request {
	id := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	r := Request{ExecID: id, Caller: Caller{UID: 1000, GID: 1000, PID: 4242}, Runtime: "python", Code: scenario}
	r.Limits.TimeoutMS = 10000
	r.Limits.OutputLimitBytes = 1 << 16
	return r
}

// fakeRequestInWorkspace passes the workspace root for scenarios that
// write into the exec's workspace.
func fakeRequestInWorkspace(t *testing.T, h *HelperLauncher, scenario string) Request {
	r := fakeRequest(t, scenario)
	r.Code = scenario + " " + h.cfg.WorkspaceRoot + " -"
	return r
}

func steps(recs []audit.Record) string {
	var s []string
	for _, r := range recs {
		st := r.Step
		if !r.OK {
			st += "!"
		}
		s = append(s, st)
	}
	return strings.Join(s, " ")
}

func last(recs []audit.Record) audit.Record {
	if len(recs) == 0 {
		return audit.Record{}
	}
	return recs[len(recs)-1]
}

func TestLaunchRunsThroughEveryPhase(t *testing.T) {
	h, sink := newTestLauncher(t, 0)
	req := fakeRequest(t, "ok echo hello; echo oops >&2; exit 3")
	req.Stdin = []byte("ignored")
	res, err := h.Launch(context.Background(), req)
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	if res.ExitCode == nil || *res.ExitCode != 3 || res.Signal != nil || res.Stdout != "hello\n" || res.Stderr != "oops\n" {
		t.Fatalf("result %+v", res)
	}
	if p := res.Policy; p.ProfileSHA256 != "fake-profile" || p.MountsSHA256 != "fake-mounts" || p.HelperVersion != "fake-1" {
		t.Fatalf("attestation %+v, want the exec report's facts", p)
	}
	recs := sink.ForExec(req.ExecID)
	if got, want := steps(recs), "prepare enter network seccomp drop exec reap"; got != want {
		t.Fatalf("trail %q, want %q", got, want)
	}
	for _, r := range recs {
		if r.CallerUID != 1000 || r.CallerPID != 4242 {
			t.Fatalf("%s record attributed to uid %d pid %d", r.Step, r.CallerUID, r.CallerPID)
		}
	}
	// (pid_namespace_gone depends on the race between this short payload's
	// exit and the pidfd_open of its pid: not asserted here.)
	if f := last(recs).FactMap(); f["stopped"] != "exited" {
		t.Fatalf("reap facts %v", f)
	}
	if _, err := os.Stat(filepath.Join(h.cfg.WorkspaceRoot, req.ExecID)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("one-shot workspace left behind: %v", err)
	}
}

// TestPermitSequence: a helper whose reports deviate from enter, network,
// seccomp, drop, exec (each once, in order) is killed and the launch
// refused with the reason, and the refusal ends the trail.
func TestPermitSequence(t *testing.T) {
	cases := []struct {
		scenario, want string
	}{
		{"out-of-order", `step "seccomp" reported done out of order: the next permitted step is "network"`},
		{"twice", `step "enter" reported done out of order: the next permitted step is "network"`},
		{"unknown-step", `step "mount": no typed facts`},
		{"after-exec", `report of step "drop" after the helper's sequence had ended`},
		{"garbage", "undecodable report line"},
		{"huge", "report stream unreadable"},
		{"no-exec", "never reported its exec step"},
	}
	for _, c := range cases {
		t.Run(c.scenario, func(t *testing.T) {
			h, sink := newTestLauncher(t, 0)
			req := fakeRequest(t, c.scenario)
			begin := time.Now()
			res, err := h.Launch(context.Background(), req)
			if err == nil {
				t.Fatalf("launch not refused: %+v", res)
			}
			if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q (class %v), want unavailable with %q", err, errdefs.Class(err), c.want)
			}
			if took := time.Since(begin); took > 30*time.Second { // generous: only a refusal that waits for the helper to finish on its own is wrong
				t.Fatalf("refusal took %v", took)
			}
			reap := last(sink.ForExec(req.ExecID))
			if reap.Step != audit.StepReap || reap.OK || !strings.Contains(reap.Error, c.want) {
				t.Fatalf("last record %+v, want a failed reap with the reason", reap)
			}
		})
	}
}

// TestHelperFailuresAreNotViolations: a helper that fails a step the way
// nsinit does (the prelude's own failures included) gets its reason and
// fix through, not a permit violation.
func TestHelperFailuresAreNotViolations(t *testing.T) {
	for _, c := range []struct{ scenario, want, fix string }{
		{"fail-enter", `sandbox helper failed at step "enter": clone(CLONE_NEWUSER)`, "allow user namespaces"},
		{"prelude-drop", `sandbox helper failed at step "drop": capset`, ""},
	} {
		t.Run(c.scenario, func(t *testing.T) {
			h, _ := newTestLauncher(t, 0)
			_, err := h.Launch(context.Background(), fakeRequest(t, c.scenario))
			if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), c.want) || errdefs.FixOf(err) != c.fix {
				t.Fatalf("error %v, want unavailable %q with fix %q", err, c.want, c.fix)
			}
			if strings.Contains(err.Error(), "permit sequence") {
				t.Fatalf("a reported failure counted as a violation: %v", err)
			}
		})
	}
}

// TestTeardownEscalates: a payload past its timeout is killed through the
// reaper's pidfd; a helper that then neither exits nor heeds SIGTERM is
// killed after the grace period; one still setting up (no reaper known) is
// killed directly. Either way Launch returns promptly with SIGKILL.
func TestTeardownEscalates(t *testing.T) {
	for _, scenario := range []string{"hang", "slow-start"} {
		t.Run(scenario, func(t *testing.T) {
			h, sink := newTestLauncher(t, 0)
			req := fakeRequest(t, scenario)
			req.Limits.TimeoutMS = 500
			begin := time.Now()
			res, err := h.Launch(context.Background(), req)
			took := time.Since(begin)
			if err != nil {
				t.Fatalf("Launch: %v", err)
			}
			if !res.TimedOut || res.Signal == nil || *res.Signal != "SIGKILL" || res.ExitCode != nil {
				t.Fatalf("result %+v", res)
			}
			if took > 30*time.Second { // generous: the payload sleeps 60 s
				t.Fatalf("teardown took %v", took)
			}
			if f := last(sink.ForExec(req.ExecID)).FactMap(); f["stopped"] != "timeout" {
				t.Fatalf("reap facts %v", f)
			}
		})
	}
}

// TestTeardownAsksTheHelperFirst: a launch stopped before bwrap reported
// the sandbox's pid 1 is stopped through the helper (SIGTERM), which alone
// may signal bwrap and its fresh child (they run as the namespace owner,
// I10): a SIGKILL of the helper left that child behind for good.
func TestTeardownAsksTheHelperFirst(t *testing.T) {
	h, _ := newTestLauncher(t, 0)
	pidFile := filepath.Join(t.TempDir(), "child")
	req := fakeRequest(t, "mid-setup")
	req.Code = "mid-setup " + h.cfg.WorkspaceRoot + " " + pidFile
	req.Limits.TimeoutMS = 500
	res, err := h.Launch(context.Background(), req)
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	if !res.TimedOut {
		t.Fatalf("result %+v", res)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(string(b))
	deadline := time.Now().Add(5 * time.Second)
	for processAlive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the helper's child %d outlived the teardown", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// processAlive reports whether pid runs (a zombie does not count).
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z")
}

func TestCancelStopsTheExec(t *testing.T) {
	h, _ := newTestLauncher(t, 0)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	res, err := h.Launch(ctx, fakeRequest(t, "hang"))
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	if res.TimedOut || res.Signal == nil || *res.Signal != "SIGKILL" {
		t.Fatalf("result %+v", res)
	}
}

// TestReleasePipeHeldUntilReap: the release pipe's write end stays open
// while the helper runs, so a hang-up can only mean the supervisor died.
func TestReleasePipeHeldUntilReap(t *testing.T) {
	h, _ := newTestLauncher(t, 0)
	res, err := h.Launch(context.Background(), fakeRequest(t, "release-watch"))
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	if res.Stdout != "release: open\n" {
		t.Fatalf("helper saw %q, want the release pipe still open", res.Stdout)
	}
}

// TestQuotaWatcherStopsSmallWrites: files each far below any per-file
// limit, written over seconds: only the 200 ms watcher can stop them.
func TestQuotaWatcherStopsSmallWrites(t *testing.T) {
	h, sink := newTestLauncher(t, 512<<10)
	req := fakeRequestInWorkspace(t, h, "grow")
	begin := time.Now()
	res, err := h.Launch(context.Background(), req)
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	if !res.QuotaExceeded || res.Signal == nil || *res.Signal != "SIGKILL" {
		t.Fatalf("result %+v, want quota_exceeded and SIGKILL", res)
	}
	// 2,000 files over 100 s if not stopped; the quota is 8 files. The
	// bound is generous (a loaded host): only a watcher that never acts
	// lets the payload run on.
	if took := time.Since(begin); took > 60*time.Second {
		t.Fatalf("stopped only after %v", took)
	}
	if f := last(sink.ForExec(req.ExecID)).FactMap(); f["quota_exceeded"] != true || f["stopped"] != "quota" {
		t.Fatalf("reap facts %v", f)
	}
}

// TestQuotaFailsClosed: a workspace whose usage cannot be measured (here a
// path past PATH_MAX) counts as over the quota.
func TestQuotaFailsClosed(t *testing.T) {
	h, sink := newTestLauncher(t, 8<<20)
	req := fakeRequestInWorkspace(t, h, "unmeasurable")
	begin := time.Now()
	res, err := h.Launch(context.Background(), req)
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	if !res.QuotaExceeded || res.Signal == nil {
		t.Fatalf("result %+v, want quota_exceeded and killed", res)
	}
	// No wall-clock bound (the host may be loaded): the payload runs for
	// 100 s and exits 0 on its own, so a kill means the watcher stopped
	// it; the time is logged for a reader.
	t.Logf("stopped after %v", time.Since(begin))
	f := last(sink.ForExec(req.ExecID)).FactMap()
	if qe, _ := f["quota_error"].(string); !strings.Contains(qe, "cannot be measured") {
		t.Fatalf("reap facts %v, want the measuring error", f)
	}
}

// TestProbeTrail: a health probe leaves an exec's whole trail, marked as a
// probe and attributed to the peer that asked.
func TestProbeTrail(t *testing.T) {
	h, sink := newTestLauncher(t, 0)
	by := Caller{UID: 1234, GID: 1234, PID: 99}
	c := h.Probe(context.Background(), by)
	if !c.Ready() {
		t.Fatalf("probe checks %+v", c)
	}
	if again := h.Probe(context.Background(), Caller{UID: 1}); again != c {
		t.Fatalf("cached probe differs: %+v", again)
	}
	var id string
	for _, r := range sink.Records {
		if strings.HasPrefix(r.ExecID, "probe-") {
			id = r.ExecID
			break
		}
	}
	recs := sink.ForExec(id)
	if got, want := steps(recs), "accept decide prepare enter network seccomp drop exec reap"; got != want {
		t.Fatalf("probe trail %q, want %q", got, want)
	}
	for _, r := range recs {
		if r.CallerUID != by.UID || r.CallerGID != by.GID || r.CallerPID != by.PID {
			t.Fatalf("%s record attributed to %d/%d/%d", r.Step, r.CallerUID, r.CallerGID, r.CallerPID)
		}
		if r.Source == audit.SourceSupervisor && r.FactMap()["probe"] != true {
			t.Fatalf("%s record not marked as a probe: %v", r.Step, r.Facts)
		}
	}
	if n := len(sink.Records); n != len(recs) {
		t.Fatalf("the cached answer launched again: %d records", n)
	}
}
