package workspace

import (
	"errors"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// resolveFlags are the openat2 resolution rules for every lookup below the
// workspace: stay beneath the directory descriptor, traverse no symlink (not
// even one pointing inside), no /proc magic link, no mount crossing.
const resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS |
	unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

var openat2Probe struct {
	once sync.Once
	ok   bool
}

// haveOpenat2 reports whether openat2 with resolveFlags works here. It is
// unavailable before Linux 5.6 (ENOSYS) and under seccomp profiles that
// filter it (EPERM, or ENOSYS).
func haveOpenat2() bool {
	openat2Probe.once.Do(func() {
		fd, err := unix.Openat2(unix.AT_FDCWD, ".", &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_CLOEXEC,
			Resolve: resolveFlags,
		})
		if err == nil {
			_ = unix.Close(fd)
		}
		switch {
		case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM),
			errors.Is(err, unix.EINVAL), errors.Is(err, unix.E2BIG):
			openat2Probe.ok = false
		default:
			openat2Probe.ok = true
		}
	})
	return openat2Probe.ok
}

// openat opens rel (a relative path of one or more components, never ".."
// or "." except rel == ".") beneath dirfd without traversing any symlink.
// O_NOFOLLOW and O_CLOEXEC are always added. The error is a bare errno.
func (w *Workspace) openat(dirfd int, rel string, flags int, mode uint32) (int, error) {
	flags |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	if flags&(unix.O_CREAT|unix.O_TMPFILE) == 0 {
		mode = 0
	}
	fd, err := w.openat1(dirfd, rel, flags, mode)
	if errors.Is(err, unix.ENOTDIR) && flags&unix.O_DIRECTORY != 0 && w.isSymlink(dirfd, rel) {
		// O_DIRECTORY|O_NOFOLLOW reports a trailing symlink as ENOTDIR;
		// tell the caller it was a symlink (an escape attempt).
		err = unix.ELOOP
	}
	return fd, err
}

// isSymlink reports whether rel beneath dirfd is a symlink (or can only be
// reached through one). It only classifies an error already returned; it
// never grants access.
func (w *Workspace) isSymlink(dirfd int, rel string) bool {
	fd, err := w.openat1(dirfd, rel, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return errors.Is(err, unix.ELOOP)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

func (w *Workspace) openat1(dirfd int, rel string, flags int, mode uint32) (int, error) {
	if !w.useOpenat2 {
		return openWalk(dirfd, rel, flags, mode)
	}
	how := unix.OpenHow{Flags: uint64(flags), Mode: uint64(mode), Resolve: resolveFlags}
	for attempt := 0; ; attempt++ {
		fd, err := unix.Openat2(dirfd, rel, &how)
		// EAGAIN: a concurrent rename disturbed the lookup; EINTR: a signal.
		if (err == unix.EAGAIN || err == unix.EINTR) && attempt < 64 {
			continue
		}
		return fd, err
	}
}

// openWalk is the fallback resolver: one component at a time, each opened
// O_PATH|O_NOFOLLOW relative to the previous descriptor and checked with
// fstat, so a symlink (ELOOP), a non-directory (ENOTDIR) or a component on
// another device (EXDEV) stops the walk. No component is "..".
func openWalk(dirfd int, rel string, flags int, mode uint32) (int, error) {
	if rel == "." {
		return unix.Openat(dirfd, ".", flags, mode)
	}
	comps := strings.Split(rel, "/")
	for _, c := range comps {
		if c == "" || c == "." || c == ".." {
			return -1, unix.EXDEV
		}
	}
	var top unix.Stat_t
	if err := unix.Fstat(dirfd, &top); err != nil {
		return -1, err
	}
	cur := dirfd
	release := func() {
		if cur != dirfd {
			_ = unix.Close(cur)
		}
	}
	for _, c := range comps[:len(comps)-1] {
		nfd, err := unix.Openat(cur, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		release()
		if err != nil {
			return -1, err
		}
		cur = nfd
		var st unix.Stat_t
		if err := unix.Fstat(cur, &st); err != nil {
			release()
			return -1, err
		}
		switch {
		case st.Mode&unix.S_IFMT == unix.S_IFLNK:
			release()
			return -1, unix.ELOOP
		case st.Mode&unix.S_IFMT != unix.S_IFDIR:
			release()
			return -1, unix.ENOTDIR
		case st.Dev != top.Dev:
			release()
			return -1, unix.EXDEV
		}
	}
	fd, err := unix.Openat(cur, comps[len(comps)-1], flags, mode)
	release()
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return -1, err
	}
	if st.Dev != top.Dev {
		_ = unix.Close(fd)
		return -1, unix.EXDEV
	}
	return fd, nil
}

// dupRoot returns a new descriptor, with its own file offset, for the
// workspace directory.
func (w *Workspace) dupRoot() (int, error) {
	return unix.Openat(w.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}

// openDir opens the existing directory rel ("" for the workspace itself)
// for use as a dirfd. The caller closes the descriptor.
func (w *Workspace) openDir(rel string) (int, error) {
	if rel == "" {
		return w.dupRoot()
	}
	return w.openat(w.fd, rel, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK, 0)
}

// mkdirAll opens the directory rel, creating missing components with mode
// 0700, one component at a time, each resolved without following symlinks.
// A symlink on the way gives ELOOP; a non-directory gives ErrNotRegular.
// The caller closes the descriptor.
func (w *Workspace) mkdirAll(rel string) (int, error) {
	cur, err := w.dupRoot()
	if err != nil || rel == "" {
		return cur, err
	}
	for _, c := range strings.Split(rel, "/") {
		var nfd int
		for attempt := 0; ; attempt++ {
			nfd, err = w.openat(cur, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK, 0)
			if !errors.Is(err, unix.ENOENT) || attempt == 3 {
				break
			}
			// mkdirat never follows a symlink at its last component: an
			// existing symlink gives EEXIST and the next open refuses it.
			if err = unix.Mkdirat(cur, c, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
				break
			}
		}
		_ = unix.Close(cur)
		if errors.Is(err, unix.ENOTDIR) {
			return -1, ErrNotRegular
		}
		if err != nil {
			return -1, err
		}
		cur = nfd
	}
	return cur, nil
}

// lstatAt is fstatat(AT_SYMLINK_NOFOLLOW), retried on EINTR.
func lstatAt(dirfd int, name string, st *unix.Stat_t) error {
	for {
		err := unix.Fstatat(dirfd, name, st, unix.AT_SYMLINK_NOFOLLOW)
		if err != unix.EINTR {
			return err
		}
	}
}
