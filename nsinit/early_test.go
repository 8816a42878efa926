package nsinit

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/internal/testutil"
)

// TestPreparedFilterMatches: the filter prepared before the spec is used
// only for the launch's own profile path with the profile and cache bytes
// it was prepared from, read again; any change, and the launch prepares
// its own.
func TestPreparedFilterMatches(t *testing.T) {
	testutil.RequireRoot(t, "create root-owned files")
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, path string)
		other  bool // the launch's config names another path
		want   bool
	}{
		{"unchanged", func(*testing.T, string) {}, false, true},
		{"another profile path", func(*testing.T, string) {}, true, false},
		{"profile rewritten", func(t *testing.T, p string) { writeCache(t, p, []byte(`{"defaultAction":"SCMP_ACT_ALLOW"}`)) }, false, false},
		{"cache rewritten", func(t *testing.T, p string) {
			b, _ := os.ReadFile(BPFCachePath(p))
			writeCache(t, BPFCachePath(p), append(b, make([]byte, 8)...))
		}, false, false},
		{"cache removed", func(t *testing.T, p string) { _ = os.Remove(BPFCachePath(p)) }, false, false},
		{"cache no longer root's", func(t *testing.T, p string) { _ = os.Chown(BPFCachePath(p), 1, 1) }, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, _ := installProfile(t)
			if err := WriteBPFCache(path); err != nil {
				t.Fatal(err)
			}
			pf, err := prepareFilter(path)
			if err != nil {
				t.Fatal(err)
			}
			defer pf.release()
			if pf.cache == nil {
				t.Fatalf("prepared without the cache: %s", pf.source)
			}
			tc.change(t, path)
			launchPath := path
			if tc.other {
				launchPath = path + ".other"
			}
			if got := pf.matches(launchPath); got != tc.want {
				t.Fatalf("matches %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPreparedFilterRelease: an unused prepared memfd is closed, so that
// bwrap never inherits it; a taken one is the launch's.
func TestPreparedFilterRelease(t *testing.T) {
	testutil.RequireRoot(t, "create root-owned files")
	path, _ := installProfile(t)
	pf, err := prepareFilter(path)
	if err != nil {
		t.Fatal(err)
	}
	fd := pf.memfd
	pf.release()
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil {
		t.Fatalf("memfd %d still open after release", fd)
	}
	var none *preparedFilter
	none.release() // no preview config: nothing to release
	if none.matches(path) {
		t.Fatal("a nil prepared filter matches")
	}
}
