package workspace

import (
	"archive/tar"
	"bytes"
	"encoding/base64"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Every attack aims at files the test creates in its own temporary
// directories, never at a real host path: run against a broken
// implementation, these tests must damage nothing but themselves.
//
// Content of the files outside the workspace. Any of these bytes in what an
// operation returns means it read outside; the hard-link file is the
// exception a hard link legitimately exposes (see the package doc).
const (
	secretContent = "OUTSIDE-SECRET: another session's data / the host's /etc/passwd"
	sharedContent = "SHARED-VIA-HARDLINK: an inode the payload could already see"
)

// attackEnv is a workspace next to an "outside" directory standing for
// another session's workspace or /etc. Every outside name starts with
// "outside-" so a listing that shows one has walked outside.
type attackEnv struct {
	root, ws, outside string
	w                 *Workspace
}

func newAttackEnv(t *testing.T, r resolver) *attackEnv {
	t.Helper()
	root := t.TempDir()
	e := &attackEnv{root: root, ws: filepath.Join(root, "ws"), outside: filepath.Join(root, "outside")}
	mkdir(t, e.ws)
	writeFile(t, filepath.Join(e.outside, "outside-secret.txt"), secretContent)
	writeFile(t, filepath.Join(e.outside, "outside-sub/outside-inner.txt"), secretContent)
	writeFile(t, filepath.Join(e.outside, "outside-shared.txt"), sharedContent)
	writeFile(t, filepath.Join(e.outside, "outside-root/etc/passwd"), secretContent)
	// The test's Cleanups run last-registered first: the guard must run
	// after the workspace is closed, so register it before openWS.
	guardOutside(t, e.outside)
	e.w = openWS(t, e.ws, 1<<20, r)
	return e
}

// checkNoSecret fails if b holds any outside secret byte sequence.
func checkNoSecret(t *testing.T, what string, b []byte) {
	t.Helper()
	if bytes.Contains(b, []byte("OUTSIDE-SECRET")) {
		t.Errorf("%s returned bytes from outside the workspace", what)
	}
}

type scenario struct {
	name  string
	plant func(t *testing.T, e *attackEnv)
	path  string // what Put, Open and Delete are aimed at
	put   error  // want from Put (nil: success)
	open  error  // want from Open
	del   error  // want from Delete
}

var scenarios = []scenario{
	{
		name: "symlink target absolute",
		plant: func(t *testing.T, e *attackEnv) {
			symlink(t, filepath.Join(e.outside, "outside-secret.txt"), filepath.Join(e.ws, "t.txt"))
		},
		path: "t.txt", put: ErrEscape, open: ErrEscape, del: nil,
	},
	{
		name: "symlink target relative",
		plant: func(t *testing.T, e *attackEnv) {
			symlink(t, "../outside/outside-secret.txt", filepath.Join(e.ws, "t.txt"))
		},
		path: "t.txt", put: ErrEscape, open: ErrEscape, del: nil,
	},
	{
		name: "symlink target dangling outside",
		plant: func(t *testing.T, e *attackEnv) {
			symlink(t, filepath.Join(e.outside, "outside-new.txt"), filepath.Join(e.ws, "t.txt"))
		},
		path: "t.txt", put: ErrEscape, open: ErrEscape, del: nil,
	},
	{
		name: "symlink target inside (still never followed)",
		plant: func(t *testing.T, e *attackEnv) {
			writeFile(t, filepath.Join(e.ws, "real.txt"), "inside")
			symlink(t, "real.txt", filepath.Join(e.ws, "t.txt"))
		},
		path: "t.txt", put: ErrEscape, open: ErrEscape, del: nil,
	},
	{
		name: "symlink directory absolute",
		plant: func(t *testing.T, e *attackEnv) {
			symlink(t, e.outside, filepath.Join(e.ws, "d"))
		},
		path: "d/outside-secret.txt", put: ErrEscape, open: ErrEscape, del: ErrEscape,
	},
	{
		name: "symlink directory relative",
		plant: func(t *testing.T, e *attackEnv) {
			symlink(t, "../outside", filepath.Join(e.ws, "d"))
		},
		path: "d/outside-secret.txt", put: ErrEscape, open: ErrEscape, del: ErrEscape,
	},
	{
		name: "symlink directory, new file",
		plant: func(t *testing.T, e *attackEnv) {
			symlink(t, e.outside, filepath.Join(e.ws, "d"))
		},
		path: "d/outside-new.txt", put: ErrEscape, open: ErrEscape, del: ErrEscape,
	},
	{
		name: "symlink deep directory component",
		plant: func(t *testing.T, e *attackEnv) {
			mkdir(t, filepath.Join(e.ws, "a"))
			symlink(t, e.outside, filepath.Join(e.ws, "a/b"))
		},
		path: "a/b/outside-sub/outside-inner.txt", put: ErrEscape, open: ErrEscape, del: ErrEscape,
	},
	{
		// A stand-in for a symlink to "/": tests never aim a write at a
		// real host path, so a broken implementation damages only the
		// test's own directories.
		name: "symlink to a root-like tree",
		plant: func(t *testing.T, e *attackEnv) {
			symlink(t, filepath.Join(e.outside, "outside-root"), filepath.Join(e.ws, "d"))
		},
		path: "d/etc/passwd", put: ErrEscape, open: ErrEscape, del: ErrEscape,
	},
	{
		name: "hard link to an outside file",
		plant: func(t *testing.T, e *attackEnv) {
			if err := os.Link(filepath.Join(e.outside, "outside-shared.txt"), filepath.Join(e.ws, "t.txt")); err != nil {
				t.Fatal(err)
			}
		},
		// Put replaces the link; Open returns the (visible anyway) content;
		// Delete removes the name only.
		path: "t.txt", put: nil, open: nil, del: nil,
	},
	{
		name:  "fifo at the target",
		plant: func(t *testing.T, e *attackEnv) { mkfifo(t, filepath.Join(e.ws, "t.txt")) },
		path:  "t.txt", put: ErrNotRegular, open: ErrNotRegular, del: nil,
	},
	{
		name:  "fifo as a directory component",
		plant: func(t *testing.T, e *attackEnv) { mkfifo(t, filepath.Join(e.ws, "d")) },
		path:  "d/t.txt", put: ErrNotRegular, open: ErrNotFound, del: ErrNotFound,
	},
	{
		name:  "unix socket at the target",
		plant: func(t *testing.T, e *attackEnv) { mksock(t, filepath.Join(e.ws, "t.txt")) },
		path:  "t.txt", put: ErrNotRegular, open: ErrNotRegular, del: nil,
	},
	{
		name:  "character device at the target",
		plant: func(t *testing.T, e *attackEnv) { plantDevice(t, filepath.Join(e.ws, "t.txt")) },
		path:  "t.txt", put: ErrNotRegular, open: ErrNotRegular, del: nil,
	},
}

// The operations every attack is run against.
var attackOps = []string{"Put", "Open", "Delete", "List", "Collect", "Archive"}

func TestAttacks(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	forEachResolver(t, func(t *testing.T, r resolver) {
		for _, sc := range scenarios {
			t.Run(sc.name, func(t *testing.T) {
				for _, op := range attackOps {
					t.Run(op, func(t *testing.T) {
						e := newAttackEnv(t, r)
						sc.plant(t, e)
						within(t, 10*time.Second, op, func() { runAttackOp(t, e, sc, op) })
					})
				}
			})
		}
	})
}

func runAttackOp(t *testing.T, e *attackEnv, sc scenario, op string) {
	hardLink := strings.HasPrefix(sc.name, "hard link")
	switch op {
	case "Put":
		var before os.FileInfo
		if hardLink {
			before, _ = os.Stat(filepath.Join(e.outside, "outside-shared.txt"))
		}
		_, _, err := e.w.Put(sc.path, strings.NewReader("UPLOADED"), 0)
		if !isErr(err, sc.put) {
			t.Fatalf("Put(%q) = %v, want %v", sc.path, err, sc.put)
		}
		if hardLink {
			fi, err := os.Stat(filepath.Join(e.ws, sc.path))
			if err != nil || os.SameFile(fi, before) {
				t.Fatal("Put wrote into the hard-linked inode instead of replacing the link")
			}
			if got := readFile(t, filepath.Join(e.ws, sc.path)); got != "UPLOADED" {
				t.Errorf("workspace file holds %q", got)
			}
		}
		noTemps(t, e.ws)
	case "Open":
		f, _, err := e.w.Open(sc.path)
		if !isErr(err, sc.open) {
			if f != nil {
				f.Close()
			}
			t.Fatalf("Open(%q) = %v, want %v", sc.path, err, sc.open)
		}
		if f != nil {
			b, _ := io.ReadAll(f)
			f.Close()
			checkNoSecret(t, "Open", b)
			if hardLink && string(b) != sharedContent {
				t.Errorf("Open of a hard link read %q", b)
			}
		}
	case "Delete":
		if err := e.w.Delete(sc.path); !isErr(err, sc.del) {
			t.Fatalf("Delete(%q) = %v, want %v", sc.path, err, sc.del)
		}
	case "List":
		list, err := e.w.List()
		if err != nil {
			t.Fatal(err)
		}
		for _, fi := range list {
			if strings.Contains(fi.Path, "outside-") {
				t.Errorf("List shows %q: it walked outside", fi.Path)
			}
			if lfi, err := os.Lstat(filepath.Join(e.ws, fi.Path)); err == nil && lfi.Mode()&os.ModeSymlink != 0 && fi.Mode[0] != 'L' {
				t.Errorf("List shows the symlink %q as %s", fi.Path, fi.Mode)
			}
		}
	case "Collect":
		pats := []string{"*", "*/*", "*/*/*", "*/*/*/*", sc.path}
		arts, _, err := e.w.Collect(pats, ArtifactLimits{})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range arts {
			b, _ := base64.StdEncoding.DecodeString(a.ContentBase64)
			checkNoSecret(t, "Collect "+a.Path, b)
			if strings.Contains(a.Path, "outside-") {
				t.Errorf("Collect returned %q", a.Path)
			}
			if fi, err := os.Lstat(filepath.Join(e.ws, a.Path)); err != nil || !fi.Mode().IsRegular() {
				t.Errorf("Collect returned %q, which is not a regular file", a.Path)
			}
		}
	case "Archive":
		dst := filepath.Join(e.root, "archive.tar")
		if _, err := Archive(e.w, dst, 1<<20); err != nil {
			t.Fatal(err)
		}
		raw, _ := os.ReadFile(dst)
		checkNoSecret(t, "Archive", raw)
		for _, te := range readTar(t, dst) {
			if strings.Contains(te.hdr.Name, "outside-") {
				t.Errorf("Archive holds %q", te.hdr.Name)
			}
			switch te.hdr.Typeflag {
			case tar.TypeReg, tar.TypeDir, tar.TypeSymlink:
			default:
				t.Errorf("Archive holds %q of type %q", te.hdr.Name, te.hdr.Typeflag)
			}
			fi, err := os.Lstat(filepath.Join(e.ws, te.hdr.Name))
			if err == nil && fi.Mode()&os.ModeSymlink != 0 && te.hdr.Typeflag != tar.TypeSymlink {
				t.Errorf("Archive stored the symlink %q as %q", te.hdr.Name, te.hdr.Typeflag)
			}
		}
		// And restoring it touches nothing outside and follows nothing.
		restored := filepath.Join(e.root, "restored")
		mkdir(t, restored)
		if err := Restore(dst, restored, 0); err != nil {
			t.Fatalf("Restore: %v", err)
		}
		for p, n := range snapshot(t, restored) {
			checkNoSecret(t, "restored "+p, []byte(n.content))
			if orig, err := os.Lstat(filepath.Join(e.ws, p)); err == nil && (orig.Mode()&os.ModeSymlink != 0) != (n.kind == "symlink") {
				t.Errorf("restored %q is a %s, the original a %v", p, n.kind, orig.Mode())
			}
		}
	}
}
