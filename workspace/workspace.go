package workspace

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/api"
)

// MaxEntries bounds every walk of the workspace (List, Usage, Collect,
// Sweep, Archive) and every Restore.
const MaxEntries = 100000

// Workspace is one workspace directory, held open by a descriptor for its
// whole life: renaming or replacing the path given to Open afterwards does
// not move a Workspace. Its methods are safe for concurrent use.
type Workspace struct {
	dir   string
	quota int64

	// useOpenat2 selects the resolver (tests force the fallback).
	useOpenat2 bool
	// maxEntries is MaxEntries; tests lower it.
	maxEntries int

	// putMu serialises the operations that change what the quota counts
	// (Put, Sweep, Archive's snapshot), so two uploads cannot spend the
	// same free space.
	putMu sync.Mutex
	// mu guards fd against Close: operations hold it for reading.
	mu     sync.RWMutex
	fd     int
	closed bool
}

// FileInfo describes one entry of the workspace, in the file listing's
// wire form.
type FileInfo = api.FileInfo

// Open opens the workspace directory dir (which must exist, and must not
// itself be a symlink). quotaBytes <= 0 means no quota.
func Open(dir string, quotaBytes int64) (*Workspace, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("workspace: open %q: %w", dir, err)
	}
	if quotaBytes < 0 {
		quotaBytes = 0
	}
	return &Workspace{
		dir:        dir,
		quota:      quotaBytes,
		useOpenat2: haveOpenat2(),
		maxEntries: MaxEntries,
		fd:         fd,
	}, nil
}

// Dir returns the path the workspace was opened with.
func (w *Workspace) Dir() string { return w.dir }

// Quota returns the quota in bytes, 0 for none.
func (w *Workspace) Quota() int64 { return w.quota }

// Close releases the directory descriptor; it waits for running operations.
// Files returned by Open stay usable.
func (w *Workspace) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	return unix.Close(w.fd)
}

// use takes the read lock for an operation; the caller must call done.
func (w *Workspace) use() error {
	w.mu.RLock()
	if w.closed {
		w.mu.RUnlock()
		return ErrClosed
	}
	return nil
}

func (w *Workspace) done() { w.mu.RUnlock() }

// Put stores the bytes of r at path, replacing a regular file there, and
// returns the size and the hex sha256 of what it wrote.
//
// It creates missing parent directories (0700) without ever traversing a
// symlink, streams r into a new temporary file (O_EXCL, 0600) in the
// target's directory, enforcing maxBytes (ErrTooLarge; <= 0 means no limit)
// and the quota (ErrQuota), fsyncs it, renames it over the target relative
// to the directory descriptor, and fsyncs the directory. On any error the
// temporary file is removed and the target is untouched. A symlink at the
// target gives ErrEscape; a directory, FIFO, socket or device gives
// ErrNotRegular; a hard link is replaced, never written through.
func (w *Workspace) Put(path string, r io.Reader, maxBytes int64) (size int64, sha256hex string, err error) {
	if err := ValidatePath(path); err != nil {
		return 0, "", err
	}
	w.putMu.Lock()
	defer w.putMu.Unlock()
	if err := w.use(); err != nil {
		return 0, "", err
	}
	defer w.done()

	dir, base := splitPath(path)
	pfd, err := w.mkdirAll(dir)
	if err != nil {
		return 0, "", pathErr("put", path, err)
	}
	defer unix.Close(pfd)
	replaced, err := checkPutTarget(pfd, path, base)
	if err != nil {
		return 0, "", err
	}
	room, err := w.room(replaced)
	if err != nil {
		return 0, "", err
	}
	f, tmp, err := createTemp(pfd)
	if err != nil {
		return 0, "", pathErr("put", path, err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = f.Close()
			_ = unix.Unlinkat(pfd, tmp, 0)
		}
	}()
	size, sum, err := w.copyUpload(f, r, path, maxBytes, room)
	if err != nil {
		return 0, "", err
	}
	if err := commitUpload(pfd, tmp, base, path); err != nil {
		return 0, "", err
	}
	committed = true
	_ = f.Close()
	if err := unix.Fsync(pfd); err != nil {
		return 0, "", pathErr("put", path, err)
	}
	return size, sum, nil
}

// checkPutTarget looks at what is at base in the directory pfd now and
// returns the bytes an upload there frees from the quota: a regular file's
// size (0 for a hard link: its inode stays), nothing is no file. A
// symlink is ErrEscape, anything else ErrNotRegular.
func checkPutTarget(pfd int, path, base string) (replaced int64, err error) {
	var st unix.Stat_t
	switch err := lstatAt(pfd, base, &st); {
	case err == nil:
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			if uint64(st.Nlink) == 1 {
				replaced = st.Size
			}
		case unix.S_IFLNK:
			return 0, fmt.Errorf("workspace: put %q: the target is a symlink: %w", path, ErrEscape)
		default:
			return 0, fmt.Errorf("workspace: put %q: the target is a %s: %w", path, kindOf(st.Mode), ErrNotRegular)
		}
	case errors.Is(err, unix.ENOENT):
	default:
		return 0, pathErr("put", path, err)
	}
	return replaced, nil
}

// room is how many bytes an upload replacing a file of replaced bytes may
// write before the quota is reached (no quota: no bound).
func (w *Workspace) room(replaced int64) (int64, error) {
	if w.quota <= 0 {
		return math.MaxInt64, nil
	}
	used, err := w.usage()
	if err != nil {
		return 0, err
	}
	return w.quota - used + replaced, nil
}

// copyUpload streams r into f, stopping at maxBytes (ErrTooLarge) and at
// room (ErrQuota), and fsyncs f; it returns the size and hex sha256.
func (w *Workspace) copyUpload(f *os.File, r io.Reader, path string, maxBytes, room int64) (int64, string, error) {
	var size int64
	h := sha256.New()
	buf := make([]byte, 64<<10)
	for {
		k, rerr := r.Read(buf)
		if k > 0 {
			size += int64(k)
			if maxBytes > 0 && size > maxBytes {
				return 0, "", fmt.Errorf("workspace: put %q: more than %d bytes: %w", path, maxBytes, ErrTooLarge)
			}
			if size > room {
				return 0, "", fmt.Errorf("workspace: put %q: %w (quota %d bytes)", path, ErrQuota, w.quota)
			}
			if _, err := f.Write(buf[:k]); err != nil {
				return 0, "", pathErr("put", path, err)
			}
			h.Write(buf[:k])
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return 0, "", fmt.Errorf("workspace: put %q: reading the upload: %w", path, rerr)
		}
	}
	if size > room { // an empty upload into an already overfull workspace
		return 0, "", fmt.Errorf("workspace: put %q: %w (quota %d bytes)", path, ErrQuota, w.quota)
	}
	if err := f.Sync(); err != nil {
		return 0, "", pathErr("put", path, err)
	}
	return size, hex.EncodeToString(h.Sum(nil)), nil
}

// commitUpload renames the temporary file tmp over base in pfd. The rename
// replaces the directory entry, whatever the payload put there meanwhile
// (a symlink included): it never writes through it.
func commitUpload(pfd int, tmp, base, path string) error {
	if err := unix.Renameat(pfd, tmp, pfd, base); err != nil {
		if err == unix.EISDIR || err == unix.ENOTEMPTY || err == unix.EEXIST {
			return fmt.Errorf("workspace: put %q: the target is a directory: %w", path, ErrNotRegular)
		}
		return pathErr("put", path, err)
	}
	return nil
}

// createTemp creates a new temporary upload file in dirfd.
func createTemp(dirfd int) (*os.File, string, error) {
	for attempt := 0; ; attempt++ {
		var b [12]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, "", err
		}
		name := TempPrefix + hex.EncodeToString(b[:])
		fd, err := unix.Openat(dirfd, name,
			unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err == unix.EEXIST && attempt < 8 {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		return os.NewFile(uintptr(fd), name), name, nil
	}
}

// Open opens the regular file at path for reading. The last component is
// checked with fstatat before the open and the descriptor with fstat after
// it; anything but a regular file (symlink: ErrEscape; FIFO, socket,
// device, directory: ErrNotRegular) is refused, and a FIFO swapped in
// between is opened O_NONBLOCK so it cannot block. The returned file does
// not depend on w.
func (w *Workspace) Open(path string) (*os.File, FileInfo, error) {
	if err := ValidatePath(path); err != nil {
		return nil, FileInfo{}, err
	}
	if err := w.use(); err != nil {
		return nil, FileInfo{}, err
	}
	defer w.done()
	f, st, err := w.openRegular(path)
	if err != nil {
		return nil, FileInfo{}, err
	}
	return f, infoOf(path, &st), nil
}

// openRegular opens the regular file rel (any relative path of real
// components; not necessarily one ValidatePath accepts, since Collect opens
// names the payload chose) for reading.
func (w *Workspace) openRegular(rel string) (*os.File, unix.Stat_t, error) {
	var st unix.Stat_t
	dir, base := splitPath(rel)
	pfd, err := w.openDir(dir)
	if err != nil {
		return nil, st, pathErr("open", rel, err)
	}
	defer unix.Close(pfd)
	if err := lstatAt(pfd, base, &st); err != nil {
		return nil, st, pathErr("open", rel, err)
	}
	if err := needRegular(rel, st.Mode); err != nil {
		return nil, st, err
	}
	fd, err := w.openat(pfd, base, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, st, pathErr("open", rel, err)
	}
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return nil, st, pathErr("open", rel, err)
	}
	if err := needRegular(rel, st.Mode); err != nil {
		_ = unix.Close(fd)
		return nil, st, err
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		_ = unix.Close(fd)
		return nil, st, pathErr("open", rel, err)
	}
	return os.NewFile(uintptr(fd), rel), st, nil
}

func needRegular(rel string, mode uint32) error {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return nil
	case unix.S_IFLNK:
		return fmt.Errorf("workspace: %q is a symlink: %w", rel, ErrEscape)
	default:
		return fmt.Errorf("workspace: %q is a %s: %w", rel, kindOf(mode), ErrNotRegular)
	}
}

// Delete removes the entry at path: a regular file, a symlink (the link
// itself, never its target), a FIFO, a socket, or an empty directory (a
// non-empty one gives ErrNotEmpty). Intermediate components are resolved
// without following symlinks (ErrEscape).
func (w *Workspace) Delete(path string) error {
	if err := ValidatePath(path); err != nil {
		return err
	}
	if err := w.use(); err != nil {
		return err
	}
	defer w.done()
	dir, base := splitPath(path)
	pfd, err := w.openDir(dir)
	if err != nil {
		return pathErr("delete", path, err)
	}
	defer unix.Close(pfd)
	err = unix.Unlinkat(pfd, base, 0)
	if errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EPERM) {
		err = unix.Unlinkat(pfd, base, unix.AT_REMOVEDIR)
		if errors.Is(err, unix.EEXIST) || errors.Is(err, unix.ENOTEMPTY) {
			return fmt.Errorf("workspace: delete %q: %w", path, ErrNotEmpty)
		}
	}
	if err != nil {
		return pathErr("delete", path, err)
	}
	_ = unix.Fsync(pfd)
	return nil
}

// kindOf names the file type in a stat mode.
func kindOf(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "regular file"
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFLNK:
		return "symlink"
	case unix.S_IFIFO:
		return "FIFO"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	}
	return "file of unknown type"
}

// fileMode converts a stat mode to an fs.FileMode.
func fileMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	}
	if m&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

func mtimeOf(st *unix.Stat_t) time.Time {
	return time.Unix(int64(st.Mtim.Sec), int64(st.Mtim.Nsec)).UTC()
}

func infoOf(rel string, st *unix.Stat_t) FileInfo {
	size := st.Size
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		size = 0
	}
	return FileInfo{Path: rel, Size: size, Mode: fileMode(st.Mode).String(), ModifiedAt: mtimeOf(st)}
}
