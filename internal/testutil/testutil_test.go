package testutil

import (
	"fmt"
	"strings"
	"testing"
)

// recorder is a testing.TB that records how the helper stopped the test.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Skip(args ...any)                  { r.skipped = fmt.Sprint(args...) }
func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

func TestSkipOrFail(t *testing.T) {
	for _, tc := range []struct {
		ci         string
		skip, fail bool
	}{
		{ci: "", skip: true},
		{ci: "false", skip: true},
		{ci: "true", fail: true},
	} {
		t.Run("CI="+tc.ci, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			r := &recorder{}
			SkipOrFail(r, "no widget")
			if (r.skipped != "") != tc.skip || (r.failed != "") != tc.fail {
				t.Fatalf("skipped %q, failed %q; want skip %v, fail %v", r.skipped, r.failed, tc.skip, tc.fail)
			}
			if msg := r.skipped + r.failed; !strings.Contains(msg, "no widget") {
				t.Errorf("the reason is lost: %q", msg)
			}
		})
	}
}
