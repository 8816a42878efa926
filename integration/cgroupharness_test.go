package integration

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/cgroup"
)

// cgroupV2Mount is where a cgroup v2 (unified) host mounts the hierarchy.
const cgroupV2Mount = "/sys/fs/cgroup"

// unifiedHost reports whether the host runs cgroup v2 with the memory and
// pids controllers (Debian 12, Ubuntu 22.04+, RHEL 9 with systemd); a v1
// or hybrid host (this project's build machines) has them on v1
// hierarchies instead.
func unifiedHost() bool {
	b, err := os.ReadFile(filepath.Join(cgroupV2Mount, "cgroup.controllers"))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	has := func(c string) bool {
		for _, x := range f {
			if x == c {
				return true
			}
		}
		return false
	}
	return has("memory") && has("pids")
}

// delegateCgroups delegates cgroups to the test user as scripts/run.sh
// does for the service user. v1: the directory cgroupParent below this
// test process's cgroup in each hierarchy (the supervisor inherits the
// test's cgroups). v2: a cgroup below the root, chowned the way systemd
// chowns a Delegate=yes unit's (the directory and its cgroup.procs,
// cgroup.subtree_control and cgroup.threads), with the supervisor's leaf
// made ahead: every supervisor starts in that leaf (CLONE_INTO_CGROUP,
// placeSupervisor) and makes the exec cgroups' parent beside it.
func (in *installation) delegateCgroups() error {
	in.cgroupParent = "sandboxd-it-" + randID()
	if unifiedHost() {
		return in.delegateV2()
	}
	own, err := cgroup.OwnV1Dirs(cgroup.Host{})
	if err != nil {
		return fmt.Errorf("cgroup v1 hierarchies (this host has no cgroup v2 with memory and pids either): %w", err)
	}
	in.cgroupMode = cgroup.ModeV1
	for _, d := range own {
		dir := filepath.Join(d, in.cgroupParent)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return err
		}
		in.cgroupDirs = append(in.cgroupDirs, dir)
		if err := os.Chown(dir, in.uid, in.gid); err != nil {
			return err
		}
	}
	return nil
}

func (in *installation) delegateV2() error {
	in.cgroupMode = cgroup.ModeV2
	// The root cgroup may hold processes and enable controllers at once;
	// systemd has enabled these already, a host without it may not have.
	_ = os.WriteFile(filepath.Join(cgroupV2Mount, "cgroup.subtree_control"), []byte("+memory +pids +cpu"), 0)
	root := filepath.Join(cgroupV2Mount, in.cgroupParent+".root")
	in.cgroupRoot = root
	leaf := filepath.Join(root, cgroup.LeafName)
	for _, d := range []string{root, leaf} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
		for _, f := range []string{"", "cgroup.procs", "cgroup.subtree_control", "cgroup.threads"} {
			if err := os.Chown(filepath.Join(d, f), in.uid, in.gid); err != nil {
				return err
			}
		}
	}
	// The supervisor makes this one (cgroup.Setup); it is listed for the
	// tests that look for exec cgroups.
	in.cgroupDirs = []string{filepath.Join(root, in.cgroupParent)}
	return nil
}

// placeSupervisor makes cmd, a supervisor about to start, be born in the
// delegated v2 root's leaf (CLONE_INTO_CGROUP), as systemd starts the
// unit's process in its delegated cgroup. On v1 it does nothing: the
// supervisor inherits the test's cgroups, below which cgroupParent is.
func (in *installation) placeSupervisor(t testing.TB, cmd *exec.Cmd) {
	t.Helper()
	if in.cgroupRoot == "" {
		return
	}
	fd, err := unix.Open(filepath.Join(in.cgroupRoot, cgroup.LeafName), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open the supervisor's cgroup: %v", err)
	}
	t.Cleanup(func() { _ = unix.Close(fd) })
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
}

// removeCgroups removes what delegateCgroups made, once every supervisor
// and exec is gone.
func (in *installation) removeCgroups() {
	for _, d := range in.cgroupDirs {
		_ = syscall.Rmdir(d) // every exec cgroup below it is gone by now
	}
	if in.cgroupRoot != "" {
		for _, d := range []string{filepath.Join(in.cgroupRoot, cgroup.LeafName), in.cgroupRoot} {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
				fmt.Fprintf(os.Stderr, "remove %s: %v\n", d, err)
			}
		}
	}
}
