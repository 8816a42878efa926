package policy_test

import (
	"errors"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/policy"
)

// FuzzValidateWorkspacePath fuzzes the lexical path guard that every staged
// file, file API path and artifact pattern passes before anything touches
// the disk. It checks the guard against properties stated independently of
// its code: whatever it accepts is relative, clean, local (filepath.IsLocal),
// free of NUL, control characters and backslashes, within the length
// limits, and stays below the workspace when joined to it; whatever it
// refuses is refused as the caller's mistake (ErrInvalid, a 400), never as
// something else. An accepted artifact pattern must be an accepted path and
// a valid glob.
//
// `go test` runs the seed corpus in testdata/fuzz/FuzzValidateWorkspacePath;
// `make fuzz` explores further.
func FuzzValidateWorkspacePath(f *testing.F) {
	f.Fuzz(func(t *testing.T, p string) {
		err := policy.ValidateWorkspacePath(p)
		if err != nil {
			if !errors.Is(err, policy.ErrInvalid) {
				t.Fatalf("ValidateWorkspacePath(%q) = %v; a refused path must match ErrInvalid (400)", p, err)
			}
			if err.Error() == "" {
				t.Fatalf("ValidateWorkspacePath(%q): empty error message", p)
			}
			if policy.ValidateArtifactPattern(p) == nil {
				t.Fatalf("ValidateArtifactPattern(%q) accepts a path ValidateWorkspacePath refuses (%v)", p, err)
			}
			return
		}
		checkAcceptedPath(t, p)
		if perr := policy.ValidateArtifactPattern(p); perr == nil {
			if _, merr := path.Match(p, ""); merr != nil {
				t.Fatalf("ValidateArtifactPattern(%q) accepted a bad glob: %v", p, merr)
			}
		} else if !errors.Is(perr, policy.ErrInvalid) {
			t.Fatalf("ValidateArtifactPattern(%q) = %v; want an ErrInvalid", p, perr)
		}
	})
}

// checkAcceptedPath states what an accepted workspace path is, without
// reusing the guard's own code.
func checkAcceptedPath(t *testing.T, p string) {
	t.Helper()
	switch {
	case p == "" || len(p) > policy.MaxPathBytes:
		t.Fatalf("accepted %q of length %d (want 1..%d)", p, len(p), policy.MaxPathBytes)
	case strings.HasPrefix(p, "/"):
		t.Fatalf("accepted absolute path %q", p)
	case strings.ContainsAny(p, "\x00\\"):
		t.Fatalf("accepted %q with a NUL or backslash", p)
	case !filepath.IsLocal(p):
		t.Fatalf("accepted %q, which filepath.IsLocal says is not local", p)
	case path.Clean(p) != p || p == ".":
		t.Fatalf("accepted %q, not in clean form (%q)", p, path.Clean(p))
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c < 0x20 || c == 0x7f {
			t.Fatalf("accepted %q with control byte %#x at %d", p, c, i)
		}
	}
	for _, elem := range strings.Split(p, "/") {
		if elem == "" || elem == "." || elem == ".." || len(elem) > 255 {
			t.Fatalf("accepted %q with component %q", p, elem)
		}
	}
	const ws = "/workspace"
	joined := path.Join(ws, p)
	if !strings.HasPrefix(joined, ws+"/") || strings.TrimPrefix(joined, ws+"/") != p {
		t.Fatalf("accepted %q, which joins to %q: not the same file below %s", p, joined, ws)
	}
	if j := filepath.Join("/srv/sandboxd/workspaces/w1", p); !strings.HasPrefix(j, "/srv/sandboxd/workspaces/w1/") {
		t.Fatalf("accepted %q, which escapes a workspace directory: %q", p, j)
	}
}
