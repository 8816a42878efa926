package supervisor

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// maxSocketPath is sizeof(sockaddr_un.sun_path) minus the NUL.
const maxSocketPath = 107

// Listen creates the API socket at path with mode 0660 and, when group is
// set (a name or a numeric gid), that group.
//
// The parent directory is created with mode 0750 when missing; an existing
// one is left as the operator made it. An old socket is removed only when it
// is a socket and nothing answers on it: a regular file or a live socket of
// another instance at path is an error, never something to delete.
//
// The socket is bound under a temporary name in the same directory, given
// its mode and group, and only then renamed to path, so there is no moment
// in which path accepts connections with the umask's mode or the wrong group.
// Closing the listener removes path if it is still this socket.
func Listen(path string, group string) (net.Listener, error) {
	if path == "" {
		return nil, errors.New("listen: socket path is empty")
	}
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("listen: socket path %q is %d bytes; a Unix socket path can have at most %d", path, len(path), maxSocketPath)
	}
	gid := -1
	if group != "" {
		g, err := lookupGroup(group)
		if err != nil {
			return nil, fmt.Errorf("listen on %s: socket group: %w", path, err)
		}
		gid = g
	}
	dir := filepath.Dir(path)
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("listen on %s: create directory: %w", path, err)
		}
		// MkdirAll's mode passes through the umask; the directory is
		// part of the socket's access control, so make it exact.
		if err := os.Chmod(dir, 0o750); err != nil {
			return nil, fmt.Errorf("listen on %s: chmod directory: %w", path, err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("listen on %s: stat directory: %w", path, err)
	}
	if err := removeStaleSocket(path); err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}

	tmp, err := tempSocketName(path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	// The listener's own unlink-on-close would remove the temporary name,
	// which is gone after the rename; unixListener removes the real one.
	ln.SetUnlinkOnClose(false)
	fail := func(step string, err error) (net.Listener, error) {
		_ = ln.Close()
		_ = os.Remove(tmp)
		return nil, fmt.Errorf("listen on %s: %s: %w", path, step, err)
	}
	if err := os.Chmod(tmp, 0o660); err != nil {
		return fail("chmod 0660", err)
	}
	if gid >= 0 {
		if err := os.Lchown(tmp, -1, gid); err != nil {
			return fail(fmt.Sprintf("chgrp %s (the supervisor must be a member of the group)", group), err)
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail("rename into place", err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return fail("stat", err)
	}
	return &unixListener{UnixListener: ln, path: path, fi: fi}, nil
}

// unixListener removes its socket file on Close, but only while the file is
// still the one it created: a second instance that replaced it keeps its own.
type unixListener struct {
	*net.UnixListener
	path string
	fi   fs.FileInfo
	once sync.Once
}

func (l *unixListener) Close() error {
	err := l.UnixListener.Close()
	l.once.Do(func() {
		if cur, serr := os.Lstat(l.path); serr == nil && os.SameFile(cur, l.fi) {
			_ = os.Remove(l.path)
		}
	})
	return err
}

// removeStaleSocket removes path if it is a socket nobody listens on.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stat existing socket: %w", err)
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("%s exists and is not a socket (%s); refusing to remove it", path, fi.Mode().Type())
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		_ = c.Close()
		return fmt.Errorf("another process is listening on %s; stop it first", path)
	}
	// Only ECONNREFUSED proves the socket is dead; anything else (EACCES,
	// a timeout) may be a live socket we cannot see into.
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("cannot tell whether %s is in use: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale socket: %w", err)
	}
	return nil
}

func tempSocketName(path string) (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("temporary socket name: %w", err)
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+"."+hex.EncodeToString(b[:]))
	if len(tmp) > maxSocketPath {
		// The temporary name is 14 bytes longer; fall back to a short one
		// in the same directory so that rename stays within one filesystem.
		tmp = filepath.Join(filepath.Dir(path), "."+hex.EncodeToString(b[:]))
	}
	if len(tmp) > maxSocketPath {
		return "", fmt.Errorf("socket directory %q is too long for a temporary socket name", filepath.Dir(path))
	}
	return tmp, nil
}

// lookupGroup resolves a group name, or accepts a numeric gid as is.
func lookupGroup(group string) (int, error) {
	if g, err := user.LookupGroup(group); err == nil {
		gid, err := strconv.Atoi(g.Gid)
		if err != nil {
			return 0, fmt.Errorf("group %q has non-numeric gid %q", group, g.Gid)
		}
		return gid, nil
	}
	gid, err := strconv.Atoi(group)
	if err != nil || gid < 0 {
		return 0, fmt.Errorf("group %q not found", group)
	}
	return gid, nil
}
