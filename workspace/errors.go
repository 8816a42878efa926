package workspace

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/errdefs"
)

// The package's errors. Each wraps one class of package errdefs, which
// decides the API answer in one place (supervisor/errors.go); the status in
// each comment is that mapping's, for the reader.
var (
	// ErrEscape: the path escapes the workspace (absolute, "..", through a
	// symlink, across a mount). errdefs.ErrForbidden, 403.
	ErrEscape error = &subError{"path escapes the workspace", errdefs.ErrForbidden}
	// ErrNotFound: errdefs.ErrNotFound, 404.
	ErrNotFound error = &subError{"no such file in the workspace", errdefs.ErrNotFound}
	// ErrQuota: the workspace quota would be exceeded. errdefs.ErrQuota, 507.
	ErrQuota error = &subError{"workspace quota exceeded", errdefs.ErrQuota}
	// ErrTooLarge: over a per-request size limit. errdefs.ErrTooLarge, 413,
	// on every path (an upload and a staged file alike).
	ErrTooLarge error = &subError{"too large", errdefs.ErrTooLarge}
	// ErrInvalidPath: empty, NUL, backslash, control character, not clean,
	// too long. errdefs.ErrInvalid, 400.
	ErrInvalidPath error = &subError{"invalid path", errdefs.ErrInvalid}
	// ErrNotEmpty: Delete of a non-empty directory, Restore into a non-empty
	// directory. errdefs.ErrConflict, 409.
	ErrNotEmpty error = &subError{"directory not empty", errdefs.ErrConflict}
	// ErrClosed: the Workspace was closed; a bug of the caller.
	// errdefs.ErrInternal, 500.
	ErrClosed error = &subError{"workspace closed", errdefs.ErrInternal}
	// ErrBadArchive: Restore met something that is not a complete archive
	// written by Archive (truncated, an entry type other than file, directory
	// or symlink, a duplicate entry). errdefs.ErrInvalid.
	ErrBadArchive error = &subError{"not a valid workspace archive", errdefs.ErrInvalid}
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

// subError is an error with its own text that is also its parent (a
// broader package error, or an errdefs class) for errors.Is.
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
