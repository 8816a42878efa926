// Package config is the helper's own, root-owned configuration: every
// trust-defining setting of a launch (bwrap path, binds, runtimes, the
// payload profile, the workspace root). It is pure Go so that the supervisor
// and the CLI can read and check it too; only the helper trusts it.
//
// It must never accept a file that anyone but root could have written.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// DefaultPath is where the helper reads its own config. It is set at
// build time (-ldflags -X) and never taken from argv or the environment: the
// supervisor must not be able to choose the helper's trust-defining settings.
var DefaultPath = "/etc/sandboxd/nsinit.json"

// MaxConfigSize bounds the helper's config file.
const MaxConfigSize = 1 << 20

// Config holds every trust-defining setting of a launch. It is read from a
// root-owned file that only root can change.
type Config struct {
	// Bwrap is the absolute path of bubblewrap.
	Bwrap string `json:"bwrap"`
	// Shim is the absolute path of sandboxd-exec, bound read-only into the sandbox.
	Shim string `json:"shim"`
	// WorkspaceRoot holds one directory per workspace, owned by the
	// supervisor's uid; a spec names one of them.
	WorkspaceRoot string `json:"workspace_root"`
	// PayloadProfile is the seccomp profile (Docker/OCI JSON) of the payload.
	PayloadProfile string `json:"payload_profile"`
	// TmpSizeMaxBytes caps the sandbox's /tmp tmpfs.
	TmpSizeMaxBytes int64 `json:"tmp_size_max_bytes"`
	// BaseEnv is the fixed environment of bwrap and the base of the payload's.
	BaseEnv []string `json:"base_env"`
	// ROBinds are host paths bound read-only at the same path in the sandbox.
	ROBinds []string `json:"ro_binds"`
	// Symlinks are created in the sandbox root (e.g. /bin -> usr/bin).
	Symlinks []Symlink `json:"symlinks"`
	// Devices are host device nodes bound into the sandbox's /dev.
	Devices []string `json:"devices"`
	// Runtimes maps a spec's runtime name to its command.
	Runtimes map[string]Runtime `json:"runtimes"`
	// RlimitMax caps each rlimit a spec may ask for; RLIMIT_CORE is always 0.
	RlimitMax map[string]uint64 `json:"rlimit_max"`
	// EgressDir is the one directory below which a spec's egress token may
	// name a per-exec socket directory (owned by the supervisor's uid; its
	// parent root-owned, like the workspace root's). Empty: the helper
	// refuses every egress launch.
	EgressDir string `json:"egress_dir,omitempty"`
	// Relay is the absolute path of sandboxd-relay, bound read-only into an
	// egress sandbox; the shim starts it before the payload.
	Relay string `json:"relay,omitempty"`
	// Environments are the named runtime environments (environments.go).
	Environments []Environment `json:"environments,omitempty"`
}

// Symlink is one symlink in the sandbox root.
type Symlink struct {
	Target string `json:"target"`
	Path   string `json:"path"`
}

// Runtime is how one language is run. Argv[0] is an absolute path inside the
// sandbox; the code is bound read-only at SandboxDir/CodeFile.
type Runtime struct {
	Argv     []string `json:"argv"`
	CodeFile string   `json:"code_file"`
}

// SandboxDir is where the helper's per-launch files appear inside the sandbox.
const SandboxDir = "/run/sandboxd"

// Fixed paths of an egress sandbox: the relay binary and the read-only bind
// of the exec's socket directory, whose socket EgressSocket names. Fixed,
// so the spec never carries a host path.
const (
	SandboxRelay    = SandboxDir + "/relay"
	SandboxEgress   = SandboxDir + "/egress"
	EgressSocket    = "proxy.sock"
	EgressRelayPort = 3128
)

// pythonBootstrap runs the code file as __main__ with the working directory
// (/workspace) first on sys.path, as `python3 -c` would, so that a session's
// own modules import. The code itself never travels on argv: argv is visible
// to every host user through /proc, and limited to 128 KiB an argument.
const pythonBootstrap = "import sys;sys.path[0]='';__file__=sys.argv[0]='" + SandboxDir + "/main.py';" +
	"exec(compile(open(__file__,'rb').read(),__file__,'exec'))"

// shellPath is bash where it is installed (at install time), else sh.
func shellPath() string {
	if fi, err := os.Stat("/usr/bin/bash"); err == nil && fi.Mode().IsRegular() {
		return "/usr/bin/bash"
	}
	return "/usr/bin/sh"
}

// Default is the config `make install` writes, with the workspace root
// the supervisor's state directory decides.
func Default(workspaceRoot, shim, profile string) Config {
	return Config{
		Bwrap:           "/usr/bin/bwrap",
		Shim:            shim,
		WorkspaceRoot:   workspaceRoot,
		PayloadProfile:  profile,
		TmpSizeMaxBytes: 1 << 30,
		BaseEnv:         []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/workspace", "LANG=C.UTF-8", "TMPDIR=/tmp"},
		// /etc/matplotlibrc: Debian's matplotlib reads its rc file there;
		// /etc/fonts: fontconfig's configuration, for figures' text
		// (the kernels' figures); binds are --ro-bind-try, so a host
		// without it loses nothing.
		ROBinds: []string{"/usr", "/etc/alternatives", "/etc/ssl", "/etc/localtime", "/etc/matplotlibrc", "/etc/fonts"},
		Symlinks: []Symlink{
			{Target: "usr/bin", Path: "/bin"}, {Target: "usr/sbin", Path: "/sbin"},
			{Target: "usr/lib", Path: "/lib"}, {Target: "usr/lib64", Path: "/lib64"},
		},
		Devices: []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"},
		Runtimes: map[string]Runtime{
			"python":     {Argv: []string{"/usr/bin/python3", "-c", pythonBootstrap}, CodeFile: "main.py"},
			"javascript": {Argv: []string{"/usr/bin/node", SandboxDir + "/main.js"}, CodeFile: "main.js"},
			// The code file is the script, as `sh -c` would run the
			// string, without putting the code on argv (see above).
			"shell": {Argv: []string{shellPath(), SandboxDir + "/main.sh"}, CodeFile: "main.sh"},
		},
		RlimitMax: map[string]uint64{
			"RLIMIT_NOFILE": 4096, "RLIMIT_FSIZE": 4 << 30, "RLIMIT_STACK": 64 << 20,
			"RLIMIT_AS": 1 << 40, "RLIMIT_MEMLOCK": 64 << 10,
		},
		// Next to the workspaces, in the state directory; installed next to the shim.
		EgressDir: filepath.Join(filepath.Dir(workspaceRoot), "egress"),
		Relay:     filepath.Join(filepath.Dir(shim), "sandboxd-relay"),
	}
}

// Load reads the helper's config from path after checking that only
// root could have written it.
func Load(path string) (*Config, error) {
	if err := CheckRootOwned(path); err != nil {
		return nil, fmt.Errorf("helper config %q: %w", path, err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read helper config: %w", err)
	}
	if len(raw) > MaxConfigSize {
		return nil, fmt.Errorf("helper config %q larger than %d bytes", path, MaxConfigSize)
	}
	return Parse(raw)
}

// Parse decodes and validates a config strictly.
func Parse(raw []byte) (*Config, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("decode helper config: %w", err)
	}
	// dec.More is false before a stray ']' or '}': ask for EOF instead.
	if err := dec.Decode(&struct{}{}); err != io.EOF {
		return nil, errors.New("decode helper config: trailing data after the config")
	}
	return &c, c.Validate()
}

// Validate checks the config's shape.
func (c *Config) Validate() error {
	for name, p := range map[string]string{"bwrap": c.Bwrap, "shim": c.Shim, "workspace_root": c.WorkspaceRoot, "payload_profile": c.PayloadProfile} {
		if !filepath.IsAbs(p) || filepath.Clean(p) != p {
			return fmt.Errorf("helper config: %s %q must be a clean absolute path", name, p)
		}
	}
	if c.TmpSizeMaxBytes <= 0 {
		return errors.New("helper config: tmp_size_max_bytes must be positive")
	}
	for _, kv := range c.BaseEnv {
		if name, _, ok := strings.Cut(kv, "="); !ok || name == "" {
			return fmt.Errorf("helper config: base_env entry %q is not NAME=value", kv)
		}
	}
	for _, p := range append(append([]string{}, c.ROBinds...), c.Devices...) {
		if !filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/" {
			return fmt.Errorf("helper config: bind %q must be a clean absolute path other than /", p)
		}
	}
	for _, s := range c.Symlinks {
		if !filepath.IsAbs(s.Path) || s.Target == "" {
			return fmt.Errorf("helper config: symlink %+v needs an absolute path and a target", s)
		}
	}
	if (c.EgressDir == "") != (c.Relay == "") {
		return errors.New("helper config: egress_dir and relay are set together or not at all")
	}
	for name, p := range map[string]string{"egress_dir": c.EgressDir, "relay": c.Relay} {
		if p != "" && (!filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/") {
			return fmt.Errorf("helper config: %s %q must be a clean absolute path other than /", name, p)
		}
	}
	if len(c.Runtimes) == 0 {
		return errors.New("helper config: no runtimes")
	}
	for name, rt := range c.Runtimes {
		if len(rt.Argv) == 0 || !filepath.IsAbs(rt.Argv[0]) {
			return fmt.Errorf("helper config: runtime %q needs an absolute argv[0]", name)
		}
		if rt.CodeFile == "" || strings.ContainsAny(rt.CodeFile, "/\x00") || rt.CodeFile == "." || rt.CodeFile == ".." || rt.CodeFile == "env" || rt.CodeFile == "exec" ||
			rt.CodeFile == "relay" || rt.CodeFile == "egress" {
			return fmt.Errorf("helper config: runtime %q code_file %q must be a plain file name", name, rt.CodeFile)
		}
	}
	return c.validateEnvironments()
}

// CheckRootOwned verifies that path and every directory above it are owned
// by root and writable by nobody else (a sticky directory such as /tmp is
// accepted: others cannot rename a root-owned entry in it). A file the
// supervisor's uid could write would let the supervisor choose what the
// helper trusts.
func CheckRootOwned(path string) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("%q is not absolute", path)
	}
	p := filepath.Clean(path)
	for {
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return fmt.Errorf("stat %q: %w", p, err)
		}
		if st.Mode&syscall.S_IFMT == syscall.S_IFLNK {
			return fmt.Errorf("%q is a symlink", p)
		}
		if st.Uid != 0 {
			return fmt.Errorf("%q is owned by uid %d, not root", p, st.Uid)
		}
		isDir := st.Mode&syscall.S_IFMT == syscall.S_IFDIR
		sticky := st.Mode&syscall.S_ISVTX != 0
		if st.Mode&0o022 != 0 && !(isDir && sticky && p != filepath.Clean(path)) {
			return fmt.Errorf("%q is writable by group or others (mode %o)", p, st.Mode&0o7777)
		}
		if p == "/" {
			return nil
		}
		p = filepath.Dir(p)
	}
}
