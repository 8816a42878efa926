// Package atomicfile writes a file so that a reader, or the same program
// after a crash, sees either the old content or the whole new content, never
// a part: the content goes to path+".tmp" (created O_EXCL|O_NOFOLLOW, so a
// planted symlink or a file someone else holds open is never written
// through), is fsync'd, renamed over path, and the directory is fsync'd so
// the rename itself survives a crash (rename(2) is atomic but not durable
// until its directory is synced; ext4 and xfs both need the fsync).
//
// It owns only that sequence. It must never follow a symlink at the
// temporary name, never truncate an existing file in place, and never be
// used for a path below a workspace the payload controls: those writes go
// through package workspace's openat2 resolution instead.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// TempSuffix is appended to path to name the temporary file. Readers that
// scan a directory skip (or remove) names ending in it: such a file is the
// leftover of a write that did not finish.
const TempSuffix = ".tmp"

// WriteFile replaces path with data, atomically and durably, with mode perm
// (not masked by the umask).
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return Write(path, perm, func(f *os.File) error {
		_, err := f.Write(data)
		return err
	})
}

// Write replaces path with what fill writes to f, atomically and durably,
// with mode perm (not masked by the umask). An error from fill is returned
// unchanged (errors.Is works on it) and path is left as it was. A stale
// temporary file left by a crash is removed first; concurrent writers of
// one path are not supported.
func Write(path string, perm fs.FileMode, fill func(f *os.File) error) (err error) {
	tmp := path + TempSuffix
	f, err := create(tmp, perm)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	// The mode is set on the descriptor: the umask must not weaken or
	// widen what the caller asked for.
	if err := f.Chmod(perm); err != nil {
		return fmt.Errorf("atomicfile: chmod %s: %w", tmp, err)
	}
	if err := fill(f); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("atomicfile: fsync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("atomicfile: close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("atomicfile: rename to %s: %w", path, err)
	}
	return syncDir(filepath.Dir(path))
}

// create makes tmp exclusively; a leftover (file or symlink) is unlinked,
// never opened, and the create retried once.
func create(tmp string, perm fs.FileMode) (*os.File, error) {
	const flags = os.O_WRONLY | os.O_CREATE | os.O_EXCL | unix.O_NOFOLLOW | unix.O_CLOEXEC
	f, err := os.OpenFile(tmp, flags, perm)
	if errors.Is(err, fs.ErrExist) {
		if rerr := os.Remove(tmp); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			return nil, fmt.Errorf("atomicfile: remove stale %s: %w", tmp, rerr)
		}
		f, err = os.OpenFile(tmp, flags, perm)
	}
	if err != nil {
		return nil, fmt.Errorf("atomicfile: create %s: %w", tmp, err)
	}
	return f, nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("atomicfile: open directory %s: %w", dir, err)
	}
	serr := d.Sync()
	cerr := d.Close()
	if err := errors.Join(serr, cerr); err != nil {
		return fmt.Errorf("atomicfile: fsync directory %s: %w", dir, err)
	}
	return nil
}
