// Package secretfile owns the one rule for files of secrets the supervisor
// reads (API keys, S3 credentials): a regular file, not reached through a
// symbolic link, owned by root or by the service user (the supervisor's own
// uid), with no permission for group or others. Anyone who can read such a
// file holds its secrets; anyone who can write it chooses them.
//
// It must never read or return a file's contents: callers read the file
// they get back, and only after the check.
package secretfile

import (
	"fmt"
	"os"
	"syscall"

	"github.com/sandboxd/sandboxd/errdefs"
)

// Open opens path read-only without following a final symbolic link and
// checks the open file against the rule. what names the file in errors
// ("api keys file"); an error is errdefs.ErrInvalid with the operator's
// fix as its hint, except a failed stat.
func Open(path, what string, serviceUID int) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("%s %s: %v", what, path, err),
			"create it as a regular file, mode 0600, owned by root or the service user", err)
	}
	if err := check(f, path, what, serviceUID); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

func check(f *os.File, path, what string, serviceUID int) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%s %s: stat: %w", what, path, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.Mode().IsRegular():
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("%s %s is not a regular file (%s)", what, path, fi.Mode().Type()), "", nil)
	case !ok:
		return fmt.Errorf("%s %s: no owner information", what, path)
	case st.Uid != 0 && int(st.Uid) != serviceUID:
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("%s %s is owned by uid %d, not root or the service user (uid %d)", what, path, st.Uid, serviceUID),
			fmt.Sprintf("chown root %s (or the service user)", path), nil)
	case fi.Mode().Perm()&0o077 != 0:
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("%s %s has mode %04o; group and others must have no access", what, path, fi.Mode().Perm()),
			fmt.Sprintf("chmod 0600 %s", path), nil)
	}
	return nil
}
