package errdefs

import (
	"errors"
	"fmt"
	"testing"
)

func TestClass(t *testing.T) {
	cause := errors.New("EACCES")
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"bare class", ErrNotFound, ErrNotFound},
		{"wrapped class", fmt.Errorf("session s-1: %w", ErrConflict), ErrConflict},
		{"Error", New(ErrUnavailable, "bwrap missing", "apt-get install bubblewrap", cause), ErrUnavailable},
		{"Error wrapped", fmt.Errorf("launch: %w", New(ErrQuota, "full", "", nil)), ErrQuota},
		{"Error whose cause has an earlier class", New(ErrUnavailable, "staging failed", "", fmt.Errorf("stage: %w", ErrInvalid)), ErrUnavailable},
		{"Error whose cause is an Error", New(ErrInternal, "open workspace", "", New(ErrNotFound, "gone", "", nil)), ErrInternal},
		{"unclassified", cause, ErrInternal},
		{"nil-free chain", fmt.Errorf("x: %w", cause), ErrInternal},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Class(c.err); got != c.want {
				t.Fatalf("Class = %v, want %v", got, c.want)
			}
		})
	}
}

func TestErrorTextAndFix(t *testing.T) {
	cause := errors.New("no such file")
	e := New(ErrUnavailable, "bubblewrap not found", "apt-get install bubblewrap", cause)
	if got, want := e.Error(), "bubblewrap not found; fix: apt-get install bubblewrap (no such file)"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(e, cause) || !errors.Is(e, ErrUnavailable) {
		t.Fatal("Error must unwrap to both its class and its cause")
	}
	if got := FixOf(fmt.Errorf("outer: %w", e)); got != "apt-get install bubblewrap" {
		t.Fatalf("FixOf = %q", got)
	}
	if got := FixOf(cause); got != "" {
		t.Fatalf("FixOf(plain) = %q, want empty", got)
	}
	if got := New(ErrInvalid, "bad", "", nil).Error(); got != "bad" {
		t.Fatalf("Error() without fix/cause = %q", got)
	}
}
