package workspace

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

const (
	// MaxPathLen is the longest path, in bytes, relative to the workspace.
	MaxPathLen = 4096
	// maxNameLen is the longest single component (NAME_MAX).
	maxNameLen = 255
	// TempPrefix starts the name of every temporary upload file. Names
	// with this prefix are reserved: ValidatePath refuses them, List,
	// Collect and Archive skip them, Sweep removes them.
	TempPrefix = ".sandboxd-upload-"
)

// ValidatePath checks a path received from a client: relative to the
// workspace, clean, no "..", no NUL, backslash or control character, valid
// UTF-8, at most MaxPathLen bytes, no component over 255 bytes, no component
// with the reserved TempPrefix. An absolute path or a ".." component gives
// ErrEscape; anything else wrong gives ErrInvalidPath.
//
// ValidatePath is a syntax check only; it grants nothing. Every operation
// still resolves the path in the kernel with symlinks refused.
func ValidatePath(p string) error {
	bad := func(why string) error {
		return fmt.Errorf("workspace: path %q: %s: %w", p, why, ErrInvalidPath)
	}
	if p == "" {
		return bad("empty")
	}
	if len(p) > MaxPathLen {
		return fmt.Errorf("workspace: path of %d bytes: longer than %d: %w", len(p), MaxPathLen, ErrInvalidPath)
	}
	if !utf8.ValidString(p) {
		return bad("not valid UTF-8")
	}
	for _, r := range p {
		switch {
		case r == 0:
			return bad("contains NUL")
		case r == '\\':
			return bad("contains a backslash")
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			return bad("contains a control character")
		}
	}
	if p[0] == '/' {
		return fmt.Errorf("workspace: path %q is absolute: %w", p, ErrEscape)
	}
	comps := strings.Split(p, "/")
	for _, c := range comps {
		if c == ".." {
			return fmt.Errorf("workspace: path %q has a \"..\" component: %w", p, ErrEscape)
		}
	}
	for _, c := range comps {
		switch {
		case c == "" || c == ".":
			return bad("not clean (empty or \".\" component, or trailing slash)")
		case len(c) > maxNameLen:
			return bad(fmt.Sprintf("a component is longer than %d bytes", maxNameLen))
		case strings.HasPrefix(c, TempPrefix):
			return bad("the prefix " + TempPrefix + " is reserved")
		}
	}
	return nil
}

// splitPath splits a validated path into its directory ("" for the
// workspace root) and its last component.
func splitPath(p string) (dir, base string) {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return "", p
	}
	return p[:i], p[i+1:]
}

func joinPath(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

func isTempName(name string) bool { return strings.HasPrefix(name, TempPrefix) }
