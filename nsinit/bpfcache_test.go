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
	"testing"

	"github.com/sandboxd/sandboxd/internal/testutil"
	"github.com/sandboxd/sandboxd/profiles"
)

const repoPayloadProfile = "../profiles/payload.json"

func shaOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func writeCache(t *testing.T, path string, content []byte) {
	t.Helper()
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestBPFCacheHeader(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	h := bpfCacheHeader(sha)
	want := "SANDBOXD-BPF 1 " + sha + " " + runtime.GOARCH + "\n"
	if h != want {
		t.Fatalf("header %q, want %q", h, want)
	}
	if BPFCachePath("/etc/sandboxd/payload.json") != "/etc/sandboxd/payload.json.bpf" {
		t.Fatalf("BPFCachePath = %q", BPFCachePath("/etc/sandboxd/payload.json"))
	}
}

func TestReadBPFCacheMissing(t *testing.T) {
	prog, why := readBPFCache(filepath.Join(t.TempDir(), "absent.json.bpf"), strings.Repeat("0", 64))
	if prog != nil {
		t.Fatalf("missing cache returned %d bytes", len(prog))
	}
	if !strings.Contains(why, "no trusted cache") || !strings.Contains(why, "no such file") {
		t.Fatalf("reason %q does not say the cache is missing", why)
	}
}

func TestReadBPFCache(t *testing.T) {
	testutil.RequireRoot(t, "create root-owned files")
	sha := shaOf([]byte("profile bytes"))
	otherSHA := shaOf([]byte("another profile"))
	prog := bytes.Repeat([]byte{0x06, 0, 0, 0, 0, 0, 0xff, 0x7f}, 3) // 3 x "ret ALLOW"
	hdr := bpfCacheHeader(sha)

	tests := []struct {
		name    string
		setup   func(t *testing.T, path string)
		wantErr string // empty: the cache is used and holds prog
	}{
		{"valid root-owned cache", func(t *testing.T, p string) { writeCache(t, p, append([]byte(hdr), prog...)) }, ""},
		{"valid, one instruction", func(t *testing.T, p string) { writeCache(t, p, append([]byte(hdr), prog[:8]...)) }, ""},
		{"owned by another uid", func(t *testing.T, p string) {
			writeCache(t, p, append([]byte(hdr), prog...))
			chownExec(t, p, 65534, 65534)
		}, "owned by uid 65534"},
		{"group-writable", func(t *testing.T, p string) {
			writeCache(t, p, append([]byte(hdr), prog...))
			if err := os.Chmod(p, 0o664); err != nil {
				t.Fatal(err)
			}
		}, "writable by group or others"},
		{"symlink to a valid cache", func(t *testing.T, p string) {
			real := p + ".real"
			writeCache(t, real, append([]byte(hdr), prog...))
			if err := os.Symlink(real, p); err != nil {
				t.Fatal(err)
			}
		}, "symlink"},
		{"wrong sha", func(t *testing.T, p string) {
			writeCache(t, p, append([]byte(bpfCacheHeader(otherSHA)), prog...))
		}, "made from another profile or architecture"},
		{"sha prefix only", func(t *testing.T, p string) {
			writeCache(t, p, append([]byte(fmt.Sprintf("%s %s %s\n", bpfCacheMagic, sha[:32], runtime.GOARCH)), prog...))
		}, "another profile"},
		{"wrong arch", func(t *testing.T, p string) {
			arch := "arm64"
			if runtime.GOARCH == "arm64" {
				arch = "amd64"
			}
			writeCache(t, p, append([]byte(fmt.Sprintf("%s %s %s\n", bpfCacheMagic, sha, arch)), prog...))
		}, "another profile or architecture"},
		{"wrong magic version", func(t *testing.T, p string) {
			writeCache(t, p, append([]byte(fmt.Sprintf("SANDBOXD-BPF 2 %s %s\n", sha, runtime.GOARCH)), prog...))
		}, "another profile"},
		{"header without newline", func(t *testing.T, p string) {
			writeCache(t, p, append([]byte(strings.TrimSuffix(hdr, "\n")), prog...))
		}, "another profile"},
		{"empty file", func(t *testing.T, p string) { writeCache(t, p, nil) }, "another profile"},
		{"header only", func(t *testing.T, p string) { writeCache(t, p, []byte(hdr)) }, "no sock_filter array"},
		{"body 7 bytes", func(t *testing.T, p string) { writeCache(t, p, append([]byte(hdr), prog[:7]...)) }, "no sock_filter array"},
		{"body 9 bytes", func(t *testing.T, p string) { writeCache(t, p, append([]byte(hdr), prog[:9]...)) }, "no sock_filter array"},
		{"body 4 bytes", func(t *testing.T, p string) { writeCache(t, p, append([]byte(hdr), prog[:4]...)) }, "no sock_filter array"},
		{"body 12 bytes", func(t *testing.T, p string) { writeCache(t, p, append([]byte(hdr), prog[:12]...)) }, "no sock_filter array"},
		{"body 23 bytes", func(t *testing.T, p string) { writeCache(t, p, append([]byte(hdr), prog[:23]...)) }, "no sock_filter array"},
		{"a directory", func(t *testing.T, p string) {
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}, "unreadable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(rootDir(t), "payload.json.bpf")
			tc.setup(t, path)
			got, why := readBPFCache(path, sha)
			if tc.wantErr == "" {
				if got == nil {
					t.Fatalf("cache refused: %s", why)
				}
				if why != "" {
					t.Fatalf("cache used but reason %q", why)
				}
				want, _ := os.ReadFile(path)
				if !bytes.Equal(got, want[len(hdr):]) {
					t.Fatalf("program %x, want %x", got, want[len(hdr):])
				}
				return
			}
			if got != nil {
				t.Fatalf("cache used (%d bytes), want it refused with %q", len(got), tc.wantErr)
			}
			if !strings.Contains(why, tc.wantErr) {
				t.Fatalf("reason %q does not contain %q", why, tc.wantErr)
			}
		})
	}
}

// installProfile copies the repository's payload profile into a root-owned
// directory, as `make install` would.
func installProfile(t *testing.T) (path string, raw []byte) {
	t.Helper()
	raw, err := os.ReadFile(repoPayloadProfile)
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(rootDir(t), "payload.json")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, raw
}

func compileFresh(t *testing.T, raw []byte) []byte {
	t.Helper()
	p, err := profiles.Parse(raw, "payload.json")
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.BPF()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestWriteBPFCacheAndPayloadFilter(t *testing.T) {
	testutil.RequireRoot(t, "create root-owned files")
	path, raw := installProfile(t)
	fresh := compileFresh(t, raw)
	sha := shaOf(raw)

	// Without a cache: compiled at launch, with the reason.
	bpf, gotSHA, source, p, err := payloadFilter(path)
	if err != nil {
		t.Fatal(err)
	}
	if gotSHA != sha || !bytes.Equal(bpf, fresh) || p == nil {
		t.Fatalf("uncached payloadFilter: sha %s (want %s), %d bytes (want %d), profile %v", gotSHA, sha, len(bpf), len(fresh), p)
	}
	if !strings.HasPrefix(source, "compiled at launch (no trusted cache") {
		t.Fatalf("uncached source %q", source)
	}

	if err := WriteBPFCache(path); err != nil {
		t.Fatalf("WriteBPFCache: %v", err)
	}
	cache := BPFCachePath(path)
	b, err := os.ReadFile(cache)
	if err != nil {
		t.Fatal(err)
	}
	hdr := bpfCacheHeader(sha)
	if !bytes.HasPrefix(b, []byte(hdr)) {
		t.Fatalf("cache header %q, want %q", b[:min(len(b), 120)], hdr)
	}
	if !bytes.Equal(b[len(hdr):], fresh) {
		t.Fatalf("cache body (%d bytes) differs from a fresh compile (%d bytes)", len(b)-len(hdr), len(fresh))
	}
	fi, err := os.Lstat(cache)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode() != 0o644 {
		t.Fatalf("cache mode %v, want -rw-r--r--", fi.Mode())
	}
	if _, err := os.Lstat(cache + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("temporary file left behind: %v", err)
	}

	// With the cache: precompiled, same bytes, no profile parsed.
	bpf, gotSHA, source, p, err = payloadFilter(path)
	if err != nil {
		t.Fatal(err)
	}
	if source != "precompiled "+cache {
		t.Fatalf("source %q, want %q", source, "precompiled "+cache)
	}
	if gotSHA != sha || !bytes.Equal(bpf, fresh) || p != nil {
		t.Fatalf("cached payloadFilter: sha %s, %d bytes, profile %v", gotSHA, len(bpf), p)
	}

	// Writing the cache again replaces it in place.
	if err := WriteBPFCache(path); err != nil {
		t.Fatalf("second WriteBPFCache: %v", err)
	}

	// The profile changes after the cache was written: the cache is a miss
	// and the launch compiles the changed profile itself.
	changed := append(append([]byte{}, raw...), '\n')
	if err := os.WriteFile(path, changed, 0o644); err != nil {
		t.Fatal(err)
	}
	bpf, gotSHA, source, p, err = payloadFilter(path)
	if err != nil {
		t.Fatal(err)
	}
	if gotSHA != shaOf(changed) || p == nil {
		t.Fatalf("changed profile: sha %s, profile %v", gotSHA, p)
	}
	if !strings.HasPrefix(source, "compiled at launch (") || !strings.Contains(source, "another profile") {
		t.Fatalf("changed profile source %q", source)
	}
	if !bytes.Equal(bpf, compileFresh(t, changed)) {
		t.Fatal("changed profile compiled to other bytes than a fresh compile")
	}
}

func TestPayloadFilterErrors(t *testing.T) {
	dir := t.TempDir()
	if _, _, _, _, err := payloadFilter(filepath.Join(dir, "missing.json")); err == nil {
		t.Fatal("missing profile accepted")
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"defaultAction":"SCMP_ACT_ALLOW","bogus":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	bpf, sha, source, _, err := payloadFilter(bad)
	if err == nil || bpf != nil {
		t.Fatalf("invalid profile: err %v, %d bytes", err, len(bpf))
	}
	if sha == "" || !strings.HasPrefix(source, "compiled at launch") {
		t.Fatalf("invalid profile: sha %q source %q; both belong in the audit record", sha, source)
	}
	if err := WriteBPFCache(bad); err == nil {
		t.Fatal("WriteBPFCache accepted an invalid profile")
	}
	if _, err := os.Lstat(BPFCachePath(bad)); !os.IsNotExist(err) {
		t.Fatalf("a cache was written for an invalid profile: %v", err)
	}
	if err := WriteBPFCache(filepath.Join(dir, "missing.json")); err == nil {
		t.Fatal("WriteBPFCache accepted a missing profile")
	}
}

// WriteBPFCache runs as root at install time in a directory the helper
// trusts: a symlink planted at its temporary name must be replaced, never
// written through (os.WriteFile followed it and truncated its target), and
// the cache must be durable before it replaces the old one.
func TestWriteBPFCacheDoesNotFollowPlantedSymlink(t *testing.T) {
	dir := t.TempDir()
	raw, err := os.ReadFile(repoPayloadProfile)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "payload.json")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, BPFCachePath(path)+".tmp"); err != nil {
		t.Fatal(err)
	}
	if err := WriteBPFCache(path); err != nil {
		t.Fatalf("WriteBPFCache: %v", err)
	}
	if got, _ := os.ReadFile(victim); string(got) != "keep" {
		t.Fatalf("the symlink's target was overwritten (%d bytes)", len(got))
	}
	fi, err := os.Lstat(BPFCachePath(path))
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 {
		t.Fatalf("cache: %v, %v; want a regular file, mode 0644", fi, err)
	}
}
