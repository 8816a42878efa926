// Package envtree owns the integrity of an environment tree: the read-only
// directory (site-packages, node_modules, a matplotlibrc, a font cache) that
// the helper binds into a sandbox when a request names an environment.
//
// It computes a tree's content digest and writes a manifest of every entry
// at registration, and checks a tree against that manifest later in two
// ways: Quick (lstat of every entry: inode, size, mode, mtime and ctime must
// be as registered; cheap enough for every launch) and Full (re-reads and
// re-hashes every file; at supervisor start, periodically, and in doctor).
//
// The trade-off, honestly: Quick cannot see a change that keeps inode, size,
// mtime and ctime. ctime cannot be set from user space (utimensat sets only
// atime and mtime; the kernel stamps ctime on every inode change), so such
// a change needs a clock change or a write to the block device below the
// file system: root's powers, and root can rewrite the helper config too.
// Full catches it anyway, at its next run.
//
// Every entry must be root-owned, never writable by group or others, and
// carry no setuid or setgid bit (and be no device: only files, directories
// and symlinks), at registration (Build) and at every launch (Quick): an
// entry another uid owns or may write could be changed between the launch
// check and the moment an interpreter reads it -- hours later for a
// session's kernel -- and run code in other callers' sandboxes.
//
// It also owns the root side of environments (install.go), run by
// sandboxctl as root, never by the helper: unpacking a build's tar (bytes a
// sandbox produced: untrusted), installing the tree at its content-
// addressed place, and registering or removing it in the helper's
// root-owned config.
//
// It must never follow a symlink out of the tree, never trust a manifest
// it did not check is root-owned (the caller checks), never extract
// anything from a tar but regular files and directories below the target
// directory, created new with fixed modes, and never write a helper config
// that does not validate.
package envtree

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/sandboxd/sandboxd/internal/atomicfile"
)

// ManifestVersion is the only manifest version this code reads.
const ManifestVersion = 1

// MaxEntries bounds a tree: past it, registration refuses (a tree that big
// belongs in an image, not in a per-launch check).
const MaxEntries = 200_000

// Entry is one file, directory or symlink of the tree, by its path relative
// to the root ("." is the root itself).
type Entry struct {
	Path   string `json:"path"`
	Type   string `json:"type"` // "file", "dir" or "symlink"
	Mode   uint32 `json:"mode"` // permission bits
	Size   int64  `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"` // files
	Target string `json:"target,omitempty"` // symlinks
	// The stat facts Quick compares. They are not part of the digest: the
	// same content copied elsewhere has the same digest.
	Ino     uint64 `json:"ino"`
	MtimeNS int64  `json:"mtime_ns"`
	CtimeNS int64  `json:"ctime_ns"`
}

// Manifest is what registration records about a tree.
type Manifest struct {
	Version int     `json:"version"`
	Digest  string  `json:"digest"`
	Entries []Entry `json:"entries"`
}

// Digest returns "sha256:<hex>" over the content of the entries: each
// entry's path, type, mode, size, file hash and link target, in path order.
// Stat-only facts (inode, times) are left out so that one content has one
// digest wherever it lies.
func Digest(entries []Entry) string {
	sorted := append([]Entry(nil), entries...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	h := sha256.New()
	for _, e := range sorted {
		// NUL-separated and NUL-terminated: no path holds a NUL, so no two
		// different lists give the same stream.
		fmt.Fprintf(h, "%s\x00%s\x00%o\x00%d\x00%s\x00%s\x00\x00", e.Path, e.Type, e.Mode, e.Size, e.SHA256, e.Target)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// EmptyDigest is the digest of an environment with no tree (e.g. minimal).
var EmptyDigest = Digest(nil)

// Build walks root and returns its manifest. Anything but regular files,
// directories and symlinks (devices, sockets, fifos) is refused: an
// environment is data and code, never a device. So is an entry that is
// not root's alone (checkOwner).
func Build(root string) (*Manifest, error) { return build(root, true) }

// build is Build, checking owners and modes or not (Full compares first,
// so that a changed tree is reported as changed).
func build(root string, owners bool) (*Manifest, error) {
	var entries []Entry
	err := walk(root, func(rel string, st *syscall.Stat_t, abs string) error {
		if owners {
			if err := checkOwner(rel, st); err != nil {
				return err
			}
		}
		e, err := entryOf(rel, abs, st, true)
		if err != nil {
			return err
		}
		entries = append(entries, e)
		if len(entries) > MaxEntries {
			return fmt.Errorf("environment tree %q has more than %d entries", root, MaxEntries)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Path < entries[j].Path })
	return &Manifest{Version: ManifestVersion, Digest: Digest(entries), Entries: entries}, nil
}

// walk calls fn for root and everything below it, never following symlinks.
func walk(root string, fn func(rel string, st *syscall.Stat_t, abs string) error) error {
	return filepath.WalkDir(root, func(abs string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("walk environment tree: %w", err)
		}
		rel, err := filepath.Rel(root, abs)
		if err != nil {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(abs, &st); err != nil {
			return fmt.Errorf("lstat %q: %w", abs, err)
		}
		return fn(filepath.ToSlash(rel), &st, abs)
	})
}

func entryOf(rel, abs string, st *syscall.Stat_t, hash bool) (Entry, error) {
	e := Entry{Path: rel, Mode: st.Mode & 0o7777, Ino: st.Ino,
		MtimeNS: st.Mtim.Nano(), CtimeNS: st.Ctim.Nano()}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFREG:
		e.Type, e.Size = "file", st.Size
		if hash {
			sum, err := fileSHA256(abs)
			if err != nil {
				return e, err
			}
			e.SHA256 = sum
		}
	case syscall.S_IFDIR:
		e.Type = "dir"
	case syscall.S_IFLNK:
		t, err := os.Readlink(abs)
		if err != nil {
			return e, fmt.Errorf("readlink %q: %w", abs, err)
		}
		e.Type, e.Target = "symlink", t
	default:
		return e, fmt.Errorf("%q is neither a file, a directory nor a symlink (mode %o); an environment holds none", abs, st.Mode)
	}
	return e, nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return "", fmt.Errorf("open %q: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read %q: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ErrNotRootOnly is the class of every "an entry is not root's alone"
// error: owned by another uid, writable by group or others, setuid or
// setgid.
var ErrNotRootOnly = errors.New("environment tree entry is not root's alone")

// checkOwner refuses an entry that root does not own, that group or others
// may write, or that is setuid or setgid. A symlink's own mode bits mean
// nothing (always 0777), its owner does.
func checkOwner(rel string, st *syscall.Stat_t) error {
	if st.Uid != 0 {
		return fmt.Errorf("%w: %s is owned by uid %d (chown -R root: the tree)", ErrNotRootOnly, rel, st.Uid)
	}
	if st.Mode&syscall.S_IFMT == syscall.S_IFLNK {
		return nil
	}
	if st.Mode&0o022 != 0 {
		return fmt.Errorf("%w: %s is writable by group or others (mode %o; chmod -R go-w the tree)", ErrNotRootOnly, rel, st.Mode&0o7777)
	}
	if st.Mode&(syscall.S_ISUID|syscall.S_ISGID) != 0 {
		return fmt.Errorf("%w: %s is setuid or setgid (mode %o)", ErrNotRootOnly, rel, st.Mode&0o7777)
	}
	return nil
}

// ErrModified is the class of every "the tree is not what was registered"
// error, so a caller can tell it from an unreadable tree.
var ErrModified = errors.New("environment tree modified after registration")

func modified(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrModified, fmt.Sprintf(format, args...))
}

// Quick checks root against m by lstat alone: the same set of paths, each
// with the registered type, mode, size, inode, mtime and ctime. It reads no
// file content (see the package doc for what it cannot see).
func Quick(root string, m *Manifest) error {
	if err := m.check(); err != nil {
		return err
	}
	want := make(map[string]*Entry, len(m.Entries))
	for i := range m.Entries {
		want[m.Entries[i].Path] = &m.Entries[i]
	}
	seen := 0
	err := walk(root, func(rel string, st *syscall.Stat_t, abs string) error {
		w, ok := want[rel]
		if !ok {
			return modified("%s was added", rel)
		}
		seen++
		got, err := entryOf(rel, abs, st, false)
		if err != nil {
			return err
		}
		switch {
		case got.Type != w.Type:
			return modified("%s is a %s, registered as a %s", rel, got.Type, w.Type)
		case got.Mode != w.Mode:
			return modified("%s has mode %o, registered %o", rel, got.Mode, w.Mode)
		case got.Size != w.Size:
			return modified("%s is %d bytes, registered %d", rel, got.Size, w.Size)
		case got.Target != w.Target:
			return modified("symlink %s points to %q, registered %q", rel, got.Target, w.Target)
		case got.Ino != w.Ino || got.MtimeNS != w.MtimeNS || got.CtimeNS != w.CtimeNS:
			return modified("%s was changed (inode, mtime or ctime differ from the registration)", rel)
		}
		// As registered, but that is not enough: a manifest written before
		// this check existed may record such an entry.
		return checkOwner(rel, st)
	})
	if err != nil {
		return err
	}
	if seen != len(want) {
		return modified("%d registered entries are missing", len(want)-seen)
	}
	return nil
}

// Full re-hashes root and compares its digest with m's (and m's own digest
// with its entries); it names the first entry that differs.
func Full(root string, m *Manifest) error {
	if err := m.check(); err != nil {
		return err
	}
	now, err := build(root, false)
	if err != nil {
		return err
	}
	if now.Digest == m.Digest {
		return walk(root, func(rel string, st *syscall.Stat_t, _ string) error { return checkOwner(rel, st) })
	}
	old := make(map[string]Entry, len(m.Entries))
	for _, e := range m.Entries {
		old[e.Path] = e
	}
	for _, e := range now.Entries {
		o, ok := old[e.Path]
		if !ok {
			return modified("%s was added", e.Path)
		}
		if o.SHA256 != e.SHA256 || o.Type != e.Type || o.Mode != e.Mode || o.Size != e.Size || o.Target != e.Target {
			return modified("%s differs from the registration (content digest %s, registered %s)", e.Path, now.Digest, m.Digest)
		}
		delete(old, e.Path)
	}
	for p := range old {
		return modified("%s was removed", p)
	}
	return modified("content digest %s, registered %s", now.Digest, m.Digest)
}

// check verifies the manifest is self-consistent: its digest is that of
// its entries, so a manifest edited without re-registration is caught.
func (m *Manifest) check() error {
	if m.Version != ManifestVersion {
		return fmt.Errorf("environment manifest version %d not supported (want %d)", m.Version, ManifestVersion)
	}
	if d := Digest(m.Entries); d != m.Digest {
		return modified("the manifest's entries hash to %s, but it records %s", d, m.Digest)
	}
	return nil
}

// MaxManifestSize bounds a manifest file.
const MaxManifestSize = 64 << 20

// ReadManifest reads and decodes a manifest file strictly. The caller must
// have checked the file is root-owned.
func ReadManifest(path string) (*Manifest, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open environment manifest: %w", err)
	}
	defer f.Close()
	dec := json.NewDecoder(io.LimitReader(f, MaxManifestSize))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("decode environment manifest %q: %w", path, err)
	}
	return &m, m.check()
}

// WriteManifest writes m to path (0644), atomically and durably.
func WriteManifest(path string, m *Manifest) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("write environment manifest: %w", err)
	}
	return nil
}

// IsModified reports whether err says the tree changed (rather than that it
// could not be read).
func IsModified(err error) bool { return errors.Is(err, ErrModified) }

// trimReason keeps an error short enough for an API message.
func trimReason(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return strings.TrimSpace(s)
}

// Reason is err as one short line for an API message or a doctor check.
func Reason(err error) string { return trimReason(err.Error()) }

// CheckRegistered is the full check of a registered tree: the manifest
// decodes and is self-consistent, its digest is the registered one, and
// the tree is as the manifest says, by lstat (Quick) and by content (Full).
func CheckRegistered(root, manifest, digest string) error {
	m, err := ReadManifest(manifest)
	if err != nil {
		return err
	}
	if m.Digest != digest {
		return modified("the manifest records digest %s, the helper config %s", m.Digest, digest)
	}
	if err := Quick(root, m); err != nil {
		return err
	}
	return Full(root, m)
}
