package launch

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/sandboxd/sandboxd/nsinit/config"
)

// DefaultOwnerFile is the namespace-owner file a helper built with the
// Makefile's default NSINIT_OWNER reads.
const DefaultOwnerFile = "/etc/sandboxd/nsinit.owner"

// HelperFingerprint returns what a warm sandbox is checked against before
// use: a fingerprint of what a launch would attest -- the helper binary at
// helperPath, its config at configPath, the namespace-owner file at
// ownerPath (its path is compiled into the helper: DefaultOwnerFile unless
// the build chose another), the payload profile, bubblewrap, the shim, the
// relay, the runtimes' interpreters and the environments the config
// names. A sandbox built under another
// fingerprint is destroyed, never used. The returned func is cheap while
// no file changed (fingerprintCache).
func HelperFingerprint(helperPath, configPath, ownerPath string) func() string {
	c := &fingerprintCache{helperPath: helperPath, configPath: configPath, ownerPath: ownerPath}
	return c.get
}

// fingerprintCache recomputes helperFingerprint only when a file it read
// changed: every take asks (on the exec's critical path), and hashing the
// config and the profile there would cost more than the stat calls that
// tell whether they changed. A replaced file (rename) has a new inode, one
// written in place a new mtime or size.
type fingerprintCache struct {
	helperPath, configPath, ownerPath string
	load                              func(path string) (*config.Config, error) // nil: config.Load

	mu    sync.Mutex
	stamp string // the stat of every file the fingerprint read
	paths []string
	fp    string
}

func (c *fingerprintCache) get() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fp != "" && statStamp(c.paths) == c.stamp {
		return c.fp
	}
	load := c.load
	if load == nil {
		load = config.Load
	}
	hc, err := load(c.configPath)
	if err != nil {
		hc = nil
	}
	paths := append([]string{c.helperPath, c.configPath, c.ownerPath, profilePath(hc)}, binaries(hc)...)
	// Stamp first: a change while hashing makes the next take recompute.
	c.paths, c.stamp = paths, statStamp(paths)
	c.fp = helperFingerprint(c.helperPath, c.configPath, c.ownerPath, hc)
	return c.fp
}

// statStamp is the inode, size and mtime of each path (or its error).
func statStamp(paths []string) string {
	var b strings.Builder
	for _, p := range paths {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			fmt.Fprintf(&b, "%s: %v\n", p, err)
			continue
		}
		fmt.Fprintf(&b, "%s: %d %d %d.%d\n", p, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec)
	}
	return b.String()
}

// binaries are the executables a launch under hc runs, each identified by
// its stat: bubblewrap, the shim, the egress relay and every runtime's
// interpreter (argv[0], a path the helper binds from the host at the same
// place). A security update of any of them must not leave sandboxes built
// with the old one in the pool.
func binaries(hc *config.Config) []string {
	if hc == nil {
		return nil
	}
	out := []string{hc.Bwrap, hc.Shim}
	if hc.Relay != "" {
		out = append(out, hc.Relay)
	}
	names := make([]string, 0, len(hc.Runtimes))
	for name := range hc.Runtimes {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if argv := hc.Runtimes[name].Argv; len(argv) > 0 {
			out = append(out, argv[0])
		}
	}
	return out
}

// profilePath is the payload profile's path ("" without a config).
func profilePath(hc *config.Config) string {
	if hc == nil {
		return ""
	}
	return hc.PayloadProfile
}

// helperFingerprint identifies what a launch would attest: the helper
// binary (inode, size, mtime), its config's bytes (binds, runtimes,
// environments and their digests), the namespace-owner file's bytes, the
// binaries a launch runs (binaries) and the payload profile's bytes.
func helperFingerprint(helperPath, configPath, ownerPath string, hc *config.Config) string {
	h := sha256.New()
	stamp := func(path string) {
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			fmt.Fprintf(h, "%s: %v\n", path, err)
			return
		}
		fmt.Fprintf(h, "%s: %d %d %d.%d\n", path, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec)
	}
	content := func(path string) {
		b, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintf(h, "%s: %v\n", path, err)
			return
		}
		fmt.Fprintf(h, "%s: %x\n", path, sha256.Sum256(b))
	}
	stamp(helperPath)
	content(configPath)
	content(ownerPath)
	for _, p := range binaries(hc) {
		stamp(p)
	}
	if hc != nil {
		content(hc.PayloadProfile)
		envs := make([]string, 0, len(hc.Environments))
		for _, e := range hc.Environments {
			envs = append(envs, e.Name+"@"+e.EnvironmentDigest())
		}
		sort.Strings(envs)
		fmt.Fprintln(h, envs)
	}
	return hex.EncodeToString(h.Sum(nil))
}
