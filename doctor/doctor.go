// Package doctor checks a host the way an operator would before trusting it
// to run sandboxd: user namespaces and the sysctls that restrict them,
// bubblewrap and its version, the helper's file capabilities and the absence
// of setuid/setgid bits and stray capabilities, the helper's root-owned
// config, the payload profile and its compiled cache, no_new_privs and the
// capability bounding set of the running supervisor, the groups (the
// helper's holds the service user alone, the socket's is another one, the
// supervisor carries no group it does not need), the root-owned state
// directory above the workspace root, seccomp support, the
// cgroup layout and delegation, and the language runtimes. It is the engine
// of `sandboxctl doctor`; RunRemote is that of `sandboxctl doctor --url`,
// which sees only what a supervisor's TCP listener shows (remote.go).
//
// Every check is a pure function of a Host, the view of the machine it reads
// (files, sysctls under /proc/sys, extended attributes, commands it runs, the
// supervisor's socket). Real returns the live view; tests use fakes. A
// failing check says what is wrong and the exact command that fixes it.
//
// What this package must never do: change the host. It reads files, runs
// `--version` of a few programs and asks the supervisor for its health; it
// never writes, never sets a capability, never starts the helper.
package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/nsinit/config"
)

// Status of one check.
type Status string

// Statuses, from best to worst.
const (
	OK   Status = "ok"
	Skip Status = "skip" // could not be checked here; Detail says why
	Warn Status = "warn" // works, but slower, weaker or about to break
	Fail Status = "fail" // sandboxd will refuse launches (503) until fixed
)

// Result is the outcome of one check.
type Result struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// Report is the outcome of a doctor run.
type Report struct {
	OK     bool     `json:"ok"` // no check failed
	Checks []Result `json:"checks"`
}

// Options say where the installation is.
type Options struct {
	HelperPath       string // sandboxd-nsinit
	HelperConfigPath string // the helper's root-owned config
	SocketPath       string // the supervisor's API socket
	GOARCH           string // architecture the compiled profile cache must name
	// VerifyEnvironment re-hashes an environment's tree against its
	// registration (envtree.CheckRegistered); nil skips that check.
	VerifyEnvironment func(config.Environment) error
	// AllowNoCgroups is the supervisor's --allow-no-cgroups
	// (SANDBOXD_ALLOW_NO_CGROUPS): running without enforceable memory,
	// pids and CPU limits is then a warning, not a failure.
	AllowNoCgroups bool
}

// FileInfo is what the checks need of a file: its type and permission
// bits (fs.ModeSetuid, fs.ModeSetgid and fs.ModeSticky included) and owner.
type FileInfo struct {
	Mode fs.FileMode
	UID  uint32
	GID  uint32
	Size int64
}

// Health is the supervisor's GET /v1/health answer (package api's type).
type Health = api.Health

// Supervisor is what the running supervisor told us.
type Supervisor struct {
	// PID is the supervisor's pid, from SO_PEERCRED on its socket.
	PID    int
	Health Health
}

// Host is the view of the machine the checks read. Paths are absolute.
type Host interface {
	ReadFile(path string) ([]byte, error)
	// Stat follows symlinks; Lstat does not.
	Stat(path string) (FileInfo, error)
	Lstat(path string) (FileInfo, error)
	// ReadDir returns the names in a directory.
	ReadDir(path string) ([]string, error)
	// FileCaps returns the raw security.capability extended attribute of
	// path (not following a symlink), or nil when there is none.
	FileCaps(path string) ([]byte, error)
	LookPath(name string) (string, error)
	// Run runs a program and returns its standard output and error.
	Run(ctx context.Context, path string, args ...string) ([]byte, error)
	// GroupName resolves a gid, or returns it as a number.
	GroupName(gid uint32) string
	// LoadHelperConfig is nsinit/config.Load: the helper's config, refused
	// unless root-owned all the way up and valid.
	LoadHelperConfig(path string) (*config.Config, error)
	// CheckRootOwned is nsinit/config.CheckRootOwned.
	CheckRootOwned(path string) error
	// Supervisor asks the supervisor at socket for its health and pid.
	Supervisor(ctx context.Context, socket string) (*Supervisor, error)
	// Cgroups is what the supervisor with this /proc/<pid> directory and
	// uid would find as its delegated cgroup subtree (package cgroup's
	// Detect): "v2", "v1" or "none", and the reason or the directories.
	Cgroups(procDir string, uid int, parent string) (mode, reason string)
}

// Run performs every check and returns the report.
func Run(ctx context.Context, h Host, o Options) Report {
	var rs []Result
	add := func(r ...Result) { rs = append(rs, r...) }

	hc, hcResult := checkHelperConfig(h, o)
	helperCaps := checkHelperCaps(h, o)
	add(checkUserns(h, helperCaps.Status == OK))
	add(checkBwrap(ctx, h, hc))
	add(checkHelperFile(h, o))
	add(helperCaps)
	add(checkHelperDir(h, o))
	add(hcResult)
	add(checkProfile(h, hc, o)...)
	add(checkSeccomp(h))
	add(checkCallerNNP(h))
	sup, supResult := checkSupervisor(ctx, h, o)
	add(supResult)
	add(checkSupervisorPrivileges(h, sup, o))
	add(checkHelperGroup(h, o, sup))
	add(checkSocketGroup(h, o))
	add(checkSupervisorGroups(h, o, sup))
	add(checkStateDir(h, hc, sup))
	add(checkCgroups(h, sup, o.AllowNoCgroups))
	add(checkRuntimes(ctx, h, hc)...)
	add(checkEnvironments(h, hc, o.VerifyEnvironment)...)

	rep := Report{OK: true, Checks: rs}
	for _, r := range rs {
		if r.Status == Fail {
			rep.OK = false
		}
	}
	return rep
}

// WriteText prints the report for a person: one line per check, the fix
// indented under each check that is not ok.
func (r Report) WriteText(w io.Writer) error {
	var b strings.Builder
	counts := map[Status]int{}
	for _, c := range r.Checks {
		counts[c.Status]++
		fmt.Fprintf(&b, "%-4s  %-22s %s\n", label(c.Status), c.Name, c.Detail)
		if c.Fix != "" && c.Status != OK {
			for i, line := range strings.Split(c.Fix, "\n") {
				prefix := "      fix: "
				if i > 0 {
					prefix = "           "
				}
				fmt.Fprintf(&b, "%s%s\n", prefix, line)
			}
		}
	}
	verdict := "the host can run sandboxd"
	if !r.OK {
		verdict = "the host cannot run sandboxd until the failures above are fixed"
	}
	fmt.Fprintf(&b, "\n%d checks: %d ok, %d warnings, %d skipped, %d failed; %s\n",
		len(r.Checks), counts[OK], counts[Warn], counts[Skip], counts[Fail], verdict)
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON prints the report as one indented JSON object.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func label(s Status) string {
	switch s {
	case OK:
		return "ok"
	case Warn:
		return "WARN"
	case Fail:
		return "FAIL"
	default:
		return "skip"
	}
}
