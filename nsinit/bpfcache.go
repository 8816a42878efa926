package nsinit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/sandboxd/sandboxd/internal/atomicfile"
	"github.com/sandboxd/sandboxd/nsinit/config"
	"github.com/sandboxd/sandboxd/profiles"
)

// Compiling the payload profile with libseccomp takes ~200 ms here, a
// hundred times the budget of a launch. So `make install` compiles it once,
// as root, into PROFILE.bpf beside the profile, and each launch uses that
// cache only when it is root-owned and was made from exactly the profile
// bytes being audited (same sha256, same architecture). Anything else is a
// miss and the launch compiles the profile itself: slower, never weaker.

const bpfCacheMagic = "SANDBOXD-BPF 1"

// BPFCachePath is where the compiled form of profile lives.
func BPFCachePath(profile string) string { return profile + ".bpf" }

func bpfCacheHeader(profileSHA string) string {
	return fmt.Sprintf("%s %s %s\n", bpfCacheMagic, profileSHA, runtime.GOARCH)
}

// payloadFilter returns the compiled filter for the profile at path, its
// sha256, and where the program came from.
func payloadFilter(path string) (bpf []byte, sha string, source string, p *profiles.Profile, err error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, "", "", nil, fmt.Errorf("read payload profile: %w", err)
	}
	cache, why := readBPFCacheFile(BPFCachePath(path))
	return filterFrom(path, raw, cache, why)
}

// filterFrom is payloadFilter on bytes already read: the profile's, and the
// cache file's (nil, with why, when there is no trusted cache).
func filterFrom(path string, raw, cache []byte, why string) (bpf []byte, sha string, source string, p *profiles.Profile, err error) {
	sum := sha256.Sum256(raw)
	sha = hex.EncodeToString(sum[:])
	if cache != nil {
		var prog []byte
		if prog, why = parseBPFCache(cache, sha); prog != nil {
			return prog, sha, "precompiled " + BPFCachePath(path), nil, nil
		}
	}
	source = "compiled at launch (" + why + ")"
	p, err = profiles.Parse(raw, filepath.Base(path))
	if err != nil {
		return nil, sha, source, nil, err
	}
	bpf, err = p.BPF()
	if err != nil {
		return nil, sha, source, p, fmt.Errorf("compile payload profile: %w", err)
	}
	return bpf, sha, source, p, nil
}

// readBPFCache returns the cached program, or nil and why it was not used.
func readBPFCache(cache, sha string) ([]byte, string) {
	b, why := readBPFCacheFile(cache)
	if b == nil {
		return nil, why
	}
	return parseBPFCache(b, sha)
}

// readBPFCacheFile reads the cache file when it is root-owned, or returns
// nil and why not.
func readBPFCacheFile(cache string) ([]byte, string) {
	if err := config.CheckRootOwned(cache); err != nil {
		return nil, "no trusted cache: " + err.Error()
	}
	b, err := os.ReadFile(cache)
	if err != nil {
		return nil, "cache unreadable: " + err.Error()
	}
	return b, ""
}

// parseBPFCache returns the program in a cache file's bytes when they were
// made from the profile with this sha256, or nil and why not.
func parseBPFCache(b []byte, sha string) ([]byte, string) {
	hdr := bpfCacheHeader(sha)
	if !bytes.HasPrefix(b, []byte(hdr)) {
		line, _, _ := strings.Cut(string(b[:min(len(b), 120)]), "\n")
		return nil, fmt.Sprintf("cache %q was made from another profile or architecture", line)
	}
	prog := b[len(hdr):]
	if len(prog) == 0 || len(prog)%8 != 0 {
		return nil, "cache holds no sock_filter array"
	}
	return prog, ""
}

// WriteBPFCache compiles the profile at path and writes its cache atomically.
// It is run as root by `make install`.
func WriteBPFCache(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read profile: %w", err)
	}
	p, err := profiles.Parse(raw, filepath.Base(path))
	if err != nil {
		return err
	}
	prog, err := p.BPF()
	if err != nil {
		return err
	}
	sum := sha256.Sum256(raw)
	out := append([]byte(bpfCacheHeader(hex.EncodeToString(sum[:]))), prog...)
	// As root, in a directory the helper trusts: never through a planted
	// symlink, never a half-written cache after a crash.
	if err := atomicfile.WriteFile(BPFCachePath(path), out, 0o644); err != nil {
		return fmt.Errorf("write cache: %w", err)
	}
	return nil
}
