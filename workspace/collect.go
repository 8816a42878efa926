package workspace

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/api"
)

// Artifact is one collected file, in the exec result's wire form.
type Artifact = api.Artifact

// ArtifactLimits bound Collect. A zero or negative field takes its default.
type ArtifactLimits struct {
	MaxFileBytes  int64 // default 20 MiB
	MaxFiles      int64 // default 20
	MaxTotalBytes int64 // default 50 MiB
}

// Artifact limit defaults.
const (
	DefaultMaxArtifactFileBytes  = 20 << 20
	DefaultMaxArtifactFiles      = 20
	DefaultMaxArtifactTotalBytes = 50 << 20
)

func (l ArtifactLimits) withDefaults() ArtifactLimits {
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = DefaultMaxArtifactFileBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultMaxArtifactFiles
	}
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = DefaultMaxArtifactTotalBytes
	}
	return l
}

// validatePattern checks an artifact glob: relative, no "..", no empty or
// "." component, no NUL or backslash, well-formed for path.Match.
func validatePattern(p string) error {
	bad := func(why string, sentinel error) error {
		return fmt.Errorf("workspace: artifact pattern %q: %s: %w", p, why, sentinel)
	}
	switch {
	case p == "":
		return bad("empty", ErrInvalidPath)
	case len(p) > MaxPathLen:
		return bad("too long", ErrInvalidPath)
	case strings.ContainsAny(p, "\x00\\"):
		return bad("contains NUL or a backslash", ErrInvalidPath)
	case p[0] == '/':
		return bad("absolute", ErrEscape)
	}
	for _, c := range strings.Split(p, "/") {
		switch c {
		case "..":
			return bad(`has a ".." component`, ErrEscape)
		case "", ".":
			return bad("not clean", ErrInvalidPath)
		}
	}
	if _, err := path.Match(p, ""); err != nil {
		return bad(err.Error(), ErrInvalidPath)
	}
	return nil
}

// Collect returns the regular files whose path relative to the workspace
// matches one of patterns (path.Match globs: "*" does not cross "/"; "**"
// is not special), sorted by path, each read through a descriptor opened
// without following any symlink and checked with fstat. Symlinks, FIFOs,
// sockets, devices and directories are never matched; temporary upload
// files are skipped. Only directories a pattern can reach are walked.
//
// Limits: a file larger than MaxFileBytes (by fstat, or by what a bounded
// read of MaxFileBytes+1 bytes finds, so a file growing during the read is
// caught) is skipped; a file that would take the total past MaxTotalBytes is
// skipped; collection stops at MaxFiles. Any of these sets truncated. A file
// that vanishes or changes type between the walk and the open is skipped
// silently (the payload is racing). Size, SHA256 and the content are all of
// the bytes actually read.
func (w *Workspace) Collect(patterns []string, lim ArtifactLimits) (arts []Artifact, truncated bool, err error) {
	if len(patterns) == 0 {
		return nil, false, nil
	}
	for _, p := range patterns {
		if err := validatePattern(p); err != nil {
			return nil, false, err
		}
	}
	lim = lim.withDefaults()
	if err := w.use(); err != nil {
		return nil, false, err
	}
	defer w.done()

	var matches []string
	err = w.walk(func(e *entry) error {
		if isTempName(e.name) {
			return errSkipDir
		}
		if e.isDir() && !mayMatchBelow(patterns, e.rel) {
			return errSkipDir
		}
		if e.st.Mode&unix.S_IFMT != unix.S_IFREG {
			return nil
		}
		for _, p := range patterns {
			if ok, _ := path.Match(p, e.rel); ok {
				matches = append(matches, e.rel)
				break
			}
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	sort.Strings(matches)

	var total int64
	for _, rel := range matches {
		if int64(len(arts)) >= lim.MaxFiles {
			truncated = true
			break
		}
		data, tooBig, err := w.readArtifact(rel, lim.MaxFileBytes)
		if err != nil {
			if skippable(err) {
				continue
			}
			return nil, false, err
		}
		if tooBig || total+int64(len(data)) > lim.MaxTotalBytes {
			truncated = true
			continue
		}
		total += int64(len(data))
		sum := sha256.Sum256(data)
		arts = append(arts, Artifact{
			Path:          rel,
			Size:          int64(len(data)),
			SHA256:        hex.EncodeToString(sum[:]),
			ContentBase64: base64.StdEncoding.EncodeToString(data),
		})
	}
	return arts, truncated, nil
}

// mayMatchBelow reports whether some pattern could match a path below the
// directory dir, so Collect walks only the directories its patterns can
// reach (a large node_modules elsewhere costs nothing). In a pattern without
// a character class, no metacharacter matches "/", so the pattern matches
// below dir only if it has more components than dir and its leading
// components match dir's one by one. A class can match "/", so a pattern
// with one prunes nothing.
func mayMatchBelow(patterns []string, dir string) bool {
	dcomps := strings.Split(dir, "/")
	for _, p := range patterns {
		if strings.ContainsRune(p, '[') {
			return true
		}
		pcomps := strings.Split(p, "/")
		if len(pcomps) <= len(dcomps) {
			continue
		}
		all := true
		for i, d := range dcomps {
			if ok, _ := path.Match(pcomps[i], d); !ok {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// readArtifact reads the regular file rel, at most max bytes; tooBig when it
// is larger.
func (w *Workspace) readArtifact(rel string, max int64) (data []byte, tooBig bool, err error) {
	f, st, err := w.openRegular(rel)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	if st.Size > max {
		return nil, true, nil
	}
	data, err = io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, false, pathErr("read", rel, err)
	}
	if int64(len(data)) > max {
		return nil, true, nil
	}
	return data, false, nil
}

// skippable reports an open error caused by the payload changing the tree
// under Collect: the entry is skipped, not reported.
func skippable(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, ErrEscape)
}
