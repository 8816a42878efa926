package workspace

import (
	"archive/tar"
	"bytes"
	"errors"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// archiveTree fills dir with every kind of entry an archive must carry or
// leave out.
func archiveTree(t *testing.T, dir string) {
	t.Helper()
	big := make([]byte, 3<<20+17)
	rand.New(rand.NewSource(1)).Read(big)
	files := []struct {
		path    string
		content string
		mode    os.FileMode
	}{
		{"README.md", "# hello\n", 0o644},
		{"empty", "", 0o600},
		{"bin/run.sh", "#!/bin/sh\necho hi\n", 0o755},
		{"bin/readonly", "ro", 0o400},
		{"data/big.bin", string(big), 0o644},
		{"data/deep/er/still/file.txt", "deep", 0o640},
		{"odd names/sp ace & ünïcode ✓.txt", "odd", 0o644},
		{"odd names/back\\slash", "bs", 0o644},
		{"odd names/new\nline", "nl", 0o644},
		{"long/" + strings.Repeat("n", 200) + "/" + strings.Repeat("m", 200), "long name", 0o644},
	}
	for _, f := range files {
		writeFile(t, filepath.Join(dir, f.path), f.content)
		if err := os.Chmod(filepath.Join(dir, f.path), f.mode); err != nil {
			t.Fatal(err)
		}
	}
	mkdir(t, filepath.Join(dir, "emptydir"))
	mkdir(t, filepath.Join(dir, "private"))
	if err := os.Chmod(filepath.Join(dir, "private"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "data"), 0o750); err != nil {
		t.Fatal(err)
	}
	symlink(t, "README.md", filepath.Join(dir, "link-to-file"))
	symlink(t, "data/deep", filepath.Join(dir, "link-to-dir"))
	symlink(t, "/nonexistent/outside/target", filepath.Join(dir, "bin/link-absolute"))
	symlink(t, "../../escape", filepath.Join(dir, "bin/link-dotdot"))
	// Set some modification times to the nanosecond.
	mt := time.Date(2020, 2, 3, 4, 5, 6, 789, time.UTC)
	for _, p := range []string{"README.md", "data/deep/er", "emptydir"} {
		if err := os.Chtimes(filepath.Join(dir, p), mt, mt); err != nil {
			t.Fatal(err)
		}
	}
}

// mtimes returns the modification time of every non-symlink entry below dir.
func mtimes(t *testing.T, dir string) map[string]time.Time {
	t.Helper()
	out := map[string]time.Time{}
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == dir || fi.Mode()&os.ModeSymlink != 0 {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = fi.ModTime()
		return nil
	})
	return out
}

func TestArchiveRestoreRoundTrip(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	forEachResolver(t, func(t *testing.T, r resolver) {
		root := t.TempDir()
		src := filepath.Join(root, "src")
		mkdir(t, src)
		archiveTree(t, src)
		// Left out: a FIFO, a socket, a temporary upload file. A hard link
		// comes back as an independent copy.
		mkfifo(t, filepath.Join(src, "pipe"))
		mksock(t, filepath.Join(src, "sock"))
		writeFile(t, filepath.Join(src, "data/"+TempPrefix+"1234"), "half")
		if err := os.Link(filepath.Join(src, "README.md"), filepath.Join(src, "hardlink")); err != nil {
			t.Fatal(err)
		}
		w := openWS(t, src, 0, r)
		dst := filepath.Join(root, "archives", "key.tar")
		mkdir(t, filepath.Dir(dst))
		n, err := Archive(w, dst, 64<<20)
		if err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(dst); err != nil || fi.Size() != n || fi.Mode().Perm() != 0o600 {
			t.Fatalf("archive: %v, %v; Archive said %d bytes", fi, err, n)
		}
		if _, err := os.Lstat(dst + ".tmp"); err == nil {
			t.Error("the .tmp survived a successful Archive")
		}

		restored := filepath.Join(root, "restored")
		mkdir(t, restored)
		if err := Restore(dst, restored, 0); err != nil {
			t.Fatal(err)
		}
		want := snapshot(t, src)
		for _, gone := range []string{"pipe", "sock", "data/" + TempPrefix + "1234"} {
			delete(want, gone)
		}
		got := snapshot(t, restored)
		delete(want, ".")
		delete(got, ".")
		if d := diffSnapshots(want, got); len(d) > 0 {
			t.Errorf("the restored tree differs:\n  %s", strings.Join(d, "\n  "))
		}
		wantT, gotT := mtimes(t, src), mtimes(t, restored)
		for p, mt := range gotT {
			if !mt.Equal(wantT[p]) {
				t.Errorf("%s: modification time %v, want %v", p, mt, wantT[p])
			}
		}
		a, _ := os.Stat(filepath.Join(restored, "README.md"))
		b, _ := os.Stat(filepath.Join(restored, "hardlink"))
		if os.SameFile(a, b) {
			t.Error("Restore made a hard link")
		}
		// The restored workspace works.
		w2 := openWS(t, restored, 0, r)
		if _, _, err := w2.Put("bin/new", strings.NewReader("x"), 0); err != nil {
			t.Errorf("Put into the restored workspace: %v", err)
		}
	})
}

func TestArchiveTooLarge(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	forEachResolver(t, func(t *testing.T, r resolver) {
		t.Run("files over the limit", func(t *testing.T) {
			root := t.TempDir()
			ws := filepath.Join(root, "ws")
			writeFile(t, filepath.Join(ws, "f"), strings.Repeat("x", 5000))
			w := openWS(t, ws, 0, r)
			dst := filepath.Join(root, "a.tar")
			if _, err := Archive(w, dst, 4999); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("Archive = %v, want ErrTooLarge", err)
			}
			if names := entries(t, root); len(names) != 1 {
				t.Errorf("Archive left %v", names)
			}
		})
		t.Run("headers over the limit", func(t *testing.T) {
			root := t.TempDir()
			ws := filepath.Join(root, "ws")
			for i := 0; i < 20; i++ {
				writeFile(t, filepath.Join(ws, strings.Repeat("f", i+1)), "")
			}
			w := openWS(t, ws, 0, r)
			dst := filepath.Join(root, "a.tar")
			if _, err := Archive(w, dst, 8192); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("Archive = %v, want ErrTooLarge", err)
			}
			if names := entries(t, root); len(names) != 1 {
				t.Errorf("Archive left %v", names)
			}
			// An earlier archive under dst is left as it was.
			writeFile(t, dst, "previous archive")
			if _, err := Archive(w, dst, 8192); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("Archive = %v, want ErrTooLarge", err)
			}
			if got := readFile(t, dst); got != "previous archive" {
				t.Error("a failed Archive changed the previous archive")
			}
			if _, err := os.Lstat(dst + ".tmp"); err == nil {
				t.Error("a failed Archive left its .tmp")
			}
		})
	})
}

// A crash mid-Archive leaves only dst+".tmp": it is never taken for dst,
// never restored as a whole archive, and the next Archive replaces it.
func TestArchiveHalfWritten(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	archiveTree(t, ws)
	w := openWS(t, ws, 0, resolver{"default", haveOpenat2()})
	full := filepath.Join(root, "full.tar")
	if _, err := Archive(w, full, 0); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(full)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(root, "key.tar")
	if err := os.WriteFile(dst+".tmp", raw[:len(raw)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	restored := filepath.Join(root, "restored")
	mkdir(t, restored)
	err = Restore(dst, restored, 0)
	if !errors.Is(err, ErrNotFound) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Restore of a missing archive = %v, want ErrNotFound", err)
	}
	if err := Restore(dst+".tmp", restored, 0); !errors.Is(err, ErrBadArchive) {
		t.Errorf("Restore of a half-written archive = %v, want ErrBadArchive", err)
	}
	if names := entries(t, restored); len(names) != 0 {
		t.Errorf("a failed Restore left %v", names)
	}
	if _, err := Archive(w, dst, 0); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, raw) {
		t.Error("Archive after a crash did not produce the whole archive")
	}
	if _, err := os.Lstat(dst + ".tmp"); err == nil {
		t.Error("the stale .tmp survived")
	}
}

// Every truncation of an archive is refused, including one cut exactly at
// an entry boundary, which archive/tar alone takes for a complete archive.
func TestRestoreTruncated(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	writeFile(t, filepath.Join(ws, "a"), strings.Repeat("a", 700))
	writeFile(t, filepath.Join(ws, "b/c"), "c")
	// Last in the archive, 2 KiB of zeros: a cut right after it ends in
	// zeros too, and must still be refused.
	writeFile(t, filepath.Join(ws, "b/z"), string(make([]byte, 2048)))
	w := openWS(t, ws, 0, resolver{"default", haveOpenat2()})
	full := filepath.Join(root, "full.tar")
	if _, err := Archive(w, full, 0); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(full)
	for cut := 0; cut < len(raw); cut += 128 {
		p := filepath.Join(root, "cut.tar")
		if err := os.WriteFile(p, raw[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(root, "r")
		_ = os.RemoveAll(dir)
		mkdir(t, dir)
		if err := Restore(p, dir, 0); !errors.Is(err, ErrBadArchive) {
			t.Errorf("archive cut at %d of %d bytes: Restore = %v, want ErrBadArchive", cut, len(raw), err)
		}
		if names := entries(t, dir); len(names) != 0 {
			t.Errorf("cut at %d: a failed Restore left %v", cut, names)
		}
	}
}

func TestRestoreRefusesMaliciousArchives(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	file := func(name, content string) tarEntry {
		return tarEntry{tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644}, []byte(content)}
	}
	dir := func(name string) tarEntry {
		return tarEntry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755}}
	}
	link := func(name, target string) tarEntry {
		return tarEntry{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777}}
	}
	// "{outside}" in a symlink target is replaced with the outside dir.
	tests := []struct {
		name    string
		entries []tarEntry
		quota   int64
		want    error
	}{
		{"dotdot entry", []tarEntry{file("ok", "ok"), file("../evil", "x")}, 0, ErrEscape},
		{"dotdot inside entry", []tarEntry{dir("a/"), file("a/../../evil", "x")}, 0, ErrEscape},
		{"absolute entry", []tarEntry{file("/tmp/evil", "x")}, 0, ErrEscape},
		{"dotdot directory", []tarEntry{dir("../evil/")}, 0, ErrEscape},
		{"file through a symlink made by an earlier entry", []tarEntry{link("l", "{outside}"), file("l/evil", "x")}, 0, ErrEscape},
		{"relative symlink then write through it", []tarEntry{link("l", "../outside"), file("l/evil", "x")}, 0, ErrEscape},
		{"directory through a symlink", []tarEntry{link("l", "{outside}"), dir("l/evil/")}, 0, ErrEscape},
		{"deep write through a symlink", []tarEntry{dir("a/"), link("a/l", "{outside}"), file("a/l/sub/evil", "x")}, 0, ErrEscape},
		{"symlink then a file of the same name", []tarEntry{link("l", "{outside}/evil"), file("l", "x")}, 0, ErrBadArchive},
		{"symlink then a directory of the same name", []tarEntry{link("l", "{outside}"), dir("l/")}, 0, ErrBadArchive},
		{"symlink then a directory below it", []tarEntry{link("l", "{outside}"), dir("l/sub/"), file("l/sub/evil", "x")}, 0, ErrEscape},
		{"duplicate file", []tarEntry{file("f", "1"), file("f", "2")}, 0, ErrBadArchive},
		{"hard link entry", []tarEntry{file("f", "1"), {hdr: tar.Header{Typeflag: tar.TypeLink, Name: "h", Linkname: "f"}}}, 0, ErrBadArchive},
		{"hard link to outside", []tarEntry{{hdr: tar.Header{Typeflag: tar.TypeLink, Name: "h", Linkname: "{outside}/outside-secret.txt"}}}, 0, ErrBadArchive},
		{"character device", []tarEntry{{hdr: tar.Header{Typeflag: tar.TypeChar, Name: "zero", Devmajor: 1, Devminor: 5, Mode: 0o666}}}, 0, ErrBadArchive},
		{"fifo", []tarEntry{{hdr: tar.Header{Typeflag: tar.TypeFifo, Name: "p", Mode: 0o666}}}, 0, ErrBadArchive},
		{"over the quota", []tarEntry{file("a", strings.Repeat("a", 60)), file("b", strings.Repeat("b", 41))}, 100, ErrQuota},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			outside := filepath.Join(root, "outside")
			writeFile(t, filepath.Join(outside, "outside-secret.txt"), secretContent)
			guardOutside(t, outside)
			var es []tarEntry
			for _, e := range tt.entries {
				e.hdr.Linkname = strings.ReplaceAll(e.hdr.Linkname, "{outside}", outside)
				es = append(es, e)
			}
			src := filepath.Join(root, "evil.tar")
			writeTar(t, src, es)
			ws := filepath.Join(root, "ws")
			mkdir(t, ws)
			if err := Restore(src, ws, tt.quota); !errors.Is(err, tt.want) {
				t.Fatalf("Restore = %v, want %v", err, tt.want)
			}
			if names := entries(t, ws); len(names) != 0 {
				t.Errorf("a refused Restore left %v", names)
			}
			if _, err := os.Lstat(filepath.Join(root, "evil")); err == nil {
				t.Error("Restore wrote next to the workspace")
			}
		})
	}
}

func TestRestoreNeedsEmptyDir(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	writeFile(t, filepath.Join(ws, "f"), "x")
	w := openWS(t, ws, 0, resolver{"default", haveOpenat2()})
	dst := filepath.Join(root, "a.tar")
	if _, err := Archive(w, dst, 0); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(root, "target")
	writeFile(t, filepath.Join(target, "existing"), "keep me")
	if err := Restore(dst, target, 0); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("Restore into a non-empty dir = %v, want ErrNotEmpty", err)
	}
	if got := readFile(t, filepath.Join(target, "existing")); got != "keep me" {
		t.Error("a refused Restore changed the directory")
	}
	if err := Restore(dst, filepath.Join(root, "missing"), 0); err == nil {
		t.Error("Restore into a missing dir succeeded")
	}
}

func TestRestoreCleanupAfterModes(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	root := t.TempDir()
	es := []tarEntry{
		{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "locked/", Mode: 0o500}},
		{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "locked/f", Mode: 0o400}, content: []byte("x")},
		{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "../evil", Mode: 0o644}, content: []byte("x")},
	}
	src := filepath.Join(root, "a.tar")
	writeTar(t, src, es)
	ws := filepath.Join(root, "ws")
	mkdir(t, ws)
	if err := Restore(src, ws, 0); !errors.Is(err, ErrEscape) {
		t.Fatalf("Restore = %v, want ErrEscape", err)
	}
	if names := entries(t, ws); len(names) != 0 {
		t.Errorf("left %v", names)
	}
	// Without the bad entry the modes are applied.
	writeTar(t, src, es[:2])
	if err := Restore(src, ws, 0); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(ws, "locked"), &st); err != nil || st.Mode&0o777 != 0o500 {
		t.Errorf("locked: mode %o, %v", st.Mode&0o777, err)
	}
	_ = os.Chmod(filepath.Join(ws, "locked"), 0o700) // let t.TempDir clean up as non-root
}

// Restore keeps permission bits only: no setuid, setgid or sticky bit from
// an archive ever reaches the host.
func TestRestoreDropsSpecialModeBits(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	root := t.TempDir()
	src := filepath.Join(root, "a.tar")
	writeTar(t, src, []tarEntry{
		{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "d/", Mode: 0o3777}},
		{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "d/suid", Mode: 0o4755}, content: []byte("#!/bin/sh\n")},
		{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "sgid", Mode: 0o2755}, content: []byte("x")},
	})
	ws := filepath.Join(root, "ws")
	mkdir(t, ws)
	if err := Restore(src, ws, 0); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]uint32{"d": 0o777, "d/suid": 0o755, "sgid": 0o755} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(ws, p), &st); err != nil {
			t.Fatal(err)
		}
		if got := st.Mode & 0o7777; got != want {
			t.Errorf("%s: mode %o, want %o", p, got, want)
		}
	}
}
