package nsinit

import (
	"github.com/sandboxd/sandboxd/nsinit/config"
	"path"
	"sort"
	"strconv"
	"strings"
)

// PayloadID is the payload's uid and gid inside the sandbox. Keep in step
// with SBX_PAYLOAD_ID in prelude/prelude.h.
const PayloadID = 1000

// BwrapFDs are the descriptors the helper hands to bubblewrap, by number.
type BwrapFDs struct {
	Userns    int // the user namespace the prelude made (--userns)
	Seccomp   int // compiled payload filter (--seccomp)
	Status    int // bwrap's --json-status-fd, read by the supervisor
	Workspace int // O_PATH fd of the workspace directory (--bind-fd)
	Env       int // memfd: NUL-separated payload environment
	Code      int // memfd: the program text; -1 for a probe launch
	// Egress is the O_PATH fd of the exec's egress socket directory; 0
	// (never a directory: fd 0 is stdin) for network "none".
	Egress int
}

// BwrapArgs builds bubblewrap's argv from the validated config and inputs.
// The supervisor never supplies a bwrap option: every element here is either
// a constant, a config value, an fd number or a number the helper clamped.
// Options end with "--" so that nothing after it can be read as an option
// (Flatpak CVE-2024-32462).
//
// extra are an environment's read-only binds (environments.go), placed
// after the base binds so they can only add below /opt/sandboxd/env.
func BwrapArgs(cfg *config.Config, rt config.Runtime, fds BwrapFDs, tmpSize int64, extra ...string) []string {
	fd := strconv.Itoa
	a := []string{cfg.Bwrap,
		// Namespaces: the user one is the prelude's; bwrap makes the rest
		// inside it. The network one is the prelude's too (inherited).
		"--userns", fd(fds.Userns),
		"--uid", fd(PayloadID), "--gid", fd(PayloadID),
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--hostname", "sandbox",
		// Lifetime: the payload dies with bwrap, bwrap's reaper is pid 1 of
		// the sandbox, so killing bwrap tears down the pid namespace whole.
		"--die-with-parent", "--new-session",
		"--cap-drop", "ALL",
		"--clearenv",
	}
	for _, p := range cfg.ROBinds {
		a = append(a, "--ro-bind-try", p, p)
	}
	a = append(a, extra...)
	for _, s := range cfg.Symlinks {
		a = append(a, "--symlink", s.Target, s.Path)
	}
	a = append(a, "--proc", "/proc", "--dir", "/dev")
	for _, d := range cfg.Devices {
		a = append(a, "--dev-bind-try", d, d)
	}
	a = append(a,
		"--size", strconv.FormatInt(tmpSize, 10), "--tmpfs", "/tmp",
		"--size", strconv.FormatInt(64<<20, 10), "--tmpfs", "/dev/shm",
		"--bind-fd", fd(fds.Workspace), "/workspace",
		"--ro-bind", cfg.Shim, config.SandboxDir+"/exec",
		"--ro-bind-data", fd(fds.Env), config.SandboxDir+"/env",
	)
	if fds.Code >= 0 {
		a = append(a, "--ro-bind-data", fd(fds.Code), path.Join(config.SandboxDir, rt.CodeFile))
	}
	a = append(a, egressArgs(cfg, fds)...)
	a = append(a,
		// The root tmpfs bwrap builds is writable by the payload's uid
		// until remounted: without this, / is an unbounded tmpfs.
		"--remount-ro", "/",
		"--chdir", "/workspace",
		"--seccomp", fd(fds.Seccomp),
		"--json-status-fd", fd(fds.Status),
		"--",
	)
	a = append(a, shimArgs(fds)...)
	return append(a, rt.Argv...)
}

// ProbeRuntime is what a health probe runs: the whole launch path, no code.
var ProbeRuntime = config.Runtime{Argv: []string{"/usr/bin/true"}, CodeFile: "probe"}

// PayloadEnv merges the fixed base with the request's env (request wins),
// sorted by name so the result is deterministic and auditable.
func PayloadEnv(base, request []string) []string {
	m := map[string]string{}
	for _, list := range [][]string{base, request} {
		for _, kv := range list {
			name, _, _ := strings.Cut(kv, "=")
			m[name] = kv
		}
	}
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]string, 0, len(m))
	for _, name := range names {
		out = append(out, m[name])
	}
	return out
}

// EnvNames returns the names of NAME=value entries, for audit records that
// must not carry values.
func EnvNames(env []string) []string {
	names := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		names = append(names, name)
	}
	return names
}
