package policy

import (
	"errors"
	"testing"

	"github.com/sandboxd/sandboxd/errdefs"
)

// TestMode: the mode rules (kernel is the session default, process the
// one-shot default; one-shot kernel is a throwaway kernel; kernel is
// refused for shell).
func TestMode(t *testing.T) {
	for _, tc := range []struct {
		mode, runtime string
		session       bool
		want          string // "" = refused
	}{
		{"", "python", true, "kernel"},
		{"", "javascript", true, "kernel"},
		{"", "shell", true, "process"},
		{"", "python", false, "process"},
		{"process", "python", true, "process"},
		{"process", "shell", false, "process"},
		{"kernel", "python", true, "kernel"},
		{"kernel", "python", false, "kernel"},
		{"kernel", "javascript", false, "kernel"},
		{"kernel", "shell", true, ""},
		{"kernel", "shell", false, ""},
		{"Kernel", "python", true, ""},
		{"repl", "python", true, ""},
	} {
		got, err := Mode(tc.mode, tc.runtime, tc.session)
		if tc.want == "" {
			if err == nil || !errors.Is(err, errdefs.ErrInvalid) {
				t.Errorf("Mode(%q, %q, %v) = %q, %v; want an invalid-argument refusal", tc.mode, tc.runtime, tc.session, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Mode(%q, %q, %v) = %q, %v; want %q", tc.mode, tc.runtime, tc.session, got, err, tc.want)
		}
	}
}

// TestEntrypoint: entrypoint and inputs rules.
func TestEntrypoint(t *testing.T) {
	long := make([]byte, 65)
	for i := range long {
		long[i] = 'a'
	}
	for _, tc := range []struct {
		name, entry, inputs, runtime string
		ok                           bool
		want                         string
	}{
		{"none", "", "", "python", true, ""},
		{"null inputs", "", "null", "python", true, ""},
		{"main with object", "main", ` {"a":1} `, "python", true, `{"a":1}`},
		{"main without inputs", "main", "", "javascript", true, ""},
		{"inputs without entrypoint", "", `{"a":1}`, "python", false, ""},
		{"array inputs", "main", `[1]`, "python", false, ""},
		{"string inputs", "main", `"x"`, "python", false, ""},
		{"not an identifier", "main()", "", "python", false, ""},
		{"starts with a digit", "1main", "", "python", false, ""},
		{"non-ASCII", "mäin", "", "python", false, ""},
		{"65 bytes", string(long), "", "python", false, ""},
		{"64 bytes", string(long[:64]), "", "python", true, ""},
		{"shell entrypoint", "main", "", "shell", false, ""},
		{"shell inputs", "", `{"a":1}`, "shell", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Entrypoint(tc.entry, []byte(tc.inputs), tc.runtime)
			if !tc.ok {
				if !errors.Is(err, errdefs.ErrInvalid) {
					t.Fatalf("got %s, %v; want a refusal", got, err)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
