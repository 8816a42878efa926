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

// HelperFingerprint returns what a warm sandbox is checked against before
// use: a fingerprint of what a launch would attest -- the helper binary at
// helperPath, its config at configPath, the payload profile, the shim and
// the environments the config names. A sandbox built under another
// fingerprint is destroyed, never used. The returned func is cheap while
// no file changed (fingerprintCache).
func HelperFingerprint(helperPath, configPath string) func() string {
	c := &fingerprintCache{helperPath: helperPath, configPath: configPath}
	return c.get
}

// fingerprintCache recomputes helperFingerprint only when a file it read
// changed: every take asks (on the exec's critical path), and hashing the
// config and the profile there would cost more than the stat calls that
// tell whether they changed. A replaced file (rename) has a new inode, one
// written in place a new mtime or size.
type fingerprintCache struct {
	helperPath, configPath string

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
	paths := []string{c.helperPath, c.configPath}
	if hc, err := config.Load(c.configPath); err == nil {
		paths = append(paths, hc.PayloadProfile, hc.Shim)
	}
	// Stamp first: a change while hashing makes the next take recompute.
	c.paths, c.stamp = paths, statStamp(paths)
	c.fp = helperFingerprint(c.helperPath, c.configPath)
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

// helperFingerprint identifies what a launch would attest: the helper
// binary (inode, size, mtime), its config's bytes (binds, runtimes,
// environments and their digests) and the payload profile's bytes.
func helperFingerprint(helperPath, configPath string) string {
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
	if hc, err := config.Load(configPath); err == nil {
		content(hc.PayloadProfile)
		stamp(hc.Shim)
		envs := make([]string, 0, len(hc.Environments))
		for _, e := range hc.Environments {
			envs = append(envs, e.Name+"@"+e.Digest)
		}
		sort.Strings(envs)
		fmt.Fprintln(h, envs)
	}
	return hex.EncodeToString(h.Sum(nil))
}
