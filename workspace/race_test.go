package workspace

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// raceIterations is how many times each race test runs its set of
// operations, per resolver, while a goroutine keeps swapping a path between
// a real entry and an attack.
const raceIterations = 2000

// opDeadline bounds one iteration of a race test: a blocked operation (an
// open that waits on a FIFO, say) fails the test instead of hanging it.
const opDeadline = 30 * time.Second

// raceEnv is a workspace and an outside directory holding a victim file
// (secret content: reading it is a leak, changing it is a write through),
// a marker whose name must never show up in a listing, and a file shared
// through a hard link.
type raceEnv struct {
	root, ws, outside string
	w                 *Workspace
}

func newRaceEnv(t *testing.T, r resolver) *raceEnv {
	t.Helper()
	root := t.TempDir()
	e := &raceEnv{root: root, ws: filepath.Join(root, "ws"), outside: filepath.Join(root, "outside")}
	mkdir(t, e.ws)
	writeFile(t, filepath.Join(e.outside, "victim.txt"), secretContent)
	writeFile(t, filepath.Join(e.outside, "outside-only-marker"), secretContent)
	writeFile(t, filepath.Join(e.outside, "sub/victim.txt"), secretContent)
	writeFile(t, filepath.Join(e.outside, "shared.txt"), sharedContent)
	guardOutside(t, e.outside)
	guardAtimes(t, e.outside, "victim.txt", "outside-only-marker", "sub/victim.txt", "sub", ".")
	e.w = openWS(t, e.ws, 1<<30, r)
	return e
}

// guardAtimes proves no byte of the named entries below dir was read (and
// no listed directory was read): it backdates their access times and checks
// at the end of the test that they did not move. ext4 with relatime, like
// most filesystems, updates an access time older than the modification time
// on the first read; where the filesystem does not (noatime), the check is
// reported as unavailable and only the content checks remain.
func guardAtimes(t *testing.T, dir string, names ...string) {
	t.Helper()
	old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	later := old.Add(24 * time.Hour)
	probe := filepath.Join(t.TempDir(), "probe")
	writeFile(t, probe, "probe")
	if err := os.Chtimes(probe, old, later); err != nil {
		t.Fatal(err)
	}
	_ = readFile(t, probe)
	if atime(t, probe).Equal(old) {
		t.Log("this filesystem does not update access times: the no-read check rests on content checks alone")
		return
	}
	for _, n := range names {
		if err := os.Chtimes(filepath.Join(dir, n), old, later); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, n := range names {
			if a := atime(t, filepath.Join(dir, n)); !a.Equal(old) {
				t.Errorf("%s was read during the test (access time moved to %v)", filepath.Join(dir, n), a)
			}
		}
	})
}

func atime(t *testing.T, p string) time.Time {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return time.Unix(int64(st.Atim.Sec), int64(st.Atim.Nsec)).UTC()
}

// tally counts the outcomes of the racing operations.
type tally struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *tally) add(op string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]int{}
	}
	outcome := "ok"
	switch {
	case err == nil:
	case errors.Is(err, ErrNotRegular):
		outcome = "not-regular"
	case errors.Is(err, ErrEscape):
		outcome = "escape"
	case errors.Is(err, ErrNotFound):
		outcome = "not-found"
	default:
		outcome = "other"
	}
	c.m[op+" "+outcome]++
}

func (c *tally) get(k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

// swapper runs step in a loop on its own goroutine until the test's
// operations are done; it returns a stop function that reports how many
// swaps were made.
func swapper(t *testing.T, step func(i int) error) (stop func() int64) {
	var n atomic.Int64
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-quit:
				return
			default:
			}
			if err := step(i); err != nil {
				t.Errorf("swapper: %v", err)
				return
			}
			n.Add(1)
		}
	}()
	return func() int64 {
		close(quit)
		<-done
		return n.Load()
	}
}

// TestRaceSwapDirectory: a goroutine swaps ws/d, atomically
// (renameat2 RENAME_EXCHANGE), between a real directory and a symlink to the
// outside directory, without pause, while raceIterations times the test
// overwrites d/victim.txt, creates d/new-N.txt, opens and reads
// d/victim.txt, collects d/* and */*, lists the workspace, and deletes
// d/victim.txt. Not a byte of outside may be read (content and access
// time checks) or written (the outside tree is compared entry by entry and
// no file may appear in it).
func TestRaceSwapDirectory(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	forEachResolver(t, func(t *testing.T, r resolver) {
		e := newRaceEnv(t, r)
		writeFile(t, filepath.Join(e.ws, "d/victim.txt"), "inside")
		symlink(t, e.outside, filepath.Join(e.ws, "d.alt"))
		d, alt := filepath.Join(e.ws, "d"), filepath.Join(e.ws, "d.alt")
		stop := swapper(t, func(int) error {
			return unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, alt, unix.RENAME_EXCHANGE)
		})
		var c tally
		for i := 0; i < raceIterations && !t.Failed(); i++ {
			within(t, opDeadline, fmt.Sprintf("iteration %d of the racing operations", i), func() {
				_, _, err := e.w.Put("d/victim.txt", strings.NewReader(fmt.Sprint("inside ", i)), 0)
				c.add("put-replace", err)
				_, _, err = e.w.Put(fmt.Sprintf("d/new-%d.txt", i%50), strings.NewReader("new"), 0)
				c.add("put-create", err)

				f, _, err := e.w.Open("d/victim.txt")
				c.add("open", err)
				if err == nil {
					b, _ := io.ReadAll(f)
					f.Close()
					checkNoSecret(t, "Open", b)
				}

				arts, _, err := e.w.Collect([]string{"d/*", "*/*"}, ArtifactLimits{})
				c.add("collect", err)
				for _, a := range arts {
					b, _ := base64.StdEncoding.DecodeString(a.ContentBase64)
					checkNoSecret(t, "Collect "+a.Path, b)
				}

				list, err := e.w.List()
				c.add("list", err)
				for _, fi := range list {
					// d and d.alt trade names, so the real directory shows
					// up under either; the outside names never may.
					if strings.Contains(fi.Path, "outside-only-marker") || strings.Contains(fi.Path, "shared.txt") || strings.Contains(fi.Path, "/sub") {
						t.Errorf("List shows %q: it walked outside", fi.Path)
					}
				}

				if i%2 == 1 {
					c.add("delete", e.w.Delete("d/victim.txt"))
				}
			})
		}
		swaps := stop()
		t.Logf("%d swaps; outcomes %v", swaps, c.m)
		checkRaced(t, swaps, &c, "open", "put-replace", "put-create", "collect")
		if c.get("collect other")+c.get("list other")+c.get("open other")+c.get("put-replace other")+c.get("put-create other") > 0 {
			t.Errorf("unexpected errors: %v", c.m)
		}
		checkNoWorkspaceDamage(t, e)
	})
}

// TestRaceSwapFile: a goroutine keeps replacing ws/t.txt (rename over it,
// atomic) with, in turn, a regular file, a symlink to the outside victim, a
// hard link to an outside file, and a FIFO, while raceIterations times the
// test uploads to t.txt, opens and reads it, collects it, lists the
// workspace, and (every tenth time) archives the workspace. No operation
// may block on the FIFO, read the victim, or write into the hard-linked
// inode.
func TestRaceSwapFile(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	forEachResolver(t, func(t *testing.T, r resolver) {
		e := newRaceEnv(t, r)
		tmp := filepath.Join(e.ws, ".swap-tmp")
		target := filepath.Join(e.ws, "t.txt")
		stop := swapper(t, func(i int) error {
			var err error
			switch i % 4 {
			case 0:
				err = os.WriteFile(tmp, []byte("inside"), 0o644)
			case 1:
				err = os.Symlink(filepath.Join(e.outside, "victim.txt"), tmp)
			case 2:
				err = os.Link(filepath.Join(e.outside, "shared.txt"), tmp)
			case 3:
				err = unix.Mkfifo(tmp, 0o644)
			}
			if err != nil {
				return err
			}
			return os.Rename(tmp, target)
		})
		var c tally
		archive := filepath.Join(e.root, "a.tar")
		for i := 0; i < raceIterations && !t.Failed(); i++ {
			within(t, opDeadline, fmt.Sprintf("iteration %d of the racing operations (a FIFO blocked one?)", i), func() {
				_, _, err := e.w.Put("t.txt", strings.NewReader("uploaded"), 0)
				c.add("put", err)

				f, _, err := e.w.Open("t.txt")
				c.add("open", err)
				if err == nil {
					b, _ := io.ReadAll(f)
					f.Close()
					checkNoSecret(t, "Open", b)
					switch string(b) {
					case "inside", "uploaded", sharedContent:
					default:
						t.Errorf("Open read %q", b)
					}
				}

				arts, _, err := e.w.Collect([]string{"t.txt"}, ArtifactLimits{})
				c.add("collect", err)
				for _, a := range arts {
					b, _ := base64.StdEncoding.DecodeString(a.ContentBase64)
					checkNoSecret(t, "Collect", b)
				}

				_, err = e.w.List()
				c.add("list", err)

				if i%10 == 0 {
					_, err := Archive(e.w, archive, 1<<20)
					c.add("archive", err)
					if err == nil {
						raw, _ := os.ReadFile(archive)
						checkNoSecret(t, "Archive", raw)
					}
				}
			})
		}
		swaps := stop()
		t.Logf("%d swaps; outcomes %v", swaps, c.m)
		checkRaced(t, swaps, &c, "open", "put", "collect")
		for _, op := range []string{"put", "open", "collect", "list", "archive"} {
			if n := c.get(op + " other"); n > 0 {
				t.Errorf("%s failed %d times with an unexpected error", op, n)
			}
		}
	})
}

// checkRaced fails when the race did not happen: too few swaps, or an
// operation that never met both sides of the swap.
func checkRaced(t *testing.T, swaps int64, c *tally, ops ...string) {
	t.Helper()
	if swaps < 100 {
		t.Errorf("only %d swaps: the race was not exercised", swaps)
	}
	sawOK, sawRefusal := false, false
	for _, op := range ops {
		sawOK = sawOK || c.get(op+" ok") > 0
		sawRefusal = sawRefusal || c.get(op+" escape")+c.get(op+" not-regular")+c.get(op+" not-found") > 0
	}
	if !sawOK || !sawRefusal {
		t.Errorf("the operations never met one side of the swap (ok seen: %v, refusal seen: %v): %v", sawOK, sawRefusal, c.m)
	}
}

// checkNoWorkspaceDamage: after the race, the workspace is still usable and
// its own files are intact.
func checkNoWorkspaceDamage(t *testing.T, e *raceEnv) {
	t.Helper()
	if _, _, err := e.w.Put("after.txt", strings.NewReader("fine"), 0); err != nil {
		t.Errorf("Put after the race: %v", err)
	}
	noTemps(t, e.ws)
}
