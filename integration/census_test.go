//go:build load

package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// census is everything of one supervisor that an exec could leave behind,
// with the two pools counted apart from the execs: the warm pool's idle
// sandboxes (--warm-pool) and the pre-started helpers (--helper-pool) are
// no exec's, and their number may differ between two moments without
// anything having leaked.
type census struct {
	fds      map[string]int // the supervisor's open fds, by kind
	rssKB    int
	threads  int
	mounts   int
	warmIdle map[string]int // sandboxd_warm_pool_idle by runtime

	warmSandboxes, warmProcs, warmCgroups, warmWorkspaces int
	helperPoolProcs, helperPoolCgroups                    int
	helperPools                                           int // distinct pre-started helpers (their cgroups)
	perSandbox                                            int // cgroups of one sandbox: one per delegated directory

	execProcs, execCgroups, execWorkspaces []string // belonging to neither pool
}

// counts is the census as the rows `make load` prints and compares.
func (c census) counts() map[string]int {
	n := 0
	for _, v := range c.fds {
		n += v
	}
	idle := 0
	for _, v := range c.warmIdle {
		idle += v
	}
	return map[string]int{
		"supervisor fds": n, "supervisor rss KiB": c.rssKB, "supervisor threads": c.threads, "host mounts": c.mounts,
		"warm pool idle (metrics)": idle, "warm pool sandboxes": c.warmSandboxes, "warm pool processes": c.warmProcs,
		"warm pool cgroups": c.warmCgroups, "warm pool workspaces": c.warmWorkspaces,
		"helper pool processes": c.helperPoolProcs, "helper pool cgroups": c.helperPoolCgroups,
		"exec processes": len(c.execProcs), "exec cgroups": len(c.execCgroups), "exec workspaces": len(c.execWorkspaces),
	}
}

// censusRows is the order counts are printed in.
var censusRows = []string{"supervisor fds", "supervisor rss KiB", "supervisor threads", "host mounts",
	"warm pool idle (metrics)", "warm pool sandboxes", "warm pool processes", "warm pool cgroups", "warm pool workspaces",
	"helper pool processes", "helper pool cgroups", "exec processes", "exec cgroups", "exec workspaces"}

// warmLedger names the warm pool's sandboxes from the audit log: a warm
// prepare opens one, a warm_exec naming it (taken) or a reap under its id
// (destroyed) closes it. It reads every file of the log, rotated ones
// included, and remembers what it saw: retention deletes old rotated
// files, and one may hold the prepare of a sandbox still idle (the
// javascript pool of a python-only load is built once, at the start). A
// reading of the active file alone misses every idle sandbox built before
// the last rotation. follow keeps it reading while the log turns over.
type warmLedger struct {
	mu     sync.Mutex // idle runs from follow's goroutine and from settle
	path   string
	read   map[string]bool // rotated files read (they never change)
	opened map[string]bool
	closed map[string]bool
}

func newWarmLedger(auditPath string) *warmLedger {
	return &warmLedger{path: auditPath, read: map[string]bool{}, opened: map[string]bool{}, closed: map[string]bool{}}
}

// idle reads the rotated files it has not read yet and the active file,
// and returns the launch ids open now.
func (l *warmLedger) idle() (map[string]bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	dir, base := filepath.Dir(l.path), filepath.Base(l.path)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read the audit log's directory: %w", err)
	}
	var names []string
	for _, e := range ents {
		if rest, ok := strings.CutPrefix(e.Name(), base+"."); ok && !l.read[e.Name()] {
			if k, err := strconv.Atoi(rest); err == nil && k > 0 {
				names = append(names, e.Name())
			}
		}
	}
	for _, name := range append(names, base) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) && name != base {
			continue // deleted by retention since the listing
		}
		if err != nil {
			return nil, fmt.Errorf("read the audit log: %w", err)
		}
		for _, line := range bytes.Split(b, []byte("\n")) {
			l.note(line)
		}
		if name != base {
			l.read[name] = true
		}
	}
	idle := map[string]bool{}
	for id := range l.opened {
		if !l.closed[id] {
			idle[id] = true
		}
	}
	return idle, nil
}

// follow reads the log every interval until the returned stop is called
// so that no rotated file is deleted before it was read.
func (l *warmLedger) follow(t *testing.T, interval time.Duration) (stop func()) {
	done, quit := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-time.After(interval):
				if _, err := l.idle(); err != nil {
					t.Errorf("follow the audit log: %v", err)
					return
				}
			}
		}
	}()
	return func() { close(quit); <-done }
}

func (l *warmLedger) note(line []byte) {
	var r struct {
		ExecID string `json:"exec_id"`
		Step   string `json:"step"`
		Facts  struct {
			Kernel   string `json:"kernel"`
			LaunchID string `json:"launch_id"`
		} `json:"facts"`
	}
	if json.Unmarshal(line, &r) != nil {
		return
	}
	switch {
	case r.Step == "prepare" && r.Facts.Kernel == "warm":
		l.opened[r.ExecID] = true
	case r.Step == "warm_exec" && r.Facts.LaunchID != "":
		l.closed[r.Facts.LaunchID] = true
	case r.Step == "reap":
		l.closed[r.ExecID] = true
	}
}

// takeCensus counts s's resources now; idle names the warm pool's idle
// sandboxes (warmLedger.idle).
func takeCensus(s *supervisor, idle map[string]bool) (census, error) {
	pid := s.cmd.Process.Pid
	c := census{fds: fdKinds(pid), warmIdle: map[string]int{}, perSandbox: len(s.in.cgroupDirs)}
	var err error
	if c.rssKB, err = statusInt(pid, "VmRSS"); err != nil {
		return c, err
	}
	if c.threads, err = statusInt(pid, "Threads"); err != nil {
		return c, err
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	c.mounts = bytes.Count(mounts, []byte("\n"))

	warm := map[string]bool{}
	pools := map[string]bool{}
	for _, p := range poolAndExecProcesses(s.in, pid) {
		switch {
		case strings.HasPrefix(p.group, "pool-"):
			// A pre-started helper is more than one process (its
			// prelude's holder and keeper): count its cgroup once.
			c.helperPoolProcs++
			pools[p.group] = true
		case idle[p.group]:
			c.warmProcs++
			warm[p.group] = true
		default:
			c.execProcs = append(c.execProcs, p.String())
		}
	}
	c.helperPools = len(pools)
	for _, d := range s.in.cgroupDirs {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			switch {
			case !e.IsDir():
			case strings.HasPrefix(e.Name(), "pool-"):
				c.helperPoolCgroups++
			case idle[e.Name()]:
				c.warmCgroups++
				warm[e.Name()] = true
			default:
				c.execCgroups = append(c.execCgroups, filepath.Join(d, e.Name()))
			}
		}
	}
	ents, _ := os.ReadDir(s.in.path("state/workspaces"))
	for _, e := range ents {
		if idle[e.Name()] {
			c.warmWorkspaces++
			warm[e.Name()] = true
		} else {
			c.execWorkspaces = append(c.execWorkspaces, e.Name())
		}
	}
	c.warmSandboxes = len(warm)
	return c, nil
}

// consistent says why c's pools are not at rest (a build or a helper
// move in flight, or an idle sandbox the ledger has not seen), or "".
// At rest, every idle sandbox the metrics count has its workspace and
// its cgroup in each delegated directory (v1: one per controller's
// hierarchy; v2: one), and every pre-started helper its cgroups.
func (c census) consistent() string {
	n := c.counts()
	idle := n["warm pool idle (metrics)"]
	switch {
	case c.warmSandboxes != idle:
		return fmt.Sprintf("%d warm sandboxes found, the metrics say %d idle", c.warmSandboxes, idle)
	case c.warmWorkspaces != idle:
		return fmt.Sprintf("%d warm workspaces for %d idle sandboxes", c.warmWorkspaces, idle)
	case c.warmCgroups != idle*c.perSandbox:
		return fmt.Sprintf("%d warm cgroups for %d idle sandboxes", c.warmCgroups, idle)
	case c.helperPoolCgroups != c.helperPools*c.perSandbox:
		return fmt.Sprintf("%d helper pool cgroups for %d pre-started helpers", c.helperPoolCgroups, c.helperPools)
	}
	return ""
}

// settle takes a census every 250 ms until the pools are consistent and
// every count has stayed the same for 1 s (the pools refilled, the last
// answers' cleanup done, no connection half closed), or until limit. It
// returns the last census and, on timeout, why it never settled.
func settle(s *supervisor, l *warmLedger, limit time.Duration) (census, string) {
	deadline := time.Now().Add(limit)
	var last census
	var prev map[string]int
	steady := 0
	for {
		idle, err := l.idle()
		why := ""
		if err == nil {
			last, err = takeCensus(s, idle)
		}
		if err != nil {
			why = err.Error()
		} else {
			last.warmIdle = warmIdleMetrics(s) // after the fds: its own connection is closed by the next poll
			why = last.consistent()
		}
		cur := last.counts()
		delete(cur, "supervisor rss KiB")
		if why == "" && equalCounts(cur, prev) {
			steady++
		} else {
			steady = 0
		}
		if steady >= 4 {
			return last, ""
		}
		if time.Now().After(deadline) {
			if why == "" {
				why = "the counts kept changing"
			}
			return last, why
		}
		prev = cur
		time.Sleep(250 * time.Millisecond)
	}
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// metricValue returns the value of an unlabelled metric line name, or -1.
func metricValue(s *supervisor, name string) float64 {
	_, body := s.do("GET", "/metrics", nil)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

// sandboxProc is a process of the service user or of the namespace owner
// other than the supervisor, with the name of its cgroup below the
// delegated directory ("" when it is in none).
type sandboxProc struct{ pid, name, state, ppid, group, cmdline string }

func (p sandboxProc) String() string {
	return fmt.Sprintf("%s(%s, state %s, ppid %s, cgroup %q): %s", p.pid, p.name, p.state, p.ppid, p.group, p.cmdline)
}

// poolAndExecProcesses lists them. A zombie adopted by pid 1 is left out: it
// is dead, orphaned by a supervisor an earlier test killed.
func poolAndExecProcesses(in *installation, supervisorPID int) []sandboxProc {
	uids := map[string]bool{strconv.Itoa(in.uid): true, strconv.Itoa(in.ownerUID): true}
	var out []sandboxProc
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil || e.Name() == strconv.Itoa(supervisorPID) {
			continue
		}
		f := procStatus(e.Name())
		if uid := strings.Fields(f["Uid"]); len(uid) < 2 || !uids[uid[1]] ||
			(strings.HasPrefix(f["State"], "Z") && f["PPid"] == "1") {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		out = append(out, sandboxProc{pid: e.Name(), name: f["Name"], state: f["State"], ppid: f["PPid"],
			group: delegatedGroup(e.Name(), in.cgroupParent), cmdline: strings.ReplaceAll(string(cmd), "\x00", " ")})
	}
	inheritGroups(out)
	return out
}

// inheritGroups gives a process outside every delegated cgroup the group of
// its nearest ancestor in one. On cgroup v1 a helper's prelude forks its
// holder, and the holder its keeper, before the helper is moved into its
// cgroup, so they stay where the supervisor is; they belong to the helper's
// launch (a pooled helper, a warm sandbox or an exec) all the same.
func inheritGroups(procs []sandboxProc) {
	byPID := map[string]*sandboxProc{}
	for i := range procs {
		byPID[procs[i].pid] = &procs[i]
	}
	for i := range procs {
		p := &procs[i]
		for hop, ppid := 0, p.ppid; p.group == "" && hop < 4; hop++ {
			parent, ok := byPID[ppid]
			if !ok {
				break
			}
			p.group, ppid = parent.group, parent.ppid
		}
	}
}

// delegatedGroup is the name of pid's cgroup directly below parent, in
// whichever hierarchy has it (v1: each controller's; v2: the one), or "".
func delegatedGroup(pid, parent string) string {
	b, _ := os.ReadFile("/proc/" + pid + "/cgroup")
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if _, rest, ok := strings.Cut(parts[2], "/"+parent+"/"); ok {
			name, _, _ := strings.Cut(rest, "/")
			return name
		}
	}
	return ""
}

var hexID = regexp.MustCompile(`[0-9a-f]{16,}`)

// fdKinds counts pid's open fds by what they point at: socket, pipe, an
// anon inode's kind, or a path with its ids blanked out.
func fdKinds(pid int) map[string]int {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, _ := os.ReadDir(dir)
	out := map[string]int{}
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		switch {
		case strings.HasPrefix(target, "socket:"):
			target = "socket"
		case strings.HasPrefix(target, "pipe:"):
			target = "pipe"
		default:
			target = hexID.ReplaceAllString(target, "*")
		}
		out[target]++
	}
	return out
}

// fdDiff renders the kinds whose count differs between a and b.
func fdDiff(a, b map[string]int) string {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	var diff []string
	for k := range keys {
		if a[k] != b[k] {
			diff = append(diff, fmt.Sprintf("%s %d→%d", k, a[k], b[k]))
		}
	}
	sort.Strings(diff)
	return strings.Join(diff, ", ")
}
