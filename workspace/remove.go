package workspace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// Remove removes the workspace directory dir and everything the payload
// left in it, by descriptors: each directory is opened below its parent's
// descriptor without following a symlink (O_NOFOLLOW), given back owner
// search and write permission through that very descriptor (the payload
// runs as the supervisor's uid, so it owns every file, but it may have
// locked directories), and emptied with unlinkat. A symlink, anywhere,
// dir included, is removed itself, never followed, so nothing outside dir
// is touched even if the tree changes during the walk. A dir that does not
// exist is no error.
func Remove(dir string) error {
	parent, err := unix.Open(filepath.Dir(dir), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove workspace %q: open its parent: %w", dir, err)
	}
	defer unix.Close(parent)
	if err := removeAt(parent, filepath.Base(dir)); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove workspace %q: %w", dir, err)
	}
	return nil
}

// removeAt removes name below the directory dirfd and, for a directory,
// everything in it.
func removeAt(dirfd int, name string) error {
	err := unix.Unlinkat(dirfd, name, 0)
	if err == nil || !errors.Is(err, unix.EISDIR) {
		return err // removed, gone already, or a real failure
	}
	fd, err := openUnlocked(dirfd, name)
	if err != nil {
		return fmt.Errorf("open directory %q: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	names, err := f.Readdirnames(-1)
	if err != nil {
		f.Close()
		return fmt.Errorf("read directory %q: %w", name, err)
	}
	for _, n := range names {
		if err := removeAt(fd, n); err != nil && !errors.Is(err, unix.ENOENT) {
			f.Close()
			return fmt.Errorf("%s/%w", name, err)
		}
	}
	f.Close()
	return unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR)
}

// openUnlocked opens the directory name below dirfd for reading, never
// through a symlink, after making it 0700 through an O_PATH descriptor of
// that very directory (chmod of its /proc/self/fd link reaches exactly the
// inode the descriptor holds: no path is resolved again).
func openUnlocked(dirfd int, name string) (int, error) {
	pfd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(pfd)
	if err := unix.Chmod("/proc/self/fd/"+strconv.Itoa(pfd), 0o700); err != nil {
		return -1, fmt.Errorf("chmod 0700: %w", err)
	}
	return unix.Openat(pfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}
