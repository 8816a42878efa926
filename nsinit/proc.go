package nsinit

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// CapSets are one thread's capability sets as /proc reports them (hex).
type CapSets struct {
	Inh, Prm, Eff, Bnd, Amb string
}

// Held reports whether the thread holds any capability (the bounding set is
// a limit, not a holding).
func (c CapSets) Held() bool {
	return !zeroHex(c.Inh) || !zeroHex(c.Prm) || !zeroHex(c.Eff) || !zeroHex(c.Amb)
}

func zeroHex(s string) bool { return strings.Trim(s, "0") == "" }

// ReadCapSets reads the capability sets from a /proc status file.
func ReadCapSets(statusPath string) (CapSets, error) {
	f, err := os.Open(statusPath)
	if err != nil {
		return CapSets{}, fmt.Errorf("open %s: %w", statusPath, err)
	}
	defer f.Close()
	var c CapSets
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "CapInh":
			c.Inh = v
		case "CapPrm":
			c.Prm = v
		case "CapEff":
			c.Eff = v
		case "CapBnd":
			c.Bnd = v
		case "CapAmb":
			c.Amb = v
		}
	}
	if c.Eff == "" {
		return c, fmt.Errorf("%s: no capability lines", statusPath)
	}
	return c, sc.Err()
}

// ThreadCaps reads the capability sets of every thread of this process:
// capabilities are per thread, so checking the leader alone proves nothing.
func ThreadCaps() (map[string]CapSets, error) {
	dirs, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil || len(dirs) == 0 {
		return nil, fmt.Errorf("list threads: %v", err)
	}
	out := map[string]CapSets{}
	for _, p := range dirs {
		c, err := ReadCapSets(p)
		if err != nil {
			return nil, err
		}
		out[filepath.Base(filepath.Dir(p))] = c
	}
	return out, nil
}

// nsInode returns the inode number of a namespace file or fd path.
func nsInode(path string) uint64 {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0
	}
	return st.Ino
}
