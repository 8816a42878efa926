package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// permTrap is a permission trap the payload can set in its own workspace:
// modes that deny the supervisor's uid (the payload's files belong to that
// same uid on the host, so the payload can chmod them at will).
type permTrap struct {
	name  string
	plant func(t *testing.T, ws string)
	path  string // aimed at by Put, Open and Delete
	// Wanted results; nil means success.
	put, open, del, list, usage, collect, archive error
	// notCollected must not be among Collect's artifacts.
	notCollected string
}

var permTraps = []permTrap{
	{
		name: "directory of mode 000 as a component",
		plant: func(t *testing.T, ws string) {
			writeFile(t, filepath.Join(ws, "d/t.txt"), "inside")
			chmod(t, filepath.Join(ws, "d"), 0o000)
		},
		path: "d/t.txt",
		put:  ErrPermission, open: ErrPermission, del: ErrPermission,
		list: ErrPermission, usage: ErrPermission, collect: ErrPermission, archive: ErrPermission,
	},
	{
		// Both resolvers open every directory on the path for reading,
		// so a directory that can only be searched stops them too.
		name: "search-only directory (0100) as a component",
		plant: func(t *testing.T, ws string) {
			writeFile(t, filepath.Join(ws, "d/t.txt"), "inside")
			chmod(t, filepath.Join(ws, "d"), 0o100)
		},
		path: "d/t.txt",
		put:  ErrPermission, open: ErrPermission, del: ErrPermission,
		list: ErrPermission, usage: ErrPermission, collect: ErrPermission, archive: ErrPermission,
	},
	{
		name: "read-only directory (0500) as the parent",
		plant: func(t *testing.T, ws string) {
			writeFile(t, filepath.Join(ws, "d/t.txt"), "inside")
			chmod(t, filepath.Join(ws, "d"), 0o500)
		},
		path: "d/t.txt",
		put:  ErrPermission, open: nil, del: ErrPermission,
	},
	{
		name: "file of mode 000 at the target",
		plant: func(t *testing.T, ws string) {
			writeFile(t, filepath.Join(ws, "t.txt"), "inside")
			chmod(t, filepath.Join(ws, "t.txt"), 0o000)
		},
		path: "t.txt",
		// Put replaces the name with a new inode; Delete removes the name;
		// Collect skips what it cannot read (artifacts are best effort);
		// an archive that would silently miss a file fails instead.
		put: nil, open: ErrPermission, del: nil,
		archive: ErrPermission, notCollected: "t.txt",
	},
}

func chmod(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// TestPermissionTraps: every operation on a workspace whose payload set a
// permission trap answers within its deadline with the wanted error (a 403
// for ErrPermission, never a 500 or a hang), touches nothing outside, reads
// no outside byte and leaves no temporary upload file. Run as uid 65534:
// as root none of these traps would fire.
func TestPermissionTraps(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	// The traps only mean something where permissions are enforced.
	probe := filepath.Join(t.TempDir(), "probe")
	writeFile(t, probe, "x")
	chmod(t, probe, 0o000)
	if _, err := os.ReadFile(probe); err == nil {
		t.Fatalf("uid %d reads a file of mode 000: permissions are not enforced, the traps below prove nothing", os.Geteuid())
	}
	forEachResolver(t, func(t *testing.T, r resolver) {
		for _, tr := range permTraps {
			t.Run(tr.name, func(t *testing.T) {
				for _, op := range []string{"Put", "Open", "Delete", "List", "Usage", "Collect", "Archive"} {
					t.Run(op, func(t *testing.T) {
						e := newAttackEnv(t, r)
						tr.plant(t, e.ws)
						// Give the owner its permissions back before the
						// temporary directory is removed.
						t.Cleanup(func() { restoreModes(e.ws) })
						within(t, 10*time.Second, op, func() { runPermOp(t, e, tr, op) })
						noTemps(t, e.ws)
					})
				}
			})
		}
	})
}

func runPermOp(t *testing.T, e *attackEnv, tr permTrap, op string) {
	var err, want error
	switch op {
	case "Put":
		_, _, err = e.w.Put(tr.path, strings.NewReader("UPLOADED"), 0)
		want = tr.put
	case "Open":
		var f *os.File
		f, _, err = e.w.Open(tr.path)
		if f != nil {
			f.Close()
		}
		want = tr.open
	case "Delete":
		err, want = e.w.Delete(tr.path), tr.del
	case "List":
		_, err = e.w.List()
		want = tr.list
	case "Usage":
		_, err = e.w.Usage()
		want = tr.usage
	case "Collect":
		var arts []Artifact
		arts, _, err = e.w.Collect([]string{"*", "*/*"}, ArtifactLimits{})
		for _, a := range arts {
			checkNoSecret(t, "Collect "+a.Path, []byte(a.ContentBase64))
			if a.Path == tr.notCollected {
				t.Errorf("Collect returned the unreadable %q", a.Path)
			}
		}
		want = tr.collect
	case "Archive":
		_, err = Archive(e.w, filepath.Join(e.root, "archive.tar"), 1<<20)
		want = tr.archive
	}
	t.Logf("%s(%q): %v", op, tr.path, err)
	if !isErr(err, want) {
		t.Fatalf("%s(%q) = %v, want %v", op, tr.path, err, want)
	}
}

// restoreModes makes every directory and file below dir accessible to its
// owner again. WalkDir calls fn for a directory before it reads it, so the
// chmod comes first.
func restoreModes(dir string) {
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, _ error) error {
		if d != nil && d.Type()&os.ModeSymlink == 0 {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
}
