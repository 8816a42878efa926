// Command seccompexec applies a seccomp profile the way a container runtime
// applies a Kubernetes Localhost profile, then runs a command as an
// unprivileged user. It is a test tool: integration tests use it to run the
// unprivileged supervisor under profiles/kubernetes-worker.json.
//
//	seccompexec -profile FILE -uid N -gid N -- CMD [ARGS...]
//
// It must start as root. In order, it:
//
//  1. loads and compiles FILE (package profiles: strict parse, resolved for
//     this architecture and a process with no capabilities);
//  2. installs the filter on every thread WITHOUT no_new_privs, which the
//     kernel allows because root holds CAP_SYS_ADMIN. This is the point:
//     under no_new_privs file capabilities do nothing, so the helper that
//     the supervisor execs (sandboxd-nsinit, file capabilities, no setuid
//     bit) could not work;
//  3. drops to the ids: setgroups([]), setresgid(N), setresuid(N). Leaving
//     uid 0 clears the permitted and effective capability sets; the
//     bounding set stays full, as in a container, so a file-capability
//     binary exec'd later still gains its capabilities;
//  4. checks that no capability is left and no_new_privs is still off, and
//     execs CMD (looked up in PATH) with the unchanged environment.
//
// The filter applies to this tool's own syscalls after step 2, so the
// profile must allow setgroups/setresgid/setresuid/execve (Docker's default
// profile does).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/profiles"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "seccompexec:", err)
		os.Exit(125) // like env(1) and container runtimes: the tool failed, not CMD
	}
}

func run() error {
	profilePath := flag.String("profile", "", "seccomp profile (Docker/OCI JSON) to install")
	uid := flag.Int("uid", -1, "uid to switch to after installing the filter")
	gid := flag.Int("gid", -1, "gid to switch to after installing the filter")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: seccompexec -profile FILE -uid N -gid N -- CMD [ARGS...]")
		flag.PrintDefaults()
	}
	flag.Parse()
	args := flag.Args()
	if *profilePath == "" || *uid < 0 || *gid < 0 || len(args) == 0 {
		flag.Usage()
		return errors.New("missing -profile, -uid, -gid or command")
	}
	if os.Geteuid() != 0 {
		return errors.New("must run as root: only a process with CAP_SYS_ADMIN may install a filter without no_new_privs")
	}
	// Resolve the command before the filter and the uid change, so that
	// the error for a missing command is clear. exec re-checks permissions.
	path, err := exec.LookPath(args[0])
	if err != nil {
		return err
	}

	p, err := profiles.Load(*profilePath)
	if err != nil {
		return err
	}
	// Install sees CAP_SYS_ADMIN and leaves no_new_privs off.
	if err := p.Install(); err != nil {
		return err
	}
	for _, s := range p.Skipped {
		fmt.Fprintf(os.Stderr, "seccompexec: %s: deny rule skipped (unknown to libseccomp): %s\n", p.Name, s)
	}

	// Go applies these to every thread of the process.
	if err := syscall.Setgroups([]int{}); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setresgid(*gid, *gid, *gid); err != nil {
		return fmt.Errorf("setresgid: %w", err)
	}
	if err := syscall.Setresuid(*uid, *uid, *uid); err != nil {
		return fmt.Errorf("setresuid: %w", err)
	}

	if *uid != 0 {
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			return fmt.Errorf("capget: %w", err)
		}
		for _, d := range data {
			if d.Effective != 0 || d.Permitted != 0 || d.Inheritable != 0 {
				return fmt.Errorf("capabilities left after switching to uid %d: %+v", *uid, data)
			}
		}
	}
	if nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); err != nil || nnp != 0 {
		return fmt.Errorf("no_new_privs is %d (%w); file capabilities would not work", nnp, err)
	}
	return syscall.Exec(path, args, os.Environ())
}
