// Package cgroup gives each exec its own cgroup, below a subtree the
// operator delegated to the supervisor's uid, with memory, pids and CPU
// limits; it reads back whether the OOM killer ended the run, kills what is
// left, and removes the cgroup afterwards.
//
// Two layouts. cgroup v2: the cgroup the supervisor starts in is delegated
// to its uid (systemd Delegate=yes, make run's transient scope or the
// cgroup it makes, a container's cgroup namespace); Setup moves the
// supervisor into a leaf of it (LeafName), enables memory, pids and cpu for
// its children and makes the directory named Parent that holds the exec
// cgroups (v2.go). cgroup v1 with the memory, pids and cpu controllers on
// their own hierarchies (hybrid hosts, such as the machines this project is
// built on, whose cgroup2 mount has no controllers): the directory named
// Parent below the supervisor's own cgroup in each, owned by the
// supervisor's uid (make run and the installer create it).
//
// It must never create, write or remove a cgroup outside the delegated
// subtree, and never follow a symlink inside it.
package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moby/sys/mountinfo"
)

// Modes, as GET /v1/health reports them.
const (
	ModeV2   = "v2"
	ModeV1   = "v1"
	ModeNone = "none"
)

// Controllers every exec cgroup gets.
var Controllers = []string{"memory", "pids", "cpu"}

// DefaultParent is the delegated directory's name below the supervisor's cgroup.
const DefaultParent = "sandboxd"

// Limits of one exec. Zero means "no limit" for that resource.
type Limits struct {
	MemoryBytes int64
	Pids        int64
	CPUs        float64
	// Background gives the cgroup the lowest CPU weight (v2 cpu.weight 1,
	// v1 cpu.shares 2; the kernel's defaults are 100 and 1024): work done
	// ahead of demand — a warm sandbox being built, a helper pre-started —
	// then runs on CPU no exec wants, and yields it to one that does
	// (CFS divides a busy CPU between sibling cgroups by weight; an idle
	// CPU is anyone's). SetLimits without it on a cgroup that had it gives
	// back the default weight (a warm sandbox taken by an exec).
	Background bool
}

// CPU weights: a background cgroup's and the kernel's default.
const (
	weightBackgroundV2, weightDefaultV2 = "1", "100"
	sharesBackgroundV1, sharesDefaultV1 = "2", "1024"
)

// Manager creates exec cgroups in a delegated subtree.
type Manager struct {
	mode string
	// v1: controller -> delegated directory; v2: "" -> delegated directory.
	dirs   map[string]string
	reason string
}

// Mode returns "v2", "v1" or "none".
func (m *Manager) Mode() string { return m.mode }

// Reason says why the mode is "none" (and how to fix it), or what is used.
func (m *Manager) Reason() string { return m.reason }

// Dirs returns the delegated directories in use, by controller ("" for v2).
func (m *Manager) Dirs() map[string]string { return m.dirs }

// Host is where Detect looks: the proc and sys views (tests point it at a
// fake tree). ProcSelf is normally /proc/self.
type Host struct {
	ProcSelf string
	UID      int
	// PID is the process Setup moves into LeafName (0: this process).
	PID int
}

// Detect finds a delegated subtree named parent for the calling process.
// It never fails: a host without one gets ModeNone and the reason.
func Detect(h Host, parent string) *Manager {
	if h.ProcSelf == "" {
		h.ProcSelf = "/proc/self"
	}
	own, err := parseProcCgroup(filepath.Join(h.ProcSelf, "cgroup"))
	if err != nil {
		return none(fmt.Sprintf("read own cgroups: %v", err))
	}
	mounts, err := parseCgroupMounts(filepath.Join(h.ProcSelf, "mountinfo"))
	if err != nil {
		return none(fmt.Sprintf("read cgroup mounts: %v", err))
	}
	var why []string
	// v2 first: a delegated cgroup2 subtree with the controllers enabled
	// (Setup made it; a supervisor in LeafName finds it beside its leaf).
	if mnt, ok := mounts[""]; ok {
		dir := filepath.Join(v2Root(mnt, own[""]), parent)
		if err := usable(dir, h.UID); err != nil {
			why = append(why, "v2: "+err.Error())
		} else if missing := missingFrom(filepath.Join(dir, "cgroup.subtree_control")); len(missing) > 0 {
			why = append(why, fmt.Sprintf("v2: %s does not enable %s in cgroup.subtree_control", dir, strings.Join(missing, ", ")))
		} else {
			return &Manager{mode: ModeV2, dirs: map[string]string{"": dir}, reason: "cgroup v2 subtree " + dir}
		}
	}
	dirs := map[string]string{}
	for _, c := range Controllers {
		mnt, ok := mounts[c]
		if !ok {
			why = append(why, "v1: no "+c+" hierarchy mounted")
			break
		}
		dir := filepath.Join(mnt, own[c], parent)
		if err := usable(dir, h.UID); err != nil {
			why = append(why, "v1: "+err.Error())
			break
		}
		dirs[c] = dir
	}
	if len(dirs) == len(Controllers) {
		addCPUAcct(dirs, mounts, own, parent, h.UID)
		return &Manager{mode: ModeV1, dirs: dirs, reason: "cgroup v1 subtrees " + strings.Join(sortedValues(dirs), ", ")}
	}
	return none(strings.Join(why, "; ") + "; fix: run under systemd with Delegate=yes (deploy/systemd/sandboxd.service; make run uses a transient scope with Delegate=yes), or on cgroup v2 without systemd start the supervisor in a cgroup chowned to the service user (scripts/run.sh), or on a v1 host create the delegated directory below the supervisor's cgroup in each hierarchy and chown it to the service user (sandboxctl admin delegate-cgroups)")
}

// addCPUAcct adds the v1 cpuacct hierarchy's delegated directory, when
// cpuacct is mounted apart from cpu (as on the hosts this project is built
// on) and the directory is there: exec CPU time comes from its
// cpuacct.usage. It is optional: without it usage falls back to rusage.
func addCPUAcct(dirs map[string]string, mounts, own map[string]string, parent string, uid int) {
	mnt, ok := mounts["cpuacct"]
	if !ok || mnt == mounts["cpu"] {
		return
	}
	if dir := filepath.Join(mnt, own["cpuacct"], parent); usable(dir, uid) == nil {
		dirs["cpuacct"] = dir
	}
}

func none(reason string) *Manager { return &Manager{mode: ModeNone, reason: reason} }

func sortedValues(m map[string]string) []string {
	var out []string
	for _, c := range append(append([]string{}, Controllers...), "cpuacct") {
		if v, ok := m[c]; ok {
			out = append(out, v)
		}
	}
	return out
}

// usable checks that dir is a real directory owned by uid.
func usable(dir string, uid int) error {
	var st syscall.Stat_t
	if err := syscall.Lstat(dir, &st); err != nil {
		return fmt.Errorf("delegated cgroup %s: %w", dir, err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return fmt.Errorf("delegated cgroup %s is not a directory", dir)
	}
	if int(st.Uid) != uid {
		return fmt.Errorf("delegated cgroup %s is owned by uid %d, not this process's uid %d", dir, st.Uid, uid)
	}
	return nil
}

// parseProcCgroup maps each controller ("" for the v2 hierarchy) to the
// calling process's cgroup path.
func parseProcCgroup(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out, sc.Err()
}

// parseCgroupMounts maps each v1 controller ("" for cgroup2) to the mount
// point of its hierarchy, from mountinfo. Only mounts of the hierarchy's
// root are used: below a cgroup namespace or a bind of a sub-cgroup, the
// paths in /proc/self/cgroup would not line up.
func parseCgroupMounts(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return cgroupMounts(f)
}

// cgroupMounts is parseCgroupMounts over an open mountinfo. The format's
// escapes (a space in a mount point is "\040") are undone by
// moby/sys/mountinfo, which runc and containerd use too.
func cgroupMounts(r io.Reader) (map[string]string, error) {
	infos, err := mountinfo.GetMountsFromReader(r, func(i *mountinfo.Info) (skip, stop bool) {
		return i.Root != "/" || (i.FSType != "cgroup" && i.FSType != "cgroup2"), false
	})
	if err != nil {
		return nil, fmt.Errorf("parse mountinfo: %w", err)
	}
	out := map[string]string{}
	for _, i := range infos {
		keys := []string{""} // cgroup2: one unified hierarchy
		if i.FSType == "cgroup" {
			keys = strings.Split(i.VFSOptions, ",")
		}
		for _, k := range keys {
			if _, seen := out[k]; !seen {
				out[k] = i.Mountpoint
			}
		}
	}
	return out, nil
}

// Exec is one exec's cgroup (one directory per v1 controller, or one v2 directory).
type Exec struct {
	mode string
	dirs map[string]string
	// peak, on v2, is memory.peak opened by ResetPeak: Linux resets the
	// peak for reads through the file descriptor that was written to.
	peak *os.File
	// background: its CPU weight was set to the lowest (Limits.Background).
	background bool
}

// validName refuses a cgroup name that is not one plain path component.
func validName(id string) error {
	if id == "" || strings.ContainsAny(id, "/.") {
		return fmt.Errorf("cgroup name %q", id)
	}
	return nil
}

// Create makes the cgroup of exec id and sets its limits.
func (m *Manager) Create(id string, l Limits) (*Exec, error) {
	if m.mode == ModeNone {
		return nil, errors.New("no delegated cgroup subtree: " + m.reason)
	}
	if err := validName(id); err != nil {
		return nil, err
	}
	e := &Exec{mode: m.mode, dirs: map[string]string{}}
	for c, parent := range m.dirs {
		dir := filepath.Join(parent, id)
		if err := os.Mkdir(dir, 0o755); err != nil {
			_ = e.Remove()
			return nil, fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		e.dirs[c] = dir
	}
	if err := e.SetLimits(l); err != nil {
		_ = e.Remove()
		return nil, err
	}
	return e, nil
}

// SetLimits writes l to the cgroup; a zero field leaves that resource as
// it is (a fresh cgroup: unlimited below the delegated subtree). The
// launcher writes a request's limits to a cgroup made ahead of time (the
// helper pool) before it releases the helper: nothing of the payload runs
// before they hold.
func (e *Exec) SetLimits(l Limits) error {
	type w struct{ ctrl, file, value string }
	var writes []w
	period := 100000
	if e.mode == ModeV2 {
		if l.MemoryBytes > 0 {
			writes = append(writes, w{"", "memory.max", strconv.FormatInt(l.MemoryBytes, 10)})
			// No swap for an exec: the memory limit is then the OOM
			// killer's, not a slow escape into swap. The file exists only
			// with swap accounting (CONFIG_MEMCG_SWAP); without it swap is
			// not limited per cgroup, which matters only on a host with
			// swap enabled (SECURITY.md).
			if _, err := os.Stat(filepath.Join(e.dirs[""], "memory.swap.max")); err == nil {
				writes = append(writes, w{"", "memory.swap.max", "0"})
			}
		}
		if l.Pids > 0 {
			writes = append(writes, w{"", "pids.max", strconv.FormatInt(l.Pids, 10)})
		}
		if l.CPUs > 0 {
			writes = append(writes, w{"", "cpu.max", fmt.Sprintf("%d %d", int(l.CPUs*float64(period)), period)})
		}
		if l.Background {
			writes = append(writes, w{"", "cpu.weight", weightBackgroundV2})
		} else if e.background {
			writes = append(writes, w{"", "cpu.weight", weightDefaultV2})
		}
	} else {
		if l.MemoryBytes > 0 {
			v := strconv.FormatInt(l.MemoryBytes, 10)
			// A live cgroup (a warm sandbox's, set for the request that
			// takes it): v1 refuses a memory.limit_in_bytes above
			// memory.memsw.limit_in_bytes (EINVAL), so memsw is raised
			// first; when it shrinks, that write fails harmlessly and is
			// made again after memory below.
			if _, err := os.Stat(filepath.Join(e.dirs["memory"], "memory.memsw.limit_in_bytes")); err == nil {
				_ = writeFile(filepath.Join(e.dirs["memory"], "memory.memsw.limit_in_bytes"), v)
			}
			writes = append(writes, w{"memory", "memory.limit_in_bytes", v})
			// With swap accounting, memory+swap gets the same limit, so
			// that hitting it means the OOM killer, not swapping.
			if _, err := os.Stat(filepath.Join(e.dirs["memory"], "memory.memsw.limit_in_bytes")); err == nil {
				writes = append(writes, w{"memory", "memory.memsw.limit_in_bytes", v})
			}
		}
		if l.Pids > 0 {
			writes = append(writes, w{"pids", "pids.max", strconv.FormatInt(l.Pids, 10)})
		}
		if l.CPUs > 0 {
			writes = append(writes, w{"cpu", "cpu.cfs_period_us", strconv.Itoa(period)},
				w{"cpu", "cpu.cfs_quota_us", strconv.Itoa(int(l.CPUs * float64(period)))})
		}
		if l.Background {
			writes = append(writes, w{"cpu", "cpu.shares", sharesBackgroundV1})
		} else if e.background {
			writes = append(writes, w{"cpu", "cpu.shares", sharesDefaultV1})
		}
	}
	for _, x := range writes {
		if err := writeFile(filepath.Join(e.dirs[x.ctrl], x.file), x.value); err != nil {
			return fmt.Errorf("set %s: %w", x.file, err)
		}
	}
	e.background = l.Background
	return nil
}

// writeFile writes one value to a cgroup interface file. O_TRUNC is what
// a shell's ">" does too: the kernel ignores it, a fake tree needs it.
func writeFile(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	_, werr := f.WriteString(value)
	cerr := f.Close()
	return errors.Join(werr, cerr)
}

// Rename gives the cgroup a new name in the same delegated directory (a
// pre-started helper's cgroup becomes its exec's). On v1 it is rename(2)
// of each directory, which moves no process, so it is cheap. cgroup v2
// has no rename (its kernfs operations offer none: EPERM), so there the
// cgroup id is made afresh, every process of the old one moved into it
// (for a pooled helper, the helper alone: it starts nothing before its
// release) and the old one removed; its limits are the caller's to set
// (SetLimits) as after a v1 rename. On failure e names whichever cgroup
// holds the processes, so that KillAll and Remove still find them.
func (e *Exec) Rename(id string) error {
	if err := validName(id); err != nil {
		return err
	}
	if e.mode == ModeV2 {
		return e.renameV2(id)
	}
	for c, dir := range e.dirs {
		to := filepath.Join(filepath.Dir(dir), id)
		if err := os.Rename(dir, to); err != nil {
			return fmt.Errorf("rename cgroup %s to %s: %w", dir, id, err)
		}
		e.dirs[c] = to
	}
	return nil
}

// renameV2 is Rename on cgroup v2: mkdir, move, rmdir.
func (e *Exec) renameV2(id string) error {
	from := e.dirs[""]
	to := filepath.Join(filepath.Dir(from), id)
	if err := os.Mkdir(to, 0o755); err != nil {
		return fmt.Errorf("create cgroup %s (for %s): %w", to, from, err)
	}
	for _, pid := range e.Procs() {
		if err := writeFile(filepath.Join(to, "cgroup.procs"), strconv.Itoa(pid)); err != nil && !errors.Is(err, syscall.ESRCH) {
			_ = syscall.Rmdir(to) // fails while a process moved already: then e stays at from, and KillAll finds the rest
			return fmt.Errorf("move pid %d from %s into %s: %w", pid, from, to, err)
		}
	}
	e.closePeak()
	e.dirs[""] = to
	e.background = false // a new cgroup: the default weight
	old := &Exec{mode: ModeV2, dirs: map[string]string{"": from}}
	if err := old.Remove(); err != nil {
		return fmt.Errorf("remove the renamed cgroup: %w", err)
	}
	return nil
}

// Dir returns the v2 directory (for CLONE_INTO_CGROUP), or "" on v1.
func (e *Exec) Dir() string {
	if e.mode == ModeV2 {
		return e.dirs[""]
	}
	return ""
}

// Add moves pid (and so, on v1, everything it starts afterwards) into the
// cgroup. On v2 the helper is started in it directly (CLONE_INTO_CGROUP).
func (e *Exec) Add(pid int) error {
	for _, dir := range e.dirs {
		if err := writeFile(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("move pid %d into %s: %w", pid, dir, err)
		}
	}
	return nil
}

// OOMKilled reports whether the OOM killer killed a process of the cgroup.
func (e *Exec) OOMKilled() bool {
	if e.mode == ModeV2 {
		return counter(filepath.Join(e.dirs[""], "memory.events"), "oom_kill") > 0
	}
	return counter(filepath.Join(e.dirs["memory"], "memory.oom_control"), "oom_kill") > 0
}

// MemoryPeak returns the cgroup's peak memory use in bytes, or 0 where
// the kernel does not keep one (v2 before Linux 5.19).
func (e *Exec) MemoryPeak() int64 { return e.Usage().PeakBytes }

// counter reads "name N" from a flat keyed file; 0 when it is not there.
func counter(path, name string) int64 {
	n, _ := counterOK(path, name)
	return n
}

// Procs lists the pids in the cgroup.
func (e *Exec) Procs() []int {
	dir := e.dirs["pids"]
	if e.mode == ModeV2 {
		dir = e.dirs[""]
	}
	return readPids(filepath.Join(dir, "cgroup.procs"))
}

// KillAll SIGKILLs every process still in the cgroup and waits (bounded)
// until it is empty. On v2 cgroup.kill (Linux 5.14+) kills them all at
// once, a fork bomb's children included; where it is missing the write
// fails and the SIGKILL loop below does the work (a v1 cgroup, whose pids
// limit keeps a fork bomb from outrunning the loop).
func (e *Exec) KillAll() {
	if e.mode == ModeV2 {
		_ = writeFile(filepath.Join(e.dirs[""], "cgroup.kill"), "1")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		procs := e.Procs()
		if len(procs) == 0 || time.Now().After(deadline) {
			return
		}
		for _, p := range procs {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Remove deletes the cgroup directories (they must be empty of processes).
func (e *Exec) Remove() error {
	e.closePeak()
	var errs []error
	for _, dir := range e.dirs {
		var err error
		for i := 0; i < 100; i++ { // a process that just died may linger briefly
			if err = syscall.Rmdir(dir); err == nil || errors.Is(err, syscall.ENOENT) {
				err = nil
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dir, err))
		}
	}
	return errors.Join(errs...)
}

// OwnV1Dirs returns, for each controller on its own v1 hierarchy (and
// cpuacct where it is mounted apart from cpu), the directory of the
// calling process's cgroup. An installer creates the
// delegated Parent directory below each of them for the service user.
func OwnV1Dirs(h Host) (map[string]string, error) {
	if h.ProcSelf == "" {
		h.ProcSelf = "/proc/self"
	}
	own, err := parseProcCgroup(filepath.Join(h.ProcSelf, "cgroup"))
	if err != nil {
		return nil, err
	}
	mounts, err := parseCgroupMounts(filepath.Join(h.ProcSelf, "mountinfo"))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, c := range Controllers {
		mnt, ok := mounts[c]
		if !ok {
			return nil, fmt.Errorf("no %s cgroup v1 hierarchy mounted", c)
		}
		out[c] = filepath.Join(mnt, own[c])
	}
	if mnt, ok := mounts["cpuacct"]; ok && mnt != mounts["cpu"] {
		out["cpuacct"] = filepath.Join(mnt, own["cpuacct"])
	}
	return out, nil
}

// Sweep kills the processes of, and removes, every exec cgroup left in the
// delegated subtree: a supervisor killed with SIGKILL leaves them behind,
// and nothing of an exec may outlive the supervisor that ran it. It returns
// how many it removed, and for each one it could not, why: a cgroup that
// still holds processes after the kill is named with them (holdersError).
func (m *Manager) Sweep() (int, error) {
	if m.mode == ModeNone {
		return 0, nil
	}
	names := map[string]bool{}
	for _, parent := range m.dirs {
		ents, err := os.ReadDir(parent)
		if err != nil {
			return 0, err
		}
		for _, e := range ents {
			if e.IsDir() && e.Type()&os.ModeSymlink == 0 {
				names[e.Name()] = true
			}
		}
	}
	var errs []error
	removed := 0
	for name := range names {
		e := &Exec{mode: m.mode, dirs: map[string]string{}}
		for c, parent := range m.dirs {
			if _, err := os.Lstat(filepath.Join(parent, name)); err == nil {
				e.dirs[c] = filepath.Join(parent, name)
			}
		}
		// The full wait, even while every process left refuses the
		// signal: a dying launch's keeper and holder (the namespace
		// owner's, so EPERM here) end on their own within it.
		e.KillAll()
		if left := e.Procs(); len(left) > 0 {
			errs = append(errs, holdersError(name, "/proc", left))
			continue
		}
		if err := e.Remove(); err != nil {
			errs = append(errs, err)
			continue
		}
		removed++
	}
	return removed, errors.Join(errs...)
}
