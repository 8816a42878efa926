// Package testutil holds the test helpers every package shares. Its one
// rule: a test that cannot run here says why and skips, except under
// CI=true, where it fails — a skipped privileged test would hide exactly
// the gap it exists to catch (containerd's pkg/testutil.RequiresRoot is
// the model; the failing-under-CI policy is sandboxd's own).
//
// It must never be imported by non-test code.
package testutil

import (
	"os"
	"strconv"
	"testing"
)

// InCI reports whether the tests run under CI (CI=true), where nothing may
// skip.
func InCI() bool { return os.Getenv("CI") == "true" }

// SkipOrFail stops the test: a skip with reason, or under CI=true a failure.
func SkipOrFail(t testing.TB, reason string) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s (CI=true forbids skipping)", reason)
		return
	}
	t.Skip(reason)
}

// RequireRoot stops a test that needs root (why says what for) unless the
// effective uid is 0: a skip, or under CI=true a failure.
func RequireRoot(t testing.TB, why string) {
	t.Helper()
	if euid := os.Geteuid(); euid != 0 {
		SkipOrFail(t, "needs root to "+why+" (euid "+strconv.Itoa(euid)+")")
	}
}
