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
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/cgroup"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/internal/testutil"
)

// newPoolLauncher is newTestLauncher with a helper pool (and cgroups, when
// cg is not nil).
func newPoolLauncher(t *testing.T, size int, sink audit.Sink, cg *cgroup.Manager) *HelperLauncher {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{HelperPath: self, WorkspaceRoot: t.TempDir(), Sink: sink, HelperPool: size, Cgroups: cg,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	h.grace = 300 * time.Millisecond
	t.Cleanup(h.Close)
	return h
}

func waitPool(t *testing.T, h *HelperLauncher, n int) []*helperProc {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for h.PooledHelpers() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the pool holds %d helpers after 10 s, want %d", h.PooledHelpers(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	h.pool.mu.Lock()
	defer h.pool.mu.Unlock()
	return append([]*helperProc(nil), h.pool.ready...)
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// TestHelperPoolServesLaunches: a launch takes a pre-started helper (never
// one another launch had), its trail is a cold launch's, the pool refills,
// and Close kills the helpers still waiting.
func TestHelperPoolServesLaunches(t *testing.T) {
	sink := &audit.Memory{}
	h := newPoolLauncher(t, 2, sink, nil)
	waiting := waitPool(t, h, 2)
	used := map[int]bool{}
	for i := 0; i < 3; i++ {
		req := fakeRequest(t, "ok echo $PPID")
		req.ExecID = fmt.Sprintf("pool-exec-%d", i)
		res, err := h.Launch(context.Background(), req)
		if err != nil {
			t.Fatalf("Launch: %v", err)
		}
		ppid, _ := strconv.Atoi(strings.TrimSpace(res.Stdout))
		if used[ppid] {
			t.Fatalf("helper %d served two launches", ppid)
		}
		used[ppid] = true
		if got, want := steps(sink.ForExec(req.ExecID)), "prepare enter network seccomp drop exec reap"; got != want {
			t.Fatalf("trail %q, want %q", got, want)
		}
		if i == 0 && ppid != waiting[0].cmd.Process.Pid {
			t.Fatalf("the first launch ran under helper %d, not the first pre-started one %d", ppid, waiting[0].cmd.Process.Pid)
		}
	}
	refilled := waitPool(t, h, 2)
	h.Close()
	for _, hp := range refilled {
		if alive(hp.cmd.Process.Pid) {
			t.Fatalf("pre-started helper %d alive after Close", hp.cmd.Process.Pid)
		}
	}
	// After Close, launches start their own helpers.
	if _, err := h.Launch(context.Background(), fakeRequest(t, "ok true")); err != nil {
		t.Fatalf("Launch after Close: %v", err)
	}
}

// TestHelperPoolSkipsDeadHelpers: a pre-started helper that died waiting
// is discarded; the launch gets a live one or starts its own.
func TestHelperPoolSkipsDeadHelpers(t *testing.T) {
	h := newPoolLauncher(t, 1, &audit.Memory{}, nil)
	hp := waitPool(t, h, 1)[0]
	_ = hp.cmd.Process.Kill()
	for !hp.exited() {
		time.Sleep(time.Millisecond)
	}
	res, err := h.Launch(context.Background(), fakeRequest(t, "ok echo ran"))
	if err != nil || res.Stdout != "ran\n" {
		t.Fatalf("Launch after the pooled helper died: %v %+v", err, res)
	}
}

// syncSink is an audit sink with a barrier: it counts the records written
// before each Sync and fails Sync when told to.
type syncSink struct {
	audit.Memory
	mu      sync.Mutex
	fail    bool
	exec    string
	atSyncs []int // the exec's records written before each Sync
}

func (s *syncSink) Sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.atSyncs = append(s.atSyncs, len(s.Memory.ForExec(s.exec)))
	if s.fail {
		return errors.New("disk gone")
	}
	return nil
}

// TestBarrierBeforeRelease: the launcher makes the audit records so far
// durable before it releases the helper, and a barrier that fails leaves
// the helper unreleased: the payload never runs, the launch fails with the
// audit reason, pooled helper or not.
func TestBarrierBeforeRelease(t *testing.T) {
	for _, pool := range []int{0, 1} {
		t.Run(fmt.Sprintf("pool=%d", pool), func(t *testing.T) {
			sink := &syncSink{}
			h := newPoolLauncher(t, pool, sink, nil)
			if pool > 0 {
				waitPool(t, h, pool)
			}
			req := fakeRequest(t, "ok echo ran")
			sink.exec = req.ExecID
			if _, err := h.Launch(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			if len(sink.atSyncs) != 1 || sink.atSyncs[0] != 1 {
				t.Fatalf("barriers after %v records, want one after the prepare record", sink.atSyncs)
			}
			sink.fail = true
			marker := filepath.Join(t.TempDir(), "ran")
			req = fakeRequest(t, "ok touch "+marker)
			req.ExecID += "-2"
			sink.exec = req.ExecID
			_, err := h.Launch(context.Background(), req)
			if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "audit log cannot be made durable") {
				t.Fatalf("Launch with a failing barrier: %v", err)
			}
			if _, serr := os.Stat(marker); serr == nil {
				t.Fatal("the payload ran although the barrier failed")
			}
			// The helper's steps before its release (enter to drop) may
			// report before the launcher, its barrier failed, kills it;
			// the exec step, which waits for the release, never may.
			if got := steps(sink.ForExec(req.ExecID)); !unreleasedTrail(got) {
				t.Fatalf("trail %q, want the prepare, at most the helper's steps before its release, and a failed reap", got)
			}
		})
	}
}

// TestPooledHelperLimitsBeforePayload runs a pre-started helper in a real
// v1 cgroup: the payload sees its request's limits in its own cgroup,
// which carries the exec's id.
func TestPooledHelperLimitsBeforePayload(t *testing.T) {
	testutil.RequireRoot(t, "delegate a cgroup")
	own, err := cgroup.OwnV1Dirs(cgroup.Host{})
	if err != nil {
		testutil.SkipOrFail(t, fmt.Sprintf("no cgroup v1 hierarchies (this host is expected to have them): %v", err))
	}
	parent := "sandboxd-launch-" + strconv.Itoa(os.Getpid())
	for _, c := range cgroup.Controllers {
		d := filepath.Join(own[c], parent)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			for i := 0; i < 100 && os.Remove(d) != nil; i++ {
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	cg := cgroup.Detect(cgroup.Host{UID: 0}, parent)
	h := newPoolLauncher(t, 1, &audit.Memory{}, cg)
	hp := waitPool(t, h, 1)[0]
	if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", hp.cmd.Process.Pid)); !strings.Contains(string(b), "/"+parent+"/pool-") {
		t.Fatalf("pre-started helper's cgroups:\n%s", b)
	}
	req := fakeRequest(t, "ok cat /sys/fs/cgroup/memory$(grep :memory: /proc/self/cgroup | cut -d: -f3)/memory.limit_in_bytes; grep :pids: /proc/self/cgroup | cut -d: -f3")
	req.ExecID = "limits-exec"
	req.Limits.MemoryBytes, req.Limits.Pids = 96<<20, 23
	res, err := h.Launch(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	if len(lines) != 2 || lines[0] != strconv.Itoa(96<<20) || !strings.HasSuffix(lines[1], "/"+parent+"/limits-exec") {
		t.Fatalf("payload saw %q: want the request's memory limit, in a cgroup named by its exec", res.Stdout)
	}
	h.Close()
	time.Sleep(100 * time.Millisecond) // the cgroups' removal is asynchronous
}

// unreleasedTrail reports whether steps is the trail of a launch whose
// helper was never released: the prepare, a prefix of the helper's steps
// before the release, and a failed reap.
func unreleasedTrail(steps string) bool {
	before := []string{"enter", "network", "seccomp", "drop"}
	for n := 0; n <= len(before); n++ {
		want := strings.Join(append(append([]string{"prepare"}, before[:n]...), "reap!"), " ")
		if steps == want {
			return true
		}
	}
	return false
}
