package cgroup

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeV2 is a cgroup2 tree in a temp directory, laid out as the kernel
// shows a delegated root: the interface files exist (the kernel makes them
// on mkdir; here the leaf's and the parent's are made ahead), each write
// replaces a file's content (tests read back the last write).
type fakeV2 struct {
	mnt, root string
	host      Host
}

func newFakeV2(t *testing.T, own, controllers, procs string) *fakeV2 {
	t.Helper()
	mnt := filepath.Join(t.TempDir(), "cg")
	rootRel := own
	if filepath.Base(own) == LeafName {
		rootRel = filepath.Dir(own)
	}
	root := filepath.Join(mnt, rootRel)
	files := map[string]string{
		"cgroup.controllers":                       controllers,
		"cgroup.subtree_control":                   "",
		"cgroup.procs":                             procs,
		LeafName + "/cgroup.procs":                 "",
		"sandboxd/cgroup.subtree_control":          "",
		"sandboxd/x/memory.max":                    "max\n",
		"sandboxd/x/pids.max":                      "max\n",
		"sandboxd/x/cpu.max":                       "max 100000\n",
		"sandboxd/x/cpu.weight":                    "100\n",
		"sandboxd/x/memory.events":                 "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n",
		"sandboxd/x/cpu.stat":                      "usage_usec 312345\nuser_usec 300000\nsystem_usec 12345\n",
		"sandboxd/x/memory.peak":                   "220200960\n",
		"sandboxd/noswap/memory.max":               "max\n",
		"sandboxd/noswap/cpu.stat":                 "usage_usec 1000\n",
		"sandboxd/withswap/memory.max":             "max\n",
		"sandboxd/withswap/memory.swap.max":        "max\n",
		"sandboxd/withswap/memory.swap.peak":       "0\n",
		"sandboxd/withswap/memory.events":          "oom 0\noom_kill 0\n",
		"sandboxd/withswap/cgroup.procs":           "",
		"sandboxd/withswap/cgroup.subtree_control": "",
	}
	for rel, content := range files {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mi := "40 1 0:2 / " + mnt + " rw - cgroup2 cgroup2 rw\n"
	p := writeFakeProc(t, mi, "0::"+own+"\n")
	return &fakeV2{mnt: mnt, root: root, host: Host{ProcSelf: p, UID: os.Getuid(), PID: 1111}}
}

func (f *fakeV2) read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

const allControllers = "cpuset cpu io memory hugetlb pids rdma misc"

func TestSetupV2(t *testing.T) {
	t.Run("delegated root: leaf, controllers, parent", func(t *testing.T) {
		f := newFakeV2(t, "/system.slice/sandboxd.service", allControllers, "1111\n")
		m := Setup(f.host, "sandboxd")
		if m.Mode() != ModeV2 || m.Dirs()[""] != filepath.Join(f.root, "sandboxd") {
			t.Fatalf("mode %s dirs %v: %s", m.Mode(), m.Dirs(), m.Reason())
		}
		if got := f.read(t, LeafName+"/cgroup.procs"); got != "1111" {
			t.Errorf("the supervisor was not moved into its leaf: %s/cgroup.procs = %q", LeafName, got)
		}
		for _, rel := range []string{"cgroup.subtree_control", "sandboxd/cgroup.subtree_control"} {
			if got := f.read(t, rel); got != "+memory +pids +cpu" {
				t.Errorf("%s = %q, want the three controllers enabled", rel, got)
			}
		}
	})
	t.Run("every process of the root goes to the leaf", func(t *testing.T) {
		f := newFakeV2(t, "/run.scope", allControllers, "1111\n2222\n")
		if m := Setup(f.host, "sandboxd"); m.Mode() != ModeV2 {
			t.Fatalf("mode %s: %s", m.Mode(), m.Reason())
		}
		// The fake keeps the last write: the other process, after self.
		if got := f.read(t, LeafName+"/cgroup.procs"); got != "2222" {
			t.Errorf("last pid moved = %q, want 2222", got)
		}
	})
	t.Run("already in the leaf: nothing moved, controllers enabled", func(t *testing.T) {
		f := newFakeV2(t, "/sandboxd-run/"+LeafName, allControllers, "")
		m := Setup(f.host, "sandboxd")
		if m.Mode() != ModeV2 || m.Dirs()[""] != filepath.Join(f.root, "sandboxd") {
			t.Fatalf("mode %s dirs %v: %s", m.Mode(), m.Dirs(), m.Reason())
		}
		if got := f.read(t, LeafName+"/cgroup.procs"); got != "" {
			t.Errorf("moved %q though it was in its leaf already", got)
		}
	})
	t.Run("container namespace root", func(t *testing.T) {
		f := newFakeV2(t, "/", allControllers, "1111\n")
		if m := Setup(f.host, "sandboxd"); m.Mode() != ModeV2 || m.Dirs()[""] != filepath.Join(f.mnt, "sandboxd") {
			t.Fatalf("mode %s dirs %v: %s", m.Mode(), m.Dirs(), m.Reason())
		}
	})
	t.Run("not delegated to this uid: nothing changed", func(t *testing.T) {
		f := newFakeV2(t, "/system.slice/sandboxd.service", allControllers, "1111\n")
		f.host.UID++
		m := Setup(f.host, "sandboxd")
		if m.Mode() != ModeNone || !strings.Contains(m.Reason(), "fix:") {
			t.Fatalf("mode %s reason %q", m.Mode(), m.Reason())
		}
		if got := f.read(t, "cgroup.subtree_control"); got != "" {
			t.Errorf("wrote %q into a cgroup not delegated to it", got)
		}
		if got := f.read(t, LeafName+"/cgroup.procs"); got != "" {
			t.Errorf("moved %q out of a cgroup not delegated to it", got)
		}
	})
	t.Run("controllers not delegated: none, and why", func(t *testing.T) {
		f := newFakeV2(t, "/system.slice/sandboxd.service", "cpu io", "1111\n")
		m := Setup(f.host, "sandboxd")
		if m.Mode() != ModeNone || !strings.Contains(m.Reason(), "does not offer memory, pids") || !strings.Contains(m.Reason(), "v2 set-up") {
			t.Fatalf("mode %s reason %q", m.Mode(), m.Reason())
		}
	})
}

// Doctor's view of a running supervisor: it sits in its leaf, and the
// exec cgroups' parent is beside it.
func TestDetectV2FromLeaf(t *testing.T) {
	f := newFakeV2(t, "/system.slice/sandboxd.service/"+LeafName, allControllers, "")
	if err := os.WriteFile(filepath.Join(f.root, "sandboxd", "cgroup.subtree_control"), []byte("cpu memory pids\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := Detect(f.host, "sandboxd")
	if m.Mode() != ModeV2 || m.Dirs()[""] != filepath.Join(f.root, "sandboxd") {
		t.Fatalf("mode %s dirs %v: %s", m.Mode(), m.Dirs(), m.Reason())
	}
}

func TestV2Files(t *testing.T) {
	f := newFakeV2(t, "/svc", allControllers, "")
	e := &Exec{mode: ModeV2, dirs: map[string]string{"": filepath.Join(f.root, "sandboxd", "withswap")}}
	if err := e.SetLimits(Limits{MemoryBytes: 256 << 20, Pids: 64, CPUs: 1.5}); err == nil {
		t.Fatal("SetLimits wrote pids.max and cpu.max that the fake does not have: the test is wrong")
	}
	e = &Exec{mode: ModeV2, dirs: map[string]string{"": filepath.Join(f.root, "sandboxd", "x")}}
	if err := e.SetLimits(Limits{MemoryBytes: 256 << 20, Pids: 64, CPUs: 1.5}); err != nil {
		t.Fatal(err)
	}
	for rel, want := range map[string]string{"sandboxd/x/memory.max": "268435456", "sandboxd/x/pids.max": "64", "sandboxd/x/cpu.max": "150000 100000"} {
		if got := f.read(t, rel); got != want {
			t.Errorf("%s = %q, want %q", rel, got, want)
		}
	}
	// A build ahead of demand runs in the background; the exec that takes
	// it gets the default weight back, and an ordinary exec writes none.
	for _, step := range []struct {
		l    Limits
		want string
	}{{Limits{Background: true}, "1"}, {Limits{Pids: 64}, "100"}} {
		_ = os.WriteFile(filepath.Join(f.root, "sandboxd/x/cpu.weight"), []byte("untouched"), 0o644)
		if err := e.SetLimits(step.l); err != nil {
			t.Fatal(err)
		}
		if got := f.read(t, "sandboxd/x/cpu.weight"); got != step.want {
			t.Errorf("cpu.weight after SetLimits(%+v) = %q, want %q", step.l, got, step.want)
		}
	}
	_ = os.WriteFile(filepath.Join(f.root, "sandboxd/x/cpu.weight"), []byte("untouched"), 0o644)
	if err := e.SetLimits(Limits{Pids: 64}); err != nil || f.read(t, "sandboxd/x/cpu.weight") != "untouched" {
		t.Errorf("a foreground SetLimits on a foreground cgroup wrote cpu.weight (%v): a write per launch for nothing", err)
	}
	if _, err := os.Stat(filepath.Join(f.root, "sandboxd/x/memory.swap.max")); err == nil {
		t.Error("memory.swap.max created where the kernel has none")
	}
	if !e.OOMKilled() {
		t.Error("memory.events oom_kill 1 not read as an OOM kill")
	}
	u := e.Usage()
	if !u.CPUKnown || u.CPU != 312345*time.Microsecond || !u.PeakKnown || u.PeakBytes != 220200960 {
		t.Errorf("usage %+v, want cpu.stat usage_usec and memory.peak", u)
	}
	sw := &Exec{mode: ModeV2, dirs: map[string]string{"": filepath.Join(f.root, "sandboxd", "withswap")}}
	if err := sw.SetLimits(Limits{MemoryBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	if got := f.read(t, "sandboxd/withswap/memory.swap.max"); got != "0" {
		t.Errorf("memory.swap.max = %q, want 0: no swap escape", got)
	}
	if sw.OOMKilled() {
		t.Error("oom_kill 0 read as an OOM kill")
	}
	old := &Exec{mode: ModeV2, dirs: map[string]string{"": filepath.Join(f.root, "sandboxd", "noswap")}}
	if u := old.Usage(); !u.CPUKnown || u.PeakKnown {
		t.Errorf("usage %+v: a kernel without memory.peak (before 5.19) must say the peak is unknown", u)
	}
}

func TestV1UsageFiles(t *testing.T) {
	dir := t.TempDir()
	for rel, content := range map[string]string{"cpu/cpuacct.usage": "298765432\n", "memory/memory.max_usage_in_bytes": "230686720\n"} {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e := &Exec{mode: ModeV1, dirs: map[string]string{"cpu": filepath.Join(dir, "cpu"), "memory": filepath.Join(dir, "memory"), "pids": filepath.Join(dir, "pids")}}
	u := e.Usage()
	if !u.CPUKnown || u.CPU != 298765432 || !u.PeakKnown || u.PeakBytes != 230686720 {
		t.Errorf("usage %+v", u)
	}
	if err := e.ResetPeak(); err != nil {
		t.Fatal(err)
	}
	if u := e.Usage(); u.PeakBytes != 0 {
		t.Errorf("peak after reset %d", u.PeakBytes)
	}
	// cpuacct on a hierarchy of its own: the cpu directory has no
	// cpuacct.usage, and the CPU time is unknown rather than 0.
	e.dirs["cpu"] = t.TempDir()
	if u := e.Usage(); u.CPUKnown {
		t.Errorf("usage %+v: CPU known without cpuacct.usage", u)
	}
}

// A hybrid host under systemd Delegate=yes: the unit's v1 cgroups are the
// service user's, so Setup makes the parent in each and Detect finds v1.
func TestSetupV1Delegated(t *testing.T) {
	h, root := fakeHost(t, "", true)
	for _, c := range Controllers {
		if err := os.Remove(filepath.Join(root, c, "svc", "sandboxd")); err != nil {
			t.Fatal(err)
		}
	}
	m := Setup(h, "sandboxd")
	if m.Mode() != ModeV1 || m.Dirs()["memory"] != filepath.Join(root, "memory", "svc", "sandboxd") {
		t.Fatalf("mode %s dirs %v: %s", m.Mode(), m.Dirs(), m.Reason())
	}
	h.UID++
	for _, c := range Controllers {
		_ = os.Remove(filepath.Join(root, c, "svc", "sandboxd"))
	}
	if m := Setup(h, "sandboxd"); m.Mode() != ModeNone {
		t.Fatalf("made a parent in cgroups not delegated to it: mode %s %v", m.Mode(), m.Dirs())
	}
}
