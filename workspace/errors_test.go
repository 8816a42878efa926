package workspace

import (
	"fmt"
	"testing"

	"github.com/sandboxd/sandboxd/errdefs"
)

// TestErrorClasses: every package error wraps the errdefs class that
// decides its API answer, also when wrapped with the path and errno the
// way pathErr does it.
func TestErrorClasses(t *testing.T) {
	tests := []struct {
		err   error
		class error
	}{
		{ErrEscape, errdefs.ErrForbidden},
		{ErrNotRegular, errdefs.ErrForbidden},
		{ErrPermission, errdefs.ErrForbidden},
		{ErrNotFound, errdefs.ErrNotFound},
		{ErrQuota, errdefs.ErrQuota},
		{ErrTreeTooLarge, errdefs.ErrQuota},
		{ErrTooLarge, errdefs.ErrTooLarge},
		{ErrInvalidPath, errdefs.ErrInvalid},
		{ErrNotEmpty, errdefs.ErrConflict},
		{ErrClosed, errdefs.ErrInternal},
		{ErrBadArchive, errdefs.ErrInvalid},
	}
	for _, tc := range tests {
		wrapped := fmt.Errorf("workspace: put %q: %w (%w)", "a", tc.err, fmt.Errorf("errno"))
		if got := errdefs.Class(wrapped); got != tc.class {
			t.Errorf("%v: class %v, want %v", tc.err, got, tc.class)
		}
	}
}
