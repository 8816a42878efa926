package main

import (
	"encoding/json"
	"flag"
	"fmt"

	"github.com/sandboxd/sandboxd/nsinit/config"
)

// cmdAdmin holds the operator commands that do not talk to the supervisor.
//
//	admin helper-config  prints the helper's default config for an
//	                     installation (make install writes it, as root, to
//	                     the path compiled into the helper)
func cmdAdmin(args []string, io stdio) int {
	if len(args) == 0 || args[0] != "helper-config" {
		fmt.Fprintln(io.err, "sandboxctl: usage: sandboxctl admin helper-config --workspace-root DIR --shim PATH --profile PATH")
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
