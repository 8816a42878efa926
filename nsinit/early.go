package nsinit

import (
	"bytes"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/nsinit/config"
)

// The helper's request-independent work, done before the spec is read: a
// pre-started helper (the supervisor's helper pool) does it while it waits,
// so that a launch does not wait for it. Nothing here is trusted by the
// launch on its own:
//
//   - The capability read-back of every thread is a fact about this
//     process, not about a request. After the prelude's drop no thread can
//     hold a capability again: capabilities come back only through an
//     execve (the helper execs nothing; bwrap is exec'd in a child) or a
//     change of uids to or from 0 (neither the caller nor the namespace
//     owner is root, which the prelude checked), and a new thread copies
//     the creator's empty sets. So reading them before the spec proves
//     what the drop step reports; the drop step still reads back the
//     thread that forks bwrap.
//   - The payload filter depends on the config only (its payload_profile),
//     never on the spec. It is prepared from a preview of the config, but
//     the config is still loaded, and checked, when the launch happens:
//     the seccomp step uses the prepared program only when the profile
//     path of the launch's config is the same and the profile and its
//     compiled cache, read again then, with the same root-ownership checks,
//     hold exactly the bytes the program was prepared from. Anything else
//     and the step prepares the filter from what it reads then.

// early is what prepareEarly did before the spec.
type early struct {
	threads map[string]CapSets // every thread's sets (ThreadCaps)
	leader  CapSets            // the leader's, bounding and ambient included
	capsErr error              // the read-back failed: the drop step fails
	// filter is nil when there is no preview config or no filter from it:
	// the seccomp step then prepares one and reports its own error.
	filter *preparedFilter
}

// preparedFilter is the payload filter prepared from a preview of the config.
type preparedFilter struct {
	path     string // payload_profile of the preview
	profile  []byte // the profile's bytes it was prepared from
	cache    []byte // the cache file's bytes, nil when it was not used
	bpf      []byte
	sha      string // the profile's sha256
	source   string
	skipped  []string
	memfd    int // sealed, holding bpf
	released bool
}

// prepareEarly does the request-independent work (see above).
func prepareEarly(configPath string) *early {
	e := &early{}
	e.threads, e.capsErr = ThreadCaps()
	if e.capsErr == nil {
		e.leader, e.capsErr = ReadCapSets("/proc/self/status")
	}
	if cfg, err := config.Load(configPath); err == nil {
		e.filter, _ = prepareFilter(cfg.PayloadProfile)
	}
	return e
}

// prepareFilter prepares the filter of the profile at path in a sealed memfd.
func prepareFilter(path string) (*preparedFilter, error) {
	if err := config.CheckRootOwned(path); err != nil {
		return nil, fmt.Errorf("payload profile: %w", err)
	}
	profile, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read payload profile: %w", err)
	}
	cache, why := readBPFCacheFile(BPFCachePath(path))
	bpf, sha, source, p, err := filterFrom(path, profile, cache, why)
	if err != nil {
		return nil, err
	}
	fd, err := sealedMemfd("sandboxd-seccomp", bpf)
	if err != nil {
		return nil, err
	}
	pf := &preparedFilter{path: path, profile: profile, bpf: bpf, sha: sha, source: source, memfd: fd}
	if p != nil {
		pf.skipped = p.Skipped
	} else {
		pf.cache = cache // the program came from it
	}
	return pf, nil
}

// matches reports whether the launch's profile at path is the one this
// filter was prepared from: the same path, the same profile bytes and,
// when the program came from the cache, the same cache bytes (both read
// again now, after the launch's own root-ownership check of the profile).
func (pf *preparedFilter) matches(path string) bool {
	if pf == nil || pf.path != path {
		return false
	}
	profile, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(profile, pf.profile) {
		return false
	}
	cache, _ := readBPFCacheFile(BPFCachePath(path))
	if pf.cache == nil {
		// Compiled from the profile: a cache that appeared since could
		// only give the same program (it is checked against the profile's
		// sha256), but take it the way a launch would.
		return cache == nil || !bytes.HasPrefix(cache, []byte(bpfCacheHeader(pf.sha)))
	}
	return bytes.Equal(cache, pf.cache)
}

// take hands the memfd to the launch (once); release closes it unused.
func (pf *preparedFilter) take() int {
	pf.released = true
	return pf.memfd
}

func (pf *preparedFilter) release() {
	if pf != nil && !pf.released && pf.memfd > 2 {
		unix.Close(pf.memfd)
		pf.released = true
	}
}
