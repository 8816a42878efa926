package workspace

import (
	"archive/tar"
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/internal/atomicfile"
)

// Archive writes a tar of the workspace to dst: directories, regular files
// and symlinks (stored as symlinks, never followed), in walk order (each
// directory before its contents); FIFOs, sockets, devices and temporary
// upload files are left out; a hard-linked file is stored in full under each
// of its names. Modes keep the permission bits only (no setuid, setgid or
// sticky bit); owners are not stored; modification times are kept to the
// nanosecond (PAX).
//
// The tar is written with package atomicfile (dst+".tmp", created 0600 and
// exclusive, a leftover of a crash replaced, fsynced, renamed to dst, whose
// directory is then fsynced): dst is never a partial archive. Over maxBytes (<= 0: no limit) it returns
// ErrTooLarge, removes dst+".tmp" and leaves dst as it was. A regular file
// that shrinks while it is read fails the archive (the workspace should be
// quiet when it is archived). dst is an operator path, not a workspace path:
// it is opened as given. Concurrent Archive calls must not share a dst.
func Archive(w *Workspace, dst string, maxBytes int64) (written int64, err error) {
	var n int64
	err = atomicfile.Write(dst, 0o600, func(f *os.File) error {
		var err error
		n, err = ArchiveTo(w, f, maxBytes)
		return err
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// ArchiveTo writes the tar Archive would write to dst, streamed (never
// held in memory), and returns its size. Over maxBytes (<= 0: no limit) it
// fails with ErrTooLarge after writing at most maxBytes to dst: the caller
// owns dst and must discard what was written on any error (package archive
// does: nothing half-written is ever stored).
func ArchiveTo(w *Workspace, dst io.Writer, maxBytes int64) (int64, error) {
	if maxBytes <= 0 {
		maxBytes = 1<<63 - 1
	}
	w.putMu.Lock()
	defer w.putMu.Unlock()
	if err := w.use(); err != nil {
		return 0, err
	}
	defer w.done()
	used, err := w.usage()
	if err != nil {
		return 0, err
	}
	if used > maxBytes {
		return 0, fmt.Errorf("workspace: archive: %d bytes of files, limit %d: %w", used, maxBytes, ErrTooLarge)
	}
	return w.archiveTo(dst, maxBytes)
}

// archiveTo streams the tar to dst; w.putMu is held and w in use.
func (w *Workspace) archiveTo(dst io.Writer, maxBytes int64) (int64, error) {
	bw := bufio.NewWriterSize(dst, 256<<10)
	cw := &capWriter{w: bw, max: maxBytes}
	tw := tar.NewWriter(cw)
	err := w.walk(func(e *entry) error {
		if isTempName(e.name) {
			return errSkipDir
		}
		return archiveEntry(w, tw, e)
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		if errors.Is(err, ErrTooLarge) {
			return 0, fmt.Errorf("workspace: archive: over %d bytes: %w", maxBytes, ErrTooLarge)
		}
		return 0, fmt.Errorf("workspace: archive: %w", err)
	}
	return cw.n, nil
}

func archiveEntry(w *Workspace, tw *tar.Writer, e *entry) error {
	hdr := &tar.Header{
		Name:    e.rel,
		Mode:    int64(e.st.Mode & 0o777),
		ModTime: mtimeOf(&e.st),
		Format:  tar.FormatPAX,
	}
	switch e.st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		hdr.Typeflag = tar.TypeDir
		hdr.Name += "/"
		return tw.WriteHeader(hdr)
	case unix.S_IFLNK:
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(e.dirfd, e.name, buf)
		if err != nil {
			if vanished(err) || err == unix.EINVAL {
				return nil
			}
			return pathErr("readlink", e.rel, err)
		}
		hdr.Typeflag = tar.TypeSymlink
		hdr.Linkname = string(buf[:n])
		return tw.WriteHeader(hdr)
	case unix.S_IFREG:
		fd, err := w.openat(e.dirfd, e.name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
		if err != nil {
			if vanished(err) || errors.Is(err, unix.ENXIO) {
				return nil
			}
			return pathErr("open", e.rel, err)
		}
		f := os.NewFile(uintptr(fd), e.rel)
		defer f.Close()
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return pathErr("stat", e.rel, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			return nil // swapped for something else under us: skip
		}
		if err := unix.SetNonblock(fd, false); err != nil {
			return pathErr("open", e.rel, err)
		}
		hdr.Typeflag = tar.TypeReg
		hdr.Mode = int64(st.Mode & 0o777)
		hdr.ModTime = mtimeOf(&st)
		hdr.Size = st.Size
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		n, err := io.CopyN(tw, f, st.Size)
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("workspace: %q shrank from %d to %d bytes while being archived", e.rel, st.Size, n)
		}
		return err
	}
	return nil // FIFO, socket, device: not archived
}

// capWriter fails with ErrTooLarge instead of writing past max bytes.
type capWriter struct {
	w   io.Writer
	n   int64
	max int64
}

func (c *capWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > c.max-c.n {
		return 0, ErrTooLarge
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Restore unpacks the archive src (as written by Archive) into dir, which
// must exist and be empty (ErrNotEmpty otherwise). A missing src gives an
// error wrapping ErrNotFound and fs.ErrNotExist.
//
// Every entry is checked before anything is written for it: an absolute
// name or a ".." component gives ErrEscape; an entry below a symlink made
// by an earlier entry gives ErrEscape (the kernel refuses the symlink while
// resolving, so nothing is written through it); an entry type other than
// regular file, directory or symlink, a duplicate name, more than MaxEntries
// entries, or a tar without its end-of-archive marker (a truncated file)
// gives ErrBadArchive; regular files summing past quotaBytes (<= 0: no
// quota) give ErrQuota. Symlinks are created as given, never followed.
// Modes keep the permission bits; directory modes and times are applied
// last, deepest first.
//
// On any error everything Restore created in dir is removed again, so a
// failed restore leaves dir empty, never a partial workspace.
func Restore(src string, dir string, quotaBytes int64) (err error) {
	f, err := os.Open(src)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("workspace: restore: %w (%w)", ErrNotFound, err)
		}
		return fmt.Errorf("workspace: restore: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("workspace: restore: %q is not a regular file: %w", src, ErrBadArchive)
	}
	return RestoreFrom(f, dir, quotaBytes)
}

// RestoreFrom is Restore reading the archive from src (streamed), with the
// same checks and the same all-or-nothing outcome in dir.
func RestoreFrom(src io.Reader, dir string, quotaBytes int64) (err error) {
	w, err := Open(dir, quotaBytes)
	if err != nil {
		return fmt.Errorf("workspace: restore: %w", err)
	}
	defer w.Close()

	root, err := w.dupRoot()
	if err != nil {
		return fmt.Errorf("workspace: restore: %w", err)
	}
	names, err := readNames(root, 0)
	_ = unix.Close(root)
	if errors.Is(err, ErrTreeTooLarge) || len(names) > 0 {
		return fmt.Errorf("workspace: restore into %q: %w", dir, ErrNotEmpty)
	}
	if err != nil {
		return fmt.Errorf("workspace: restore: %w", err)
	}
	defer func() {
		if err != nil {
			if cerr := w.clear(); cerr != nil {
				err = fmt.Errorf("%w; and cleaning up: %w", err, cerr)
			}
		}
	}()
	return w.restore(src)
}

type dirMeta struct {
	rel   string
	mode  uint32
	mtime time.Time
}

func (w *Workspace) restore(src io.Reader) error {
	cr := &countReader{r: bufio.NewReaderSize(src, 256<<10)}
	tr := tar.NewReader(cr)
	var (
		end   int64 // offset just past the last entry's data and padding
		count int
		total int64
		dirs  []dirMeta
		seen  = map[string]bool{}
	)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			// archive/tar takes end of input at an entry boundary (or
			// after a lone PAX header) for the end of the archive. Require
			// the two zero blocks Archive writes, after the last entry's
			// data, so a truncated file is never taken for a whole one.
			if cr.zeroTail < 1024 || cr.n-1024 < end {
				return fmt.Errorf("workspace: restore: the archive ends without its end-of-archive marker (truncated): %w", ErrBadArchive)
			}
			break
		}
		if err != nil {
			return fmt.Errorf("workspace: restore: %w (%w)", ErrBadArchive, err)
		}
		end = cr.n + (hdr.Size+511)/512*512
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		if count++; count > w.maxEntries {
			return fmt.Errorf("workspace: restore: more than %d entries: %w", w.maxEntries, ErrBadArchive)
		}
		rel, err := archiveName(hdr.Name)
		if err != nil {
			return err
		}
		if rel == "" {
			continue // "./": the workspace itself
		}
		if seen[rel] {
			return fmt.Errorf("workspace: restore: %q appears twice: %w", rel, ErrBadArchive)
		}
		seen[rel] = true
		perm := uint32(hdr.Mode) & 0o777
		switch hdr.Typeflag {
		case tar.TypeDir:
			fd, err := w.mkdirAll(rel)
			if err != nil {
				return pathErr("restore", rel, err)
			}
			_ = unix.Close(fd)
			dirs = append(dirs, dirMeta{rel, perm, hdr.ModTime})
		case tar.TypeReg:
			if hdr.Size < 0 || (w.quota > 0 && hdr.Size > w.quota-total) {
				return fmt.Errorf("workspace: restore: %w (quota %d bytes)", ErrQuota, w.quota)
			}
			total += hdr.Size
			if err := w.restoreFile(rel, perm, hdr, tr); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if hdr.Linkname == "" || strings.IndexByte(hdr.Linkname, 0) >= 0 {
				return fmt.Errorf("workspace: restore: symlink %q has a bad target: %w", rel, ErrBadArchive)
			}
			if err := w.restoreSymlink(rel, hdr); err != nil {
				return err
			}
		default:
			return fmt.Errorf("workspace: restore: %q has entry type %q, not a file, directory or symlink: %w", rel, hdr.Typeflag, ErrBadArchive)
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		d := dirs[i]
		fd, err := w.openDir(d.rel)
		if err != nil {
			return pathErr("restore", d.rel, err)
		}
		err = unix.Fchmod(fd, d.mode)
		_ = unix.Close(fd)
		if err != nil {
			return pathErr("restore", d.rel, err)
		}
		if err := w.setMtime(d.rel, d.mtime); err != nil {
			return err
		}
	}
	return nil
}

// archiveName turns a tar entry name into a workspace path: "./" and a
// trailing "/" are dropped; absolute names and ".." components give
// ErrEscape. Characters ValidatePath refuses for client paths (backslash,
// control characters) are allowed: the payload may have used them, and the
// name is only ever used relative to a directory descriptor.
func archiveName(name string) (string, error) {
	orig := name
	name = strings.TrimPrefix(name, "./")
	name = strings.TrimSuffix(name, "/")
	if name == "" || name == "." {
		return "", nil
	}
	if strings.HasPrefix(name, "/") {
		return "", fmt.Errorf("workspace: restore: entry %q is absolute: %w", orig, ErrEscape)
	}
	if len(name) > MaxPathLen || strings.IndexByte(name, 0) >= 0 {
		return "", fmt.Errorf("workspace: restore: entry %q: %w", orig, ErrBadArchive)
	}
	for _, c := range strings.Split(name, "/") {
		switch {
		case c == "..":
			return "", fmt.Errorf("workspace: restore: entry %q has a \"..\" component: %w", orig, ErrEscape)
		case c == "" || c == "." || len(c) > maxNameLen:
			return "", fmt.Errorf("workspace: restore: entry %q is not a clean path: %w", orig, ErrBadArchive)
		}
	}
	return name, nil
}

func (w *Workspace) restoreFile(rel string, perm uint32, hdr *tar.Header, r io.Reader) error {
	dir, base := splitPath(rel)
	pfd, err := w.mkdirAll(dir)
	if err != nil {
		return pathErr("restore", rel, err)
	}
	defer unix.Close(pfd)
	fd, err := w.openat(pfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("workspace: restore: %q already exists: %w", rel, ErrBadArchive)
		}
		return pathErr("restore", rel, err)
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	if _, err := io.CopyN(f, r, hdr.Size); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("workspace: restore: %q is cut short: %w", rel, ErrBadArchive)
		}
		return pathErr("restore", rel, err)
	}
	if err := unix.Fchmod(fd, perm); err != nil {
		return pathErr("restore", rel, err)
	}
	ts := []unix.Timespec{unix.NsecToTimespec(hdr.ModTime.UnixNano()), unix.NsecToTimespec(hdr.ModTime.UnixNano())}
	if err := unix.UtimesNanoAt(pfd, base, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return pathErr("restore", rel, err)
	}
	if err := f.Sync(); err != nil {
		return pathErr("restore", rel, err)
	}
	return nil
}

func (w *Workspace) restoreSymlink(rel string, hdr *tar.Header) error {
	dir, base := splitPath(rel)
	pfd, err := w.mkdirAll(dir)
	if err != nil {
		return pathErr("restore", rel, err)
	}
	defer unix.Close(pfd)
	if err := unix.Symlinkat(hdr.Linkname, pfd, base); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("workspace: restore: %q already exists: %w", rel, ErrBadArchive)
		}
		return pathErr("restore", rel, err)
	}
	ts := []unix.Timespec{unix.NsecToTimespec(hdr.ModTime.UnixNano()), unix.NsecToTimespec(hdr.ModTime.UnixNano())}
	if err := unix.UtimesNanoAt(pfd, base, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return pathErr("restore", rel, err)
	}
	return nil
}

// setMtime sets the times of the entry rel without following a symlink.
func (w *Workspace) setMtime(rel string, t time.Time) error {
	dir, base := splitPath(rel)
	pfd, err := w.openDir(dir)
	if err != nil {
		return pathErr("restore", rel, err)
	}
	defer unix.Close(pfd)
	ts := []unix.Timespec{unix.NsecToTimespec(t.UnixNano()), unix.NsecToTimespec(t.UnixNano())}
	if err := unix.UtimesNanoAt(pfd, base, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return pathErr("restore", rel, err)
	}
	return nil
}

// countReader counts the bytes read through it, and how many of the last
// ones were zero.
type countReader struct {
	r        io.Reader
	n        int64
	zeroTail int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if i := lastNonZero(p[:n]); i >= 0 {
		c.zeroTail = int64(n - i - 1)
	} else {
		c.zeroTail += int64(n)
	}
	return n, err
}

func lastNonZero(b []byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] != 0 {
			return i
		}
	}
	return -1
}

// clear removes everything below the workspace, never following a symlink
// (used to undo a failed Restore).
func (w *Workspace) clear() error {
	fd, err := w.dupRoot()
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return removeContents(fd, 0)
}

func removeContents(fd int, depth int) error {
	if depth > MaxPathLen/2 {
		return ErrTreeTooLarge
	}
	names, err := readNames(fd, MaxEntries)
	if err != nil {
		return err
	}
	for _, name := range names {
		err := unix.Unlinkat(fd, name, 0)
		if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
			if err != nil && !errors.Is(err, unix.ENOENT) {
				return err
			}
			continue
		}
		// A directory: make it usable, empty it, remove it.
		cfd, err := openDirForRemoval(fd, name)
		if err != nil {
			return err
		}
		err = removeContents(cfd, depth+1)
		_ = unix.Close(cfd)
		if err != nil {
			return err
		}
		if err := unix.Unlinkat(fd, name, unix.AT_REMOVEDIR); err != nil {
			return err
		}
	}
	return nil
}

// openDirForRemoval opens the directory name in fd for reading after giving
// it mode 0700 (Restore may have applied a mode that bars its owner). The
// directory is first pinned with O_PATH|O_NOFOLLOW and chmod'ed through its
// /proc/self/fd magic link, which names exactly that inode, so no symlink
// swapped in can redirect the chmod.
func openDirForRemoval(fd int, name string) (int, error) {
	pfd, err := unix.Openat(fd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(pfd)
	_ = unix.Chmod(fmt.Sprintf("/proc/self/fd/%d", pfd), 0o700)
	return unix.Openat(pfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}

// RemovedArchive is an archive that ExpireArchives or TrimArchives removed.
type RemovedArchive struct {
	Path    string
	Bytes   int64
	ModTime time.Time
}

// archiveFile is a regular *.tar (or a leftover *.tar.tmp) below the
// archive root.
type archiveFile struct {
	path string
	size int64
	mod  time.Time
	tmp  bool
}

// listArchives lists the archives in dir: regular files named *.tar or
// *.tar.tmp, by lstat (a symlink is never followed, nor counted).
func listArchives(dir string) ([]archiveFile, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace: list archives in %s: %w", dir, err)
	}
	var out []archiveFile
	for _, e := range ents {
		name := e.Name()
		tmp := strings.HasSuffix(name, ".tar.tmp")
		if !tmp && !strings.HasSuffix(name, ".tar") {
			continue
		}
		p := filepath.Join(dir, name)
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		out = append(out, archiveFile{path: p, size: fi.Size(), mod: fi.ModTime(), tmp: tmp})
	}
	return out, nil
}

// callerArchiveDir reports whether name is a per-caller archive directory
// ("u" and a decimal uid).
func callerArchiveDir(name string) bool {
	rest, ok := strings.CutPrefix(name, "u")
	if !ok || rest == "" {
		return false
	}
	for _, c := range rest {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// ExpireArchives removes every archive below root (root itself and its
// per-caller directories u<uid>) last written or restored before
// now-maxAge: the archive retention of DESIGN.md I11. A leftover
// temporary file of a crashed Archive ages out the same way. maxAge <= 0
// removes nothing. It returns what it removed, and the errors it met
// without stopping.
func ExpireArchives(root string, maxAge time.Duration, now time.Time) ([]RemovedArchive, error) {
	if maxAge <= 0 {
		return nil, nil
	}
	dirs := []string{root}
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("workspace: expire archives: %w", err)
	}
	for _, e := range ents {
		if e.Type().IsDir() && callerArchiveDir(e.Name()) {
			dirs = append(dirs, filepath.Join(root, e.Name()))
		}
	}
	cutoff := now.Add(-maxAge)
	var removed []RemovedArchive
	var errs []error
	for _, d := range dirs {
		files, err := listArchives(d)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, f := range files {
			if !f.mod.Before(cutoff) {
				continue
			}
			if err := os.Remove(f.path); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("workspace: expire archive: %w", err))
				continue
			}
			removed = append(removed, RemovedArchive{Path: f.path, Bytes: f.size, ModTime: f.mod})
		}
	}
	return removed, errors.Join(errs...)
}

// TrimArchives keeps the archives in dir (one caller's) within maxBytes by
// removing the oldest first (by modification time: last written or
// restored). An archive that alone is larger than maxBytes is removed too,
// the newest included: a caller's budget is never exceeded, even by one
// archive. maxBytes <= 0 removes nothing. Temporary files are left to
// ExpireArchives: one may be an archive being written.
func TrimArchives(dir string, maxBytes int64) ([]RemovedArchive, error) {
	if maxBytes <= 0 {
		return nil, nil
	}
	files, err := listArchives(dir)
	if err != nil {
		return nil, err
	}
	var total int64
	kept := files[:0]
	for _, f := range files {
		if !f.tmp {
			total += f.size
			kept = append(kept, f)
		}
	}
	// Oldest first; the name breaks ties so the order is stable.
	sort.Slice(kept, func(i, j int) bool {
		if !kept[i].mod.Equal(kept[j].mod) {
			return kept[i].mod.Before(kept[j].mod)
		}
		return kept[i].path < kept[j].path
	})
	var removed []RemovedArchive
	for _, f := range kept {
		if total <= maxBytes {
			break
		}
		if err := os.Remove(f.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return removed, fmt.Errorf("workspace: trim archives: %w", err)
		}
		total -= f.size
		removed = append(removed, RemovedArchive{Path: f.path, Bytes: f.size, ModTime: f.mod})
	}
	return removed, nil
}
