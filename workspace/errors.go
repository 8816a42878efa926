package workspace

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Errors callers map to HTTP codes (see the package doc).
var (
	// ErrEscape: the path escapes the workspace (absolute, "..", through a
	// symlink, across a mount) -> 403.
	ErrEscape = errors.New("path escapes the workspace")
	// ErrNotFound -> 404.
	ErrNotFound = errors.New("no such file in the workspace")
	// ErrQuota: the workspace quota would be exceeded -> 507.
	ErrQuota = errors.New("workspace quota exceeded")
	// ErrTooLarge: over a per-request size limit -> 413.
	ErrTooLarge = errors.New("too large")
	// ErrInvalidPath: empty, NUL, backslash, control character, not clean,
	// too long -> 400.
	ErrInvalidPath = errors.New("invalid path")
	// ErrNotEmpty: Delete of a non-empty directory, Restore into a non-empty
	// directory -> 409.
	ErrNotEmpty = errors.New("directory not empty")
	// ErrClosed: the Workspace was closed.
	ErrClosed = errors.New("workspace closed")
	// ErrBadArchive: Restore met something that is not a complete archive
	// written by Archive (truncated, an entry type other than file, directory
	// or symlink, a duplicate entry).
	ErrBadArchive = errors.New("not a valid workspace archive")
)

// Errors that wrap one of the above, so a caller mapping the broad error
// still maps them right, and one that cares can tell them apart.
var (
	// ErrNotRegular: a FIFO, socket, device or directory where a regular
	// file is needed (or a non-directory where a directory is). Wraps
	// ErrEscape.
	ErrNotRegular error = &subError{"not a regular file", ErrEscape}
	// ErrPermission: the supervisor may not access an entry (the payload
	// removed permissions). Wraps ErrEscape.
	ErrPermission error = &subError{"permission denied in the workspace", ErrEscape}
	// ErrTreeTooLarge: the workspace has more than MaxEntries entries or a
	// path longer than MaxPathLen, so it cannot be walked in full. Wraps
	// ErrQuota.
	ErrTreeTooLarge error = &subError{"workspace tree exceeds the walk limits", ErrQuota}
)

type subError struct {
	msg    string
	parent error
}

func (e *subError) Error() string { return e.msg }
func (e *subError) Unwrap() error { return e.parent }

// classify maps a system call error to the package error it means, or nil.
func classify(err error) error {
	var errno unix.Errno
	if !errors.As(err, &errno) {
		return nil
	}
	switch errno {
	case unix.ENOENT, unix.ENOTDIR:
		return ErrNotFound
	case unix.ELOOP, unix.EXDEV:
		return ErrEscape
	case unix.EISDIR, unix.ENXIO, unix.ENODEV:
		return ErrNotRegular
	case unix.EACCES, unix.EPERM:
		return ErrPermission
	case unix.ENAMETOOLONG:
		return ErrInvalidPath
	case unix.ENOSPC, unix.EDQUOT:
		return ErrQuota
	case unix.ENOTEMPTY:
		return ErrNotEmpty
	}
	return nil
}

// pathErr wraps err with the operation and path, adding the package error
// it means when err is a bare errno.
func pathErr(op, p string, err error) error {
	if s := classify(err); s != nil {
		return fmt.Errorf("workspace: %s %q: %w (%w)", op, p, s, err)
	}
	return fmt.Errorf("workspace: %s %q: %w", op, p, err)
}
