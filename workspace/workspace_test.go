package workspace

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// noTemps fails if a temporary upload file is left anywhere below dir.
func noTemps(t *testing.T, dir string) {
	t.Helper()
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && strings.HasPrefix(fi.Name(), TempPrefix) {
			t.Errorf("temporary upload file left behind: %s", p)
		}
		return nil
	})
}

func TestPutOpenRoundTrip(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	forEachResolver(t, func(t *testing.T, r resolver) {
		dir := t.TempDir()
		w := openWS(t, dir, 0, r)
		tests := []struct {
			path, content string
		}{
			{"a.txt", "hello"},
			{"empty", ""},
			{"data/in.csv", "x,y\n1,2\n"},
			{"deep/er/and/deeper/f.bin", "\x00\x01\x02binary"},
			{"big.bin", strings.Repeat("0123456789abcdef", 100000)},
			{"ünï code.txt", "u"},
		}
		for _, tt := range tests {
			size, sum, err := w.Put(tt.path, strings.NewReader(tt.content), 0)
			if err != nil {
				t.Fatalf("Put(%q): %v", tt.path, err)
			}
			if size != int64(len(tt.content)) || sum != sha(tt.content) {
				t.Errorf("Put(%q) = %d, %s; want %d, %s", tt.path, size, sum, len(tt.content), sha(tt.content))
			}
			f, info, err := w.Open(tt.path)
			if err != nil {
				t.Fatalf("Open(%q): %v", tt.path, err)
			}
			got, err := io.ReadAll(f)
			f.Close()
			if err != nil || string(got) != tt.content {
				t.Errorf("Open(%q) read %d bytes, %v; want the %d bytes put", tt.path, len(got), err, len(tt.content))
			}
			if info.Path != tt.path || info.Size != int64(len(tt.content)) || info.Mode != "-rw-------" || info.ModifiedAt.IsZero() {
				t.Errorf("Open(%q) info = %+v", tt.path, info)
			}
			if got := readFile(t, filepath.Join(dir, tt.path)); got != tt.content {
				t.Errorf("on disk %q differs", tt.path)
			}
		}
		for _, d := range []string{"data", "deep", "deep/er", "deep/er/and", "deep/er/and/deeper"} {
			fi, err := os.Lstat(filepath.Join(dir, d))
			if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
				t.Errorf("parent %s: %v %v, want a 0700 directory", d, fi.Mode(), err)
			}
		}
		noTemps(t, dir)
	})
}

func TestPutReplaces(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	forEachResolver(t, func(t *testing.T, r resolver) {
		dir := t.TempDir()
		w := openWS(t, dir, 0, r)
		writeFile(t, filepath.Join(dir, "f"), "old content, longer")
		before, _ := os.Stat(filepath.Join(dir, "f"))
		if _, _, err := w.Put("f", strings.NewReader("new"), 0); err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, filepath.Join(dir, "f")); got != "new" {
			t.Fatalf("content %q", got)
		}
		after, _ := os.Stat(filepath.Join(dir, "f"))
		if os.SameFile(before, after) {
			t.Error("Put wrote into the old inode instead of replacing it")
		}
		if after.Mode().Perm() != 0o600 {
			t.Errorf("mode %v, want 0600", after.Mode())
		}
		noTemps(t, dir)
	})
}

func TestPutMaxBytes(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	tests := []struct {
		name    string
		size    int
		max     int64
		wantErr error
	}{
		{"under", 99, 100, nil},
		{"exact", 100, 100, nil},
		{"one over", 101, 100, ErrTooLarge},
		{"far over", 1 << 20, 100, ErrTooLarge},
		{"no limit", 1 << 20, 0, nil},
	}
	forEachResolver(t, func(t *testing.T, r resolver) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				dir := t.TempDir()
				w := openWS(t, dir, 0, r)
				writeFile(t, filepath.Join(dir, "sub/f"), "old")
				_, _, err := w.Put("sub/f", bytes.NewReader(make([]byte, tt.size)), tt.max)
				if !isErr(err, tt.wantErr) {
					t.Fatalf("Put = %v, want %v", err, tt.wantErr)
				}
				want := "old"
				if tt.wantErr == nil {
					want = string(make([]byte, tt.size))
				}
				if got := readFile(t, filepath.Join(dir, "sub/f")); got != want {
					t.Errorf("target holds %d bytes, want %d", len(got), len(want))
				}
				noTemps(t, dir)
			})
		}
	})
}

func TestPutQuota(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	forEachResolver(t, func(t *testing.T, r resolver) {
		dir := t.TempDir()
		w := openWS(t, dir, 100, r)
		steps := []struct {
			path    string
			size    int
			wantErr error
			usage   int64
		}{
			{"a", 60, nil, 60},
			{"b", 50, ErrQuota, 60},      // 60+50 > 100
			{"a", 90, nil, 90},           // replaces a: 60-60+90
			{"b", 10, nil, 100},          // exactly the quota
			{"c", 1, ErrQuota, 100},      // one byte over
			{"c", 0, nil, 100},           // an empty file fits
			{"b", 11, ErrQuota, 100},     // replacing b: 100-10+11
			{"d/e/f", 5, ErrQuota, 100},  // nested, still over
			{"a", 0, nil, 10},            // shrink a
			{"d/e/f", 90, nil, 100},      // now it fits
			{"d/e/f", 91, ErrQuota, 100}, // its replacement does not
		}
		for i, s := range steps {
			before := snapshot(t, dir)
			_, _, err := w.Put(s.path, bytes.NewReader(bytes.Repeat([]byte{'x'}, s.size)), 0)
			if !isErr(err, s.wantErr) {
				t.Fatalf("step %d: Put(%q, %d bytes) = %v, want %v", i, s.path, s.size, err, s.wantErr)
			}
			if err != nil {
				// ErrQuota leaves the old file intact and no temp file
				// (directories created on the way may stay).
				after := snapshot(t, dir)
				for p, n := range before {
					if after[p] != n {
						t.Errorf("step %d: %s changed after a refused upload", i, p)
					}
				}
				noTemps(t, dir)
			}
			u, err := w.Usage()
			if err != nil || u != s.usage {
				t.Fatalf("step %d: Usage = %d, %v; want %d", i, u, err, s.usage)
			}
		}
	})
}

// A workspace the payload filled past the quota refuses every upload, even
// an empty one, and is usable again once files are deleted.
func TestPutQuotaOverfull(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	forEachResolver(t, func(t *testing.T, r resolver) {
		dir := t.TempDir()
		w := openWS(t, dir, 100, r)
		writeFile(t, filepath.Join(dir, "payload-wrote"), strings.Repeat("p", 150))
		if _, _, err := w.Put("x", strings.NewReader(""), 0); !errors.Is(err, ErrQuota) {
			t.Fatalf("Put into an overfull workspace = %v, want ErrQuota", err)
		}
		if err := w.Delete("payload-wrote"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := w.Put("x", strings.NewReader("fits"), 0); err != nil {
			t.Fatalf("after delete: %v", err)
		}
	})
}

// Replacing a hard-linked file frees nothing (the other link keeps the
// inode), so its size is not credited.
func TestPutQuotaHardLinkNotCredited(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	forEachResolver(t, func(t *testing.T, r resolver) {
		dir := t.TempDir()
		w := openWS(t, dir, 100, r)
		writeFile(t, filepath.Join(dir, "a"), strings.Repeat("a", 80))
		if err := os.Link(filepath.Join(dir, "a"), filepath.Join(dir, "b")); err != nil {
			t.Fatal(err)
		}
		if u, _ := w.Usage(); u != 80 {
			t.Fatalf("Usage = %d, want 80 (the inode once)", u)
		}
		if _, _, err := w.Put("b", strings.NewReader(strings.Repeat("b", 30)), 0); !errors.Is(err, ErrQuota) {
			t.Fatalf("Put = %v, want ErrQuota (80 + 30 > 100)", err)
		}
		if _, _, err := w.Put("b", strings.NewReader(strings.Repeat("b", 20)), 0); err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, filepath.Join(dir, "a")); got != strings.Repeat("a", 80) {
			t.Error("replacing one link changed the other")
		}
	})
}

// Uploads are serialised for the quota: of ten concurrent 10-byte uploads
// into 50 bytes of quota exactly five succeed.
func TestPutQuotaConcurrent(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	forEachResolver(t, func(t *testing.T, r resolver) {
		dir := t.TempDir()
		w := openWS(t, dir, 50, r)
		var wg sync.WaitGroup
		var mu sync.Mutex
		ok, quota := 0, 0
		for i := 0; i < 10; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _, err := w.Put(fmt.Sprintf("f%d", i), strings.NewReader("0123456789"), 0)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					ok++
				case errors.Is(err, ErrQuota):
					quota++
				default:
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if ok != 5 || quota != 5 {
			t.Fatalf("%d uploads succeeded, %d hit the quota; want 5 and 5", ok, quota)
		}
	})
}

// absVictim in a test table stands for an absolute path into a temporary
// directory of the test.
const absVictim = "{absolute}"

type failingReader struct{ n int }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errors.New("client went away")
	}
	k := min(len(p), f.n)
	f.n -= k
	return k, nil
}

func TestPutReaderFails(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	forEachResolver(t, func(t *testing.T, r resolver) {
		dir := t.TempDir()
		w := openWS(t, dir, 0, r)
		writeFile(t, filepath.Join(dir, "f"), "old")
		if _, _, err := w.Put("f", &failingReader{n: 100000}, 0); err == nil {
			t.Fatal("Put succeeded with a failing body")
		}
		if got := readFile(t, filepath.Join(dir, "f")); got != "old" {
			t.Errorf("target changed to %d bytes", len(got))
		}
		noTemps(t, dir)
	})
}

func TestPutRefusals(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		path  string
		want  error
	}{
		{"target is a directory", func(t *testing.T, dir string) { mkdir(t, filepath.Join(dir, "d/x")) }, "d", ErrNotRegular},
		{"parent is a file", func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "f"), "") }, "f/x", ErrNotRegular},
		{"grandparent is a file", func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "f"), "") }, "f/x/y", ErrNotRegular},
		{"absolute", func(*testing.T, string) {}, absVictim, ErrEscape},
		{"dotdot", func(*testing.T, string) {}, "../x", ErrEscape},
		{"not clean", func(*testing.T, string) {}, "a//b", ErrInvalidPath},
		{"reserved name", func(*testing.T, string) {}, TempPrefix + "1", ErrInvalidPath},
	}
	forEachResolver(t, func(t *testing.T, r resolver) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				dir := t.TempDir()
				tt.setup(t, dir)
				w := openWS(t, dir, 0, r)
				before := snapshot(t, dir)
				p := tt.path
				if p == absVictim {
					// An absolute path into the test's own directory,
					// never a real host file.
					p = filepath.Join(t.TempDir(), "victim")
					guardOutside(t, filepath.Dir(p))
				}
				if _, _, err := w.Put(p, strings.NewReader("data"), 0); !isErr(err, tt.want) {
					t.Fatalf("Put(%q) = %v, want %v", p, err, tt.want)
				}
				if d := diffSnapshots(before, snapshot(t, dir)); len(d) > 0 {
					t.Errorf("a refused Put changed the workspace: %v", d)
				}
			})
		}
	})
}

func TestOpenErrors(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	forEachResolver(t, func(t *testing.T, r resolver) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "f"), "x")
		mkdir(t, filepath.Join(dir, "d"))
		w := openWS(t, dir, 0, r)
		tests := []struct {
			path string
			want error
		}{
			{"missing", ErrNotFound},
			{"d/missing", ErrNotFound},
			{"nodir/missing", ErrNotFound},
			{"f/x", ErrNotFound},
			{"d", ErrNotRegular},
			{"../f", ErrEscape},
			{"", ErrInvalidPath},
		}
		for _, tt := range tests {
			f, _, err := w.Open(tt.path)
			if f != nil {
				f.Close()
			}
			if !isErr(err, tt.want) {
				t.Errorf("Open(%q) = %v, want %v", tt.path, err, tt.want)
			}
		}
	})
}

func TestDelete(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		path  string
		want  error
		gone  bool // path no longer exists afterwards
	}{
		{"file", func(t *testing.T, d string) { writeFile(t, filepath.Join(d, "f"), "x") }, "f", nil, true},
		{"nested file", func(t *testing.T, d string) { writeFile(t, filepath.Join(d, "a/b/f"), "x") }, "a/b/f", nil, true},
		{"empty dir", func(t *testing.T, d string) { mkdir(t, filepath.Join(d, "e")) }, "e", nil, true},
		{"non-empty dir", func(t *testing.T, d string) { writeFile(t, filepath.Join(d, "n/f"), "x") }, "n", ErrNotEmpty, false},
		{"symlink to a file inside", func(t *testing.T, d string) {
			writeFile(t, filepath.Join(d, "f"), "x")
			symlink(t, "f", filepath.Join(d, "l"))
		}, "l", nil, true},
		{"symlink to a dir inside", func(t *testing.T, d string) {
			writeFile(t, filepath.Join(d, "sub/f"), "x")
			symlink(t, "sub", filepath.Join(d, "l"))
		}, "l", nil, true},
		{"fifo", func(t *testing.T, d string) { mkfifo(t, filepath.Join(d, "p")) }, "p", nil, true},
		{"missing", func(*testing.T, string) {}, "nope", ErrNotFound, true},
		{"missing parent", func(*testing.T, string) {}, "no/pe", ErrNotFound, true},
		{"dotdot", func(*testing.T, string) {}, "../x", ErrEscape, true},
	}
	forEachResolver(t, func(t *testing.T, r resolver) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				dir := t.TempDir()
				tt.setup(t, dir)
				w := openWS(t, dir, 0, r)
				if err := w.Delete(tt.path); !isErr(err, tt.want) {
					t.Fatalf("Delete(%q) = %v, want %v", tt.path, err, tt.want)
				}
				if _, err := os.Lstat(filepath.Join(dir, tt.path)); (err != nil) != tt.gone {
					t.Errorf("after Delete(%q): lstat err %v, want gone=%v", tt.path, err, tt.gone)
				}
				// Symlink targets survive.
				if strings.HasPrefix(tt.name, "symlink") {
					if _, err := os.Stat(filepath.Join(dir, "f")); err != nil && tt.name == "symlink to a file inside" {
						t.Error("Delete of a symlink removed its target")
					}
					if _, err := os.Stat(filepath.Join(dir, "sub/f")); err != nil && tt.name == "symlink to a dir inside" {
						t.Error("Delete of a symlink removed its target")
					}
				}
			})
		}
	})
}

func TestList(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	forEachResolver(t, func(t *testing.T, r resolver) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "b.txt"), "bb")
		writeFile(t, filepath.Join(dir, "a/z.txt"), "zzz")
		writeFile(t, filepath.Join(dir, "a0"), "")
		writeFile(t, filepath.Join(dir, "a/"+TempPrefix+"abc"), "partial")
		writeFile(t, filepath.Join(dir, TempPrefix+"def"), "partial")
		symlink(t, "/nonexistent/passwd", filepath.Join(dir, "link"))
		mkfifo(t, filepath.Join(dir, "pipe"))
		if err := os.Chmod(filepath.Join(dir, "b.txt"), 0o640); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, "a"), 0o750); err != nil {
			t.Fatal(err)
		}
		w := openWS(t, dir, 0, r)
		got, err := w.List()
		if err != nil {
			t.Fatal(err)
		}
		want := []struct {
			path string
			size int64
			mode string
		}{
			{"a", 0, "drwxr-x---"},
			{"a/z.txt", 3, "-rw-r--r--"},
			{"a0", 0, "-rw-r--r--"},
			{"b.txt", 2, "-rw-r-----"},
			{"link", int64(len("/nonexistent/passwd")), "Lrwxrwxrwx"},
			{"pipe", 0, "prw-r--r--"},
		}
		if len(got) != len(want) {
			t.Fatalf("List = %+v, want %d entries", got, len(want))
		}
		for i, w := range want {
			g := got[i]
			if g.Path != w.path || g.Size != w.size || g.Mode != w.mode || g.ModifiedAt.IsZero() {
				t.Errorf("entry %d = %+v, want %+v", i, g, w)
			}
		}
	})
}

func TestWalkLimits(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	forEachResolver(t, func(t *testing.T, r resolver) {
		t.Run("entries", func(t *testing.T) {
			dir := t.TempDir()
			for i := 0; i < 30; i++ {
				writeFile(t, filepath.Join(dir, fmt.Sprintf("d%d/f", i%3), fmt.Sprint(i)), "x")
			}
			w := openWS(t, dir, 1000, r)
			w.maxEntries = 20
			if _, err := w.List(); !errors.Is(err, ErrTreeTooLarge) || !errors.Is(err, ErrQuota) {
				t.Errorf("List = %v, want ErrTreeTooLarge (an ErrQuota)", err)
			}
			if _, err := w.Usage(); !errors.Is(err, ErrTreeTooLarge) {
				t.Errorf("Usage = %v, want ErrTreeTooLarge", err)
			}
			if _, _, err := w.Put("g", strings.NewReader("x"), 0); !errors.Is(err, ErrQuota) {
				t.Errorf("Put = %v, want ErrQuota", err)
			}
			w.maxEntries = 40
			if l, err := w.List(); err != nil || len(l) != 36 {
				t.Errorf("List = %d entries, %v; want 36", len(l), err)
			}
		})
		t.Run("path length", func(t *testing.T) {
			// Build a chain of directories whose path passes MaxPathLen,
			// as a payload can (one mkdirat at a time).
			dir := t.TempDir()
			fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
			if err != nil {
				t.Fatal(err)
			}
			name := strings.Repeat("n", 200)
			for depth := 0; depth*201 <= MaxPathLen+201; depth++ {
				if err := unix.Mkdirat(fd, name, 0o700); err != nil {
					t.Fatal(err)
				}
				nfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
				unix.Close(fd)
				if err != nil {
					t.Fatal(err)
				}
				fd = nfd
			}
			unix.Close(fd)
			w := openWS(t, dir, 0, r)
			if _, err := w.List(); !errors.Is(err, ErrTreeTooLarge) {
				t.Errorf("List = %v, want ErrTreeTooLarge", err)
			}
		})
	})
}

func TestUsage(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	forEachResolver(t, func(t *testing.T, r resolver) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "a"), strings.Repeat("a", 100))
		writeFile(t, filepath.Join(dir, "d/b"), strings.Repeat("b", 23))
		if err := os.Link(filepath.Join(dir, "a"), filepath.Join(dir, "d/a-link")); err != nil {
			t.Fatal(err)
		}
		symlink(t, "a", filepath.Join(dir, "sym"))
		mkfifo(t, filepath.Join(dir, "p"))
		writeFile(t, filepath.Join(dir, TempPrefix+"x"), "1234") // a crashed upload still takes space
		w := openWS(t, dir, 0, r)
		if u, err := w.Usage(); err != nil || u != 127 {
			t.Fatalf("Usage = %d, %v; want 127", u, err)
		}
	})
}

func TestSweep(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	forEachResolver(t, func(t *testing.T, r resolver) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "keep"), "k")
		writeFile(t, filepath.Join(dir, TempPrefix+"0011"), "half an upload")
		writeFile(t, filepath.Join(dir, "d/e/"+TempPrefix+"22"), "another")
		writeFile(t, filepath.Join(dir, "d/e/keep"), "k")
		victim := filepath.Join(t.TempDir(), "victim")
		writeFile(t, victim, "victim")
		symlink(t, victim, filepath.Join(dir, "d/"+TempPrefix+"sym"))
		mkdir(t, filepath.Join(dir, TempPrefix+"dir"))
		w := openWS(t, dir, 0, r)
		if err := w.Sweep(); err != nil {
			t.Fatal(err)
		}
		noTempFiles := func() {
			for _, p := range []string{TempPrefix + "0011", "d/e/" + TempPrefix + "22", "d/" + TempPrefix + "sym"} {
				if _, err := os.Lstat(filepath.Join(dir, p)); err == nil {
					t.Errorf("%s survived Sweep", p)
				}
			}
		}
		noTempFiles()
		for _, p := range []string{"keep", "d/e/keep", TempPrefix + "dir"} {
			if _, err := os.Lstat(filepath.Join(dir, p)); err != nil {
				t.Errorf("Sweep removed %s", p)
			}
		}
		if _, err := os.Stat(victim); err != nil {
			t.Error("Sweep followed a symlink")
		}
	})
}

func TestClose(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	dir := t.TempDir()
	w, err := Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.Put("f", strings.NewReader("x"), 0); err != nil {
		t.Fatal(err)
	}
	f, _, err := w.Open("f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if b, err := io.ReadAll(f); err != nil || string(b) != "x" {
		t.Errorf("a file opened before Close: %q, %v", b, err)
	}
	if _, _, err := w.Put("g", strings.NewReader("x"), 0); !errors.Is(err, ErrClosed) {
		t.Errorf("Put after Close = %v", err)
	}
	if _, _, err := w.Open("f"); !errors.Is(err, ErrClosed) {
		t.Errorf("Open after Close = %v", err)
	}
	if _, err := w.List(); !errors.Is(err, ErrClosed) {
		t.Errorf("List after Close = %v", err)
	}
	if _, _, err := w.Collect([]string{"*"}, ArtifactLimits{}); !errors.Is(err, ErrClosed) {
		t.Errorf("Collect after Close = %v", err)
	}
}

func TestOpenWorkspaceErrors(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "file"), "x")
	symlink(t, dir, filepath.Join(dir, "link"))
	for _, p := range []string{filepath.Join(dir, "missing"), filepath.Join(dir, "file"), filepath.Join(dir, "link")} {
		if w, err := Open(p, 0); err == nil {
			w.Close()
			t.Errorf("Open(%q) succeeded", p)
		}
	}
}
