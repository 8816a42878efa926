package nsinit

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

// TestPreludeReasonsMatchHeader keeps PreludeReason's names in step with
// enum sbx_reason in prelude/prelude.h: a number must never be misnamed in
// a report the supervisor acts on.
func TestPreludeReasonsMatchHeader(t *testing.T) {
	b, err := os.ReadFile("prelude/prelude.h")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^\s*SBX_R_([A-Z_]+) = (\d+),`)
	ms := re.FindAllStringSubmatch(string(b), -1)
	if len(ms) == 0 {
		t.Fatal("no SBX_R_ values in prelude.h")
	}
	for i, m := range ms {
		n, _ := strconv.Atoi(m[2])
		if n != i+1 {
			t.Errorf("SBX_R_%s = %d, want %d (append only, no gaps)", m[1], n, i+1)
		}
	}
	if len(preludeReasons) != len(ms)+1 {
		t.Fatalf("%d reason names for %d SBX_R_ values", len(preludeReasons)-1, len(ms))
	}
	want := map[string]string{"ROOT": "root", "OWNER_FILE": "owner_file", "OWNER_IDS": "owner_ids",
		"SUPERVISOR_GONE": "supervisor_gone", "FORK": "fork", "USERNS_REFUSED": "userns_refused", "USERNS_LIMIT": "userns_limit"}
	for _, m := range ms {
		n, _ := strconv.Atoi(m[2])
		if w, ok := want[m[1]]; ok && PreludeReason(n).String() != w {
			t.Errorf("SBX_R_%s (%d) is named %q, want %q", m[1], n, PreludeReason(n), w)
		}
	}
	if PreludeReason(0).String() != "" || PreludeReason(99).String() != "reason_99" {
		t.Error("names outside the enum")
	}
}
