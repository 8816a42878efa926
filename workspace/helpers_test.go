package workspace

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// resolver is one of the two ways the package resolves paths.
type resolver struct {
	name    string
	openat2 bool
}

// resolvers returns the resolvers this kernel can run: the fallback walk
// always, openat2 when available (it is, from Linux 5.6).
func resolvers(t *testing.T) []resolver {
	t.Helper()
	rs := []resolver{{"walk", false}}
	if haveOpenat2() {
		rs = append([]resolver{{"openat2", true}}, rs...)
	} else {
		t.Log("openat2 unavailable here: testing the fallback resolver only")
	}
	return rs
}

// forEachResolver runs f once per resolver as a subtest.
func forEachResolver(t *testing.T, f func(t *testing.T, r resolver)) {
	for _, r := range resolvers(t) {
		t.Run(r.name, func(t *testing.T) { f(t, r) })
	}
}

// openWS opens dir with the resolver r and closes it at the end of the test.
func openWS(t *testing.T, dir string, quota int64, r resolver) *Workspace {
	t.Helper()
	w, err := Open(dir, quota)
	if err != nil {
		t.Fatal(err)
	}
	w.useOpenat2 = r.openat2
	t.Cleanup(func() { _ = w.Close() })
	return w
}

func mkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	mkdir(t, filepath.Dir(p))
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func mkfifo(t *testing.T, p string) {
	t.Helper()
	if err := unix.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
}

// mksock creates a unix socket file at p. It binds in a short temporary
// directory (sun_path holds 108 bytes) and renames the socket into place.
func mksock(t *testing.T, p string) {
	t.Helper()
	short, err := os.MkdirTemp("", "s")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(short)
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	tmp := filepath.Join(short, "s")
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: tmp}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 1); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		// Not on one filesystem: bind in place with a relative name.
		t.Skipf("cannot place a socket at %s: %v", p, err)
	}
}

// within fails the test if f does not return within d (a blocked open of a
// FIFO, say). The goroutine is leaked on failure.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s blocked for %v", what, d)
	}
}

// node is one entry of a tree snapshot.
type node struct {
	kind    string
	mode    fs.FileMode
	content string // file content or symlink target
}

// snapshot records every entry below dir with its type, mode and content.
func snapshot(t *testing.T, dir string) map[string]node {
	t.Helper()
	out := map[string]node{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		n := node{mode: fi.Mode()}
		switch {
		case fi.Mode().IsRegular():
			n.kind = "file"
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			n.content = string(b)
		case fi.Mode()&fs.ModeSymlink != 0:
			n.kind = "symlink"
			n.content, _ = os.Readlink(p)
		case fi.IsDir():
			n.kind = "dir"
		default:
			n.kind = fi.Mode().Type().String()
		}
		out[rel] = n
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diffSnapshots(before, after map[string]node) []string {
	var diffs []string
	for p, b := range before {
		a, ok := after[p]
		switch {
		case !ok:
			diffs = append(diffs, "removed: "+p)
		case a != b:
			diffs = append(diffs, "changed: "+p+" from "+describe(b)+" to "+describe(a))
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			diffs = append(diffs, "appeared: "+p)
		}
	}
	sort.Strings(diffs)
	return diffs
}

func describe(n node) string {
	c := n.content
	if len(c) > 40 {
		c = c[:40] + "..."
	}
	return n.kind + " " + n.mode.String() + " " + c
}

// guardOutside snapshots dir now and fails the test at its end if anything
// below dir changed, appeared or disappeared.
func guardOutside(t *testing.T, dir string) {
	t.Helper()
	before := snapshot(t, dir)
	t.Cleanup(func() {
		if d := diffSnapshots(before, snapshot(t, dir)); len(d) > 0 {
			t.Errorf("the outside directory %s was touched:\n  %s", dir, strings.Join(d, "\n  "))
		}
	})
}

// tarEntry is one entry of a parsed tar.
type tarEntry struct {
	hdr     tar.Header
	content []byte
}

func readTar(t *testing.T, p string) []tarEntry {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	var out []tarEntry
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("reading %s: %v", p, err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tarEntry{*hdr, b})
	}
}

// writeTar writes a tar of the given entries (with the end marker).
func writeTar(t *testing.T, p string, entries []tarEntry) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := e.hdr
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.content))
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(e.content); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

func isErr(err, want error) bool {
	if want == nil {
		return err == nil
	}
	return errors.Is(err, want)
}

// entries returns the names in dir.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}
