// Package workspace owns traversal-resistant file access to one workspace
// directory whose contents a hostile payload controls and may change
// concurrently: the session file API (Put, Open, Delete, List), the upload
// quota (Usage), artifact collection (Collect), workspace archives
// (Archive, Restore), and removing a workspace whole (Remove). The directory itself belongs to the supervisor's uid;
// everything below it is payload-controlled, at any moment, including while
// a call of this package is running.
//
// The package must never:
//
//   - follow a symlink, not even one that points back inside the workspace:
//     a symlink as an intermediate component or as the target is refused
//     (ErrEscape), listed as a symlink, archived as a symlink, or deleted
//     itself — never resolved;
//   - check a path string and then open it: every name is resolved relative
//     to a directory file descriptor held for the call, by the kernel, in one
//     step that refuses symlinks, and whatever an open returns is re-checked
//     with fstat on the descriptor before a byte is read;
//   - leave a partial upload visible under its name: an upload streams into a
//     temporary file created with O_EXCL in the target's directory (names
//     starting with ".sandboxd-upload-", reserved, hidden by List and removed
//     by Sweep), is fsynced, and only then renamed over the target with
//     renameat relative to the directory descriptor; a crash leaves the old
//     file or the new one, never a mix;
//   - block on a FIFO, socket or device the payload planted: the type is
//     checked with fstatat(AT_SYMLINK_NOFOLLOW) before an open, every open of
//     a payload file uses O_NONBLOCK|O_NOCTTY, and only a descriptor whose
//     fstat says "regular file" is ever read;
//   - write into an inode it did not create: uploads always produce a new
//     inode, so a hard link the payload planted is replaced, never written
//     through.
//
// # Resolution: openat2, not os.Root
//
// Every lookup below the workspace goes through openat2(2) with
// RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
// RESOLVE_NO_XDEV, relative to the workspace's directory descriptor (opened
// once by Open). os.Root was rejected because it follows symlinks whose
// target stays inside the root: the invariant here is "never follow a
// symlink", which os.Root cannot express, and a payload-controlled symlink
// inside the workspace would make the outcome of a request depend on a
// target the payload can swap while the request runs. RESOLVE_NO_SYMLINKS
// makes the kernel refuse (ELOOP) any symlink on the path, atomically with
// the lookup, so no swap can win a race against it.
//
// Where openat2 is missing (ENOSYS on kernels before 5.6, or filtered by a
// seccomp profile), the package falls back to walking the path one component
// at a time with openat(O_PATH|O_NOFOLLOW) and fstat on each descriptor
// (a symlink is refused, a component on another device is refused); paths
// never contain ".." (ValidatePath), so the walk cannot climb out. Both
// resolvers are exercised by the tests.
//
// # Decisions
//
// Hard links. A payload can only link an inode it can already see on the
// workspace's own filesystem mount (linkat does not cross mounts), so a hard
// link exposes nothing the payload could not copy in itself. Open and Collect
// therefore return a hard-linked file's content; Put replaces the link with a
// new inode (the other links keep the old content); Delete removes the name
// only. Usage counts each inode once. Archive stores each link as an
// independent regular file; Restore never creates hard links.
//
// Usage is the sum of st_size of the regular files below the workspace, each
// inode counted once (the temporary files of uploads included); directories,
// symlinks and special files count 0. A sparse file counts at its apparent
// size, which is conservative. The quota is enforced by Put only: an upload
// fails with ErrQuota when usage + new size - size of the replaced file
// (counted only if that file has a single link) > quota; uploads are
// serialised per Workspace so two cannot spend the same free space. A
// payload writing during an exec is not limited here.
//
// Delete removes a file, a symlink (itself), a FIFO or socket, or an empty
// directory; a non-empty directory gives ErrNotEmpty.
//
// List reports every entry (regular files, directories, symlinks and special
// files, the kind in Mode), never following symlinks, hiding temporary upload
// files. Every walk (List, Usage, Sweep, Archive, and the directories Collect
// can reach) is bounded by MaxEntries entries and MaxPathLen bytes of path,
// beyond which ErrTreeTooLarge (an ErrQuota) is returned rather than a
// silently partial answer: in effect an entry quota, since Put needs Usage,
// so a workspace with more than MaxEntries entries refuses uploads (507)
// until entries are deleted. A walk holds one directory descriptor at a
// time, reopening each directory from the workspace root with the resolver,
// so depth costs no descriptors.
//
// The race-freedom above assumes the payload cannot rename a directory of
// the workspace to a place outside it; this holds because rename(2) does not
// cross mounts and the payload sees only the workspace's mount of that
// filesystem.
//
// Every error wraps a class of package errdefs, which the supervisor maps
// to the API once: ErrInvalidPath 400, ErrEscape (and ErrNotRegular,
// ErrPermission that wrap it) 403, ErrNotFound 404, ErrNotEmpty 409,
// ErrTooLarge 413, ErrQuota (and ErrTreeTooLarge) 507.
package workspace
