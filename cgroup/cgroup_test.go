package cgroup

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/internal/testutil"
)

const mountinfoHybrid = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
50 31 0:40 /nested /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`

const procCgroupHybrid = `8:pids:/
4:memory:/process_api/abc
1:cpu,cpuacct:/
0::/
`

func writeFakeProc(t *testing.T, mountinfo, cgroup string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "mountinfo"), []byte(mountinfo), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte(cgroup), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestParse(t *testing.T) {
	p := writeFakeProc(t, mountinfoHybrid, procCgroupHybrid)
	own, err := parseProcCgroup(filepath.Join(p, "cgroup"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"pids": "/", "memory": "/process_api/abc", "cpu": "/", "cpuacct": "/", "": "/"}
	for k, v := range want {
		if own[k] != v {
			t.Errorf("own[%q] = %q, want %q", k, own[k], v)
		}
	}
	mounts, err := parseCgroupMounts(filepath.Join(p, "mountinfo"))
	if err != nil {
		t.Fatal(err)
	}
	if mounts["memory"] != "/sys/fs/cgroup/memory" || mounts[""] != "/sys/fs/cgroup/unified" || mounts["cpu"] != "/sys/fs/cgroup/cpu" {
		t.Errorf("mounts %v", mounts)
	}
	if _, ok := mounts["blkio"]; ok {
		t.Error("a mount of a sub-cgroup (root /nested) must not be used: its paths do not line up with /proc/self/cgroup")
	}
}

// A mount point with a space is "\040" in mountinfo; a path used as given
// would name a directory that does not exist (the hand-written parser did).
func TestCgroupMountsUnescape(t *testing.T) {
	mi := `35 31 0:32 / /srv/cg\040roups/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /srv/cg\040roups/unified rw,relatime - cgroup2 cgroup2 rw
`
	mounts, err := parseCgroupMounts(filepath.Join(writeFakeProc(t, mi, ""), "mountinfo"))
	if err != nil {
		t.Fatal(err)
	}
	if got := mounts["memory"]; got != "/srv/cg roups/memory" {
		t.Errorf("memory at %q, want the unescaped %q", got, "/srv/cg roups/memory")
	}
	if got := mounts[""]; got != "/srv/cg roups/unified" {
		t.Errorf("cgroup2 at %q", got)
	}
}

// fakeHost builds a proc view whose cgroup mounts point into a temp tree.
func fakeHost(t *testing.T, v2Controllers string, ownV1 bool) (Host, string) {
	t.Helper()
	root := t.TempDir()
	var mi strings.Builder
	for i, c := range Controllers {
		d := filepath.Join(root, c)
		if err := os.MkdirAll(filepath.Join(d, "svc", "sandboxd"), 0o755); err != nil {
			t.Fatal(err)
		}
		mi.WriteString(strconv.Itoa(30+i) + " 1 0:1 / " + d + " rw - cgroup cgroup rw," + c + "\n")
	}
	u := filepath.Join(root, "unified")
	if err := os.MkdirAll(filepath.Join(u, "svc", "sandboxd"), 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(u, "svc", "sandboxd", "cgroup.subtree_control"), []byte(v2Controllers), 0o644)
	mi.WriteString("40 1 0:2 / " + u + " rw - cgroup2 cgroup2 rw\n")
	cg := "3:memory:/svc\n2:pids:/svc\n1:cpu:/svc\n0::/svc\n"
	p := writeFakeProc(t, mi.String(), cg)
	uid := os.Getuid()
	if !ownV1 {
		uid++ // nothing is owned by this uid
	}
	return Host{ProcSelf: p, UID: uid}, root
}

func TestDetect(t *testing.T) {
	t.Run("v2 with the controllers enabled wins", func(t *testing.T) {
		h, root := fakeHost(t, "cpu memory pids io", true)
		m := Detect(h, "sandboxd")
		if m.Mode() != ModeV2 || m.Dirs()[""] != filepath.Join(root, "unified", "svc", "sandboxd") {
			t.Fatalf("mode %s dirs %v (%s)", m.Mode(), m.Dirs(), m.Reason())
		}
	})
	t.Run("v2 without controllers falls back to v1", func(t *testing.T) {
		h, root := fakeHost(t, "", true)
		m := Detect(h, "sandboxd")
		if m.Mode() != ModeV1 || m.Dirs()["memory"] != filepath.Join(root, "memory", "svc", "sandboxd") {
			t.Fatalf("mode %s dirs %v (%s)", m.Mode(), m.Dirs(), m.Reason())
		}
	})
	t.Run("not owned: none, with the fix", func(t *testing.T) {
		h, _ := fakeHost(t, "cpu memory pids", false)
		m := Detect(h, "sandboxd")
		if m.Mode() != ModeNone || !strings.Contains(m.Reason(), "owned by uid") || !strings.Contains(m.Reason(), "fix:") {
			t.Fatalf("mode %s reason %q", m.Mode(), m.Reason())
		}
	})
	t.Run("missing parent: none", func(t *testing.T) {
		h, _ := fakeHost(t, "", true)
		if m := Detect(h, "other"); m.Mode() != ModeNone {
			t.Fatalf("mode %s", m.Mode())
		}
	})
	t.Run("none refuses to create", func(t *testing.T) {
		h, _ := fakeHost(t, "", false)
		if _, err := Detect(h, "sandboxd").Create("x", Limits{}); err == nil {
			t.Fatal("Create without a delegated subtree succeeded")
		}
	})
}

func TestCreateRefusesBadNames(t *testing.T) {
	h, _ := fakeHost(t, "", true)
	m := Detect(h, "sandboxd")
	for _, id := range []string{"", "..", "a/b", "."} {
		if _, err := m.Create(id, Limits{}); err == nil {
			t.Errorf("Create(%q) succeeded", id)
		}
	}
}

// TestRealV1 creates a real exec cgroup on this host's v1 hierarchies,
// checks the limits read back and removes it (the integration tests move
// real payloads in and prove the limits bite).
func TestRealV1(t *testing.T) {
	testutil.RequireRoot(t, "delegate a cgroup")
	m, _ := realV1Parent(t, "sandboxd-unit-")
	if m.Mode() != ModeV1 {
		t.Fatalf("mode %s: %s", m.Mode(), m.Reason())
	}
	e, err := m.Create("exec1", Limits{MemoryBytes: 64 << 20, Pids: 17, CPUs: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	read := func(c, f string) string {
		b, err := os.ReadFile(filepath.Join(e.dirs[c], f))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	if read("memory", "memory.limit_in_bytes") != strconv.Itoa(64<<20) || read("pids", "pids.max") != "17" || read("cpu", "cpu.cfs_quota_us") != "50000" {
		t.Fatalf("limits read back: %s %s %s", read("memory", "memory.limit_in_bytes"), read("pids", "pids.max"), read("cpu", "cpu.cfs_quota_us"))
	}
	if e.OOMKilled() {
		t.Fatal("a fresh cgroup reports an OOM kill")
	}
	if err := e.Remove(); err != nil {
		t.Fatal(err)
	}
	for _, d := range e.dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Fatalf("%s still there", d)
		}
	}
}

// TestRealV1Rename: a cgroup made ahead of time (a pre-started helper's)
// takes its exec's name and then its limits, with a process inside.
func TestRealV1Rename(t *testing.T) {
	testutil.RequireRoot(t, "delegate a cgroup")
	m, parent := realV1Parent(t, "sandboxd-unit-rn-")
	e, err := m.Create("pool-1", Limits{Background: true})
	if err != nil {
		t.Fatal(err)
	}
	shares := func() string {
		b, _ := os.ReadFile(filepath.Join(e.dirs["cpu"], "cpu.shares"))
		return strings.TrimSpace(string(b))
	}
	if got := shares(); got != "2" {
		t.Fatalf("a background cgroup's cpu.shares %q, want 2", got)
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); _ = e.Remove() }()
	if err := e.Add(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "a/b", ".."} {
		if err := e.Rename(bad); err == nil {
			t.Fatalf("Rename(%q) succeeded", bad)
		}
	}
	if err := e.Rename("exec2"); err != nil {
		t.Fatal(err)
	}
	if err := e.SetLimits(Limits{MemoryBytes: 32 << 20, Pids: 9}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", cmd.Process.Pid))
	if !strings.Contains(string(b), "/"+parent+"/exec2\n") || strings.Contains(string(b), "pool-1") {
		t.Fatalf("process cgroups after the rename:\n%s", b)
	}
	if got := e.Procs(); len(got) != 1 || got[0] != cmd.Process.Pid {
		t.Fatalf("Procs after the rename: %v", got)
	}
	if b, _ := os.ReadFile(filepath.Join(e.dirs["pids"], "pids.max")); strings.TrimSpace(string(b)) != "9" {
		t.Fatalf("pids.max %q", b)
	}
	if got := shares(); got != "1024" {
		t.Fatalf("cpu.shares %q once an exec took the cgroup, want the default 1024", got)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}

// realV1Parent makes a delegated parent named prefix+pid on this host's v1
// hierarchies (removed at the end of the test) and returns a Manager for
// it and its name; a host without v1 hierarchies skips, or fails under CI.
func realV1Parent(t *testing.T, prefix string) (*Manager, string) {
	t.Helper()
	own, err := OwnV1Dirs(Host{})
	if err != nil {
		testutil.SkipOrFail(t, fmt.Sprintf("no cgroup v1 hierarchies (this host is expected to have them): %v", err))
	}
	parent := prefix + strconv.Itoa(os.Getpid())
	for _, dir := range own {
		d := filepath.Join(dir, parent)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Remove(d) })
	}
	return Detect(Host{UID: 0}, parent), parent
}

// TestRealV1Usage: a process that spins and allocates in a real v1 exec
// cgroup shows up in Usage (cpuacct.usage, memory.max_usage_in_bytes),
// and ResetPeak starts the peak afresh.
func TestRealV1Usage(t *testing.T) {
	testutil.RequireRoot(t, "delegate a cgroup")
	m, _ := realV1Parent(t, "sandboxd-unit-us-")
	e, err := m.Create("exec3", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { e.KillAll(); _ = e.Remove() }()
	// The payload waits for a line, so that it runs in the cgroup only.
	cmd := exec.Command("python3", "-c", "import sys; sys.stdin.readline(); b = bytearray(64 << 20); sum(i*i for i in range(1_000_000))")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := e.Add(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if err := e.ResetPeak(); err != nil {
		t.Fatal(err)
	}
	_, _ = in.Write([]byte("go\n"))
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	u := e.Usage()
	if !u.CPUKnown || u.CPU < 20*time.Millisecond {
		t.Errorf("cpu %v (known %v), want the spin's tens of ms", u.CPU, u.CPUKnown)
	}
	if !u.PeakKnown || u.PeakBytes < 64<<20 {
		t.Errorf("peak %d (known %v), want at least the 64 MiB allocation", u.PeakBytes, u.PeakKnown)
	}
}
