package workspace

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"golang.org/x/sys/unix"
)

// entry is one directory entry met by walk. dirfd is valid only during the
// callback.
type entry struct {
	dirfd int
	name  string
	rel   string
	st    unix.Stat_t
}

func (e *entry) isDir() bool { return e.st.Mode&unix.S_IFMT == unix.S_IFDIR }

// errSkipDir, returned by a walk callback for a directory, keeps the walk
// out of it.
var errSkipDir = errors.New("skip directory")

// walk visits every entry below the workspace, never following a symlink:
// each directory is opened with the resolver (symlinks refused) by its path
// from the workspace root, its names read and sorted, each name lstat'ed
// relative to the directory descriptor and passed to fn; then its
// subdirectories are walked, in name order. So a directory comes before its
// contents, and the order is deterministic for a given tree. Entries that
// vanish or change type under the walk (the payload racing) are skipped.
// Only one directory descriptor is open at a time, so depth costs no
// descriptors. More than w.maxEntries entries, or a path longer than
// MaxPathLen, gives ErrTreeTooLarge.
func (w *Workspace) walk(fn func(e *entry) error) error {
	stack := []string{""}
	count := 0
	for len(stack) > 0 {
		dir := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		fd, err := w.openDir(dir)
		if err != nil {
			if vanished(err) && dir != "" {
				continue
			}
			return pathErr("walk", dir, err)
		}
		subdirs, err := w.walkDir(fd, dir, &count, fn)
		_ = unix.Close(fd)
		if err != nil {
			return err
		}
		for i := len(subdirs) - 1; i >= 0; i-- {
			stack = append(stack, subdirs[i])
		}
	}
	return nil
}

func (w *Workspace) walkDir(fd int, dir string, count *int, fn func(e *entry) error) ([]string, error) {
	names, err := readNames(fd, w.maxEntries-*count)
	if err != nil {
		if errors.Is(err, ErrTreeTooLarge) {
			return nil, err
		}
		return nil, pathErr("read directory", dir, err)
	}
	sort.Strings(names)
	var subdirs []string
	e := entry{dirfd: fd}
	for _, name := range names {
		*count++
		if *count > w.maxEntries {
			return nil, fmt.Errorf("workspace: more than %d entries: %w", w.maxEntries, ErrTreeTooLarge)
		}
		rel := joinPath(dir, name)
		if len(rel) > MaxPathLen {
			return nil, fmt.Errorf("workspace: a path is longer than %d bytes: %w", MaxPathLen, ErrTreeTooLarge)
		}
		e.name, e.rel = name, rel
		if err := lstatAt(fd, name, &e.st); err != nil {
			if vanished(err) {
				continue
			}
			return nil, pathErr("stat", rel, err)
		}
		err := fn(&e)
		if errors.Is(err, errSkipDir) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if e.isDir() {
			subdirs = append(subdirs, rel)
		}
	}
	return subdirs, nil
}

// vanished reports an error that means the entry went away or changed type
// (the payload racing the walk): skip it.
func vanished(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) ||
		errors.Is(err, unix.ELOOP)
}

// readNames reads the names of the directory fd (not "." or ".."), which
// must be a fresh descriptor (its offset is used); more than limit names
// give ErrTreeTooLarge. fd stays open.
func readNames(fd int, limit int) ([]string, error) {
	dfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dfd), "dir")
	defer f.Close()
	var names []string
	for {
		batch, err := f.Readdirnames(1024)
		names = append(names, batch...)
		if len(names) > limit {
			return nil, fmt.Errorf("workspace: more than %d entries: %w", limit, ErrTreeTooLarge)
		}
		if err == io.EOF {
			return names, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// List returns every entry of the workspace, sorted by path: regular files,
// directories (size 0), symlinks (listed, never followed; size is the length
// of the target) and special files, each with its kind in Mode. Temporary
// upload files are hidden.
func (w *Workspace) List() ([]FileInfo, error) {
	if err := w.use(); err != nil {
		return nil, err
	}
	defer w.done()
	var out []FileInfo
	err := w.walk(func(e *entry) error {
		if isTempName(e.name) {
			return errSkipDir
		}
		out = append(out, infoOf(e.rel, &e.st))
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// Usage returns the bytes the quota counts: the sum of st_size of the
// regular files below the workspace, each inode once (hard links are not
// double counted), temporary upload files included.
func (w *Workspace) Usage() (int64, error) {
	if err := w.use(); err != nil {
		return 0, err
	}
	defer w.done()
	return w.usage()
}

func (w *Workspace) usage() (int64, error) {
	type inode struct{ dev, ino uint64 }
	seen := map[inode]bool{} // only inodes with more than one link
	var total int64
	err := w.walk(func(e *entry) error {
		if e.st.Mode&unix.S_IFMT != unix.S_IFREG {
			return nil
		}
		if uint64(e.st.Nlink) <= 1 {
			total += e.st.Size
			return nil
		}
		k := inode{uint64(e.st.Dev), uint64(e.st.Ino)}
		if !seen[k] {
			seen[k] = true
			total += e.st.Size
		}
		return nil
	})
	return total, err
}

// Sweep removes the temporary upload files left by a crash (any non-directory
// whose name starts with TempPrefix). It waits for running uploads, whose own
// temporary files are therefore never removed under them.
func (w *Workspace) Sweep() error {
	w.putMu.Lock()
	defer w.putMu.Unlock()
	if err := w.use(); err != nil {
		return err
	}
	defer w.done()
	return w.walk(func(e *entry) error {
		if !isTempName(e.name) || e.isDir() {
			return nil
		}
		if err := unix.Unlinkat(e.dirfd, e.name, 0); err != nil && err != unix.ENOENT {
			return pathErr("sweep", e.rel, err)
		}
		return nil
	})
}
