package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"

	"github.com/sandboxd/sandboxd/cgroup"

	"github.com/sandboxd/sandboxd/nsinit/config"
)

// cmdAdmin holds the operator commands that do not talk to the supervisor.
//
//	admin helper-config  prints the helper's default config for an
//	                     installation (make install writes it, as root, to
//	                     the path compiled into the helper)
func cmdAdmin(args []string, io stdio) int {
	if len(args) > 0 && args[0] == "delegate-cgroups" {
		return cmdDelegateCgroups(args[1:], io)
	}
	if len(args) > 0 && args[0] == "env-register" {
		return cmdEnvRegister(args[1:], io)
	}
	if len(args) == 0 || args[0] != "helper-config" {
		fmt.Fprintln(io.err, "sandboxctl: usage: sandboxctl admin helper-config --workspace-root DIR --shim PATH --profile PATH")
		fmt.Fprintln(io.err, "       sandboxctl admin delegate-cgroups --user NAME [--parent sandboxd]")
		return exitUsage
	}
	fs := flag.NewFlagSet("admin helper-config", flag.ContinueOnError)
	fs.SetOutput(io.err)
	root := fs.String("workspace-root", "/var/lib/sandboxd/workspaces", "directory of per-exec workspaces (the supervisor's <state-dir>/workspaces)")
	shim := fs.String("shim", "/usr/local/libexec/sandboxd/sandboxd-exec", "path of sandboxd-exec")
	profile := fs.String("profile", "/etc/sandboxd/profiles/payload.json", "payload seccomp profile")
	if err := fs.Parse(args[1:]); err != nil {
		return exitUsage
	}
	c := config.Default(*root, *shim, *profile)
	if err := c.Validate(); err != nil {
		fmt.Fprintln(io.err, "sandboxctl:", err)
		return exitUsage
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		fmt.Fprintln(io.err, "sandboxctl:", err)
		return exitUsage
	}
	fmt.Fprintln(io.out, string(b))
	return exitOK
}

// cmdDelegateCgroups, run as root by make run, creates the directory that
// the supervisor puts per-exec cgroups in, below this process's own cgroup
// in each cgroup v1 hierarchy (memory, pids, cpu), owned by the service
// user. The supervisor, started from the same shell, is in the same cgroups.
// On a host without those hierarchies it says so and changes nothing: the
// supervisor then reports cgroups "none" (or, on cgroup v2, uses a subtree
// systemd delegated with Delegate=yes).
func cmdDelegateCgroups(args []string, io stdio) int {
	fs := flag.NewFlagSet("admin delegate-cgroups", flag.ContinueOnError)
	fs.SetOutput(io.err)
	name := fs.String("user", "sandboxd", "service user that gets the delegated directories")
	parent := fs.String("parent", cgroup.DefaultParent, "directory name (the supervisor's --cgroup-parent)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	u, err := user.Lookup(*name)
	if err != nil {
		fmt.Fprintln(io.err, "sandboxctl:", err)
		return exitUsage
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	own, err := cgroup.OwnV1Dirs(cgroup.Host{})
	if err != nil {
		fmt.Fprintf(io.out, "cgroups: not delegating (%v); the supervisor will report cgroups none unless systemd delegates a v2 subtree\n", err)
		return exitOK
	}
	for _, d := range own {
		dir := filepath.Join(d, *parent)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			fmt.Fprintln(io.err, "sandboxctl:", err)
			return exitUsage
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			fmt.Fprintln(io.err, "sandboxctl:", err)
			return exitUsage
		}
		fmt.Fprintf(io.out, "cgroups: %s delegated to %s\n", dir, *name)
	}
	return exitOK
}
