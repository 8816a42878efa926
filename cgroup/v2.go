package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LeafName is the cgroup a supervisor on cgroup v2 moves itself into,
// below the cgroup it was started in (its delegated root). cgroup v2 lets
// a cgroup either hold processes or enable controllers for its children,
// never both (the "no internal processes" rule), so the delegated root
// must be emptied before its cgroup.subtree_control can enable memory,
// pids and cpu for the exec cgroups.
const LeafName = "supervisor"

// Setup readies the calling process's delegated cgroup v2 subtree and then
// returns what Detect finds. The delegated root is the process's own v2
// cgroup, or its parent when the process already sits in LeafName (a
// restart, or a launcher that placed it there). When that root is owned by
// h.UID (systemd Delegate=yes, make run's transient scope or the cgroup it
// made, a container's cgroup namespace handed to the service user), Setup
//
//   - creates the root's LeafName and moves every process of the root
//     there (the supervisor itself; writing a pid to cgroup.procs moves all
//     of its threads),
//   - enables memory, pids and cpu in the root's cgroup.subtree_control,
//   - creates the parent directory for exec cgroups and enables the same
//     controllers there.
//
// On v1 hierarchies it only creates the parent directory below the
// process's own cgroup where that cgroup is owned by h.UID (systemd's
// Delegate=yes on a hybrid host chowns it); otherwise the operator made it
// (sandboxctl admin delegate-cgroups) or nothing is delegated, and Detect
// says why. Where the v2 root is delegated but a step fails, the reason
// Detect gives is prefixed with that step.
func Setup(h Host, parent string) *Manager {
	h = h.withDefaults()
	prepareV1(h, parent)
	dir, err := prepareV2(h, parent)
	if err == nil {
		return &Manager{mode: ModeV2, dirs: map[string]string{"": dir},
			reason: fmt.Sprintf("cgroup v2 subtree %s (delegated root %s, the supervisor in its %s leaf)", dir, filepath.Dir(dir), LeafName)}
	}
	m := Detect(h, parent)
	if !errors.Is(err, errNotDelegated) && m.mode == ModeNone {
		m.reason = "v2 set-up: " + err.Error() + "; " + m.reason
	}
	return m
}

// errNotDelegated means Setup has nothing to do: no v2 hierarchy, or a v2
// root that is not this uid's.
var errNotDelegated = errors.New("no delegated cgroup v2 root")

func (h Host) withDefaults() Host {
	if h.ProcSelf == "" {
		h.ProcSelf = "/proc/self"
	}
	if h.PID == 0 {
		h.PID = os.Getpid()
	}
	return h
}

// v2Root returns the delegated root of a process whose v2 cgroup is own,
// on the cgroup2 mount mnt: own itself, or its parent when own is a
// LeafName below it.
func v2Root(mnt, own string) string {
	if filepath.Base(own) == LeafName {
		own = filepath.Dir(own)
	}
	return filepath.Join(mnt, own)
}

// prepareV2 is Setup's work; it returns the exec cgroups' parent, or
// errNotDelegated when there is nothing to set up.
func prepareV2(h Host, parent string) (string, error) {
	if err := validName(parent); err != nil {
		return "", err
	}
	own, err := parseProcCgroup(filepath.Join(h.ProcSelf, "cgroup"))
	if err != nil {
		return "", errNotDelegated
	}
	mounts, err := parseCgroupMounts(filepath.Join(h.ProcSelf, "mountinfo"))
	if err != nil {
		return "", errNotDelegated
	}
	mnt, ok := mounts[""]
	ownPath, inV2 := own[""]
	if !ok || !inV2 {
		return "", errNotDelegated
	}
	root := v2Root(mnt, ownPath)
	if usable(root, h.UID) != nil {
		return "", errNotDelegated
	}
	if missing := missingFrom(filepath.Join(root, "cgroup.controllers")); len(missing) > 0 {
		return "", fmt.Errorf("the delegated cgroup %s does not offer %s (its cgroup.controllers): the cgroup above it did not delegate them", root, strings.Join(missing, ", "))
	}
	if filepath.Base(ownPath) != LeafName {
		if err := moveToLeaf(root, h.PID); err != nil {
			return "", err
		}
	}
	dir := filepath.Join(root, parent)
	return dir, enableBelow(root, dir)
}

// prepareV1 creates parent below the process's own cgroup in each v1
// hierarchy whose cgroup is owned by h.UID. Errors are Detect's to report.
func prepareV1(h Host, parent string) {
	if validName(parent) != nil {
		return
	}
	own, err := parseProcCgroup(filepath.Join(h.ProcSelf, "cgroup"))
	if err != nil {
		return
	}
	mounts, err := parseCgroupMounts(filepath.Join(h.ProcSelf, "mountinfo"))
	if err != nil {
		return
	}
	for _, c := range append(append([]string{}, Controllers...), "cpuacct") {
		mnt, ok := mounts[c]
		if !ok {
			continue
		}
		if dir := filepath.Join(mnt, own[c]); usable(dir, h.UID) == nil {
			_ = os.Mkdir(filepath.Join(dir, parent), 0o755)
		}
	}
}

// moveToLeaf creates root/LeafName and moves every process of root into
// it, h.PID first; a process that exits meanwhile is skipped.
func moveToLeaf(root string, self int) error {
	leaf := filepath.Join(root, LeafName)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create the supervisor's leaf cgroup %s: %w", leaf, err)
	}
	if err := writeFile(filepath.Join(leaf, "cgroup.procs"), strconv.Itoa(self)); err != nil {
		return fmt.Errorf("move the supervisor (pid %d) into %s: %w", self, leaf, err)
	}
	// Anything else in the root (a launcher that stayed, under a scope)
	// would keep the controllers from being enabled: it goes along.
	for _, pid := range readPids(filepath.Join(root, "cgroup.procs")) {
		if pid == self {
			continue
		}
		if err := writeFile(filepath.Join(leaf, "cgroup.procs"), strconv.Itoa(pid)); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("move pid %d of the delegated root into %s: %w", pid, leaf, err)
		}
	}
	return nil
}

// enableBelow enables the controllers in root's cgroup.subtree_control,
// creates dir (below root) and enables them there too, so that every exec
// cgroup made in dir has memory.max, pids.max and cpu.max.
func enableBelow(root, dir string) error {
	var on []string
	for _, c := range Controllers {
		on = append(on, "+"+c)
	}
	enable := strings.Join(on, " ")
	if err := writeFile(filepath.Join(root, "cgroup.subtree_control"), enable); err != nil {
		return fmt.Errorf("enable %s in %s/cgroup.subtree_control (a process left in it, or controllers not delegated): %w", enable, root, err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create the exec cgroups' parent %s: %w", dir, err)
	}
	if err := writeFile(filepath.Join(dir, "cgroup.subtree_control"), enable); err != nil {
		return fmt.Errorf("enable %s in %s/cgroup.subtree_control: %w", enable, dir, err)
	}
	return nil
}

// readPids reads a cgroup.procs file; a missing one reads as empty.
func readPids(path string) []int {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// missingFrom lists the Controllers that a space-separated controller
// list (cgroup.controllers or cgroup.subtree_control) does not name; all
// of them when the file cannot be read.
func missingFrom(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return Controllers
	}
	have := map[string]bool{}
	for _, f := range strings.Fields(string(b)) {
		have[f] = true
	}
	var missing []string
	for _, c := range Controllers {
		if !have[c] {
			missing = append(missing, c)
		}
	}
	return missing
}
