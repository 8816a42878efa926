package ownertest

import "testing"

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in       string
		uid, gid uint32
		ok       bool
	}{
		{"999:998\n", 999, 998, true},
		{"1:2\n", 1, 2, true},
		{"4294967294:4294967294\n", 4294967294, 4294967294, true},
		{"0:0\n", 0, 0, true},                             // parses; refused by IDsOK
		{"999:998", 0, 0, false},                          // no newline
		{"999:998\n\n", 0, 0, false},                      // trailing data
		{"999:998\nx", 0, 0, false},                       // trailing data
		{" 999:998\n", 0, 0, false},                       // blank
		{"999 :998\n", 0, 0, false},                       // blank
		{"999:998 \n", 0, 0, false},                       // blank
		{"+999:998\n", 0, 0, false},                       // sign
		{"-1:998\n", 0, 0, false},                         // sign
		{"0999:998\n", 0, 0, false},                       // leading zero
		{"999:0998\n", 0, 0, false},                       // leading zero
		{"4294967295:1\n", 0, 0, false},                   // (uid_t)-1
		{"4294967296:1\n", 0, 0, false},                   // overflow
		{"99999999999:1\n", 0, 0, false},                  // 11 digits
		{"999:998\r\n", 0, 0, false},                      // CR
		{":998\n", 0, 0, false},                           // empty
		{"999:\n", 0, 0, false},                           // empty
		{"999\n", 0, 0, false},                            // no gid
		{"999:998:997\n", 0, 0, false},                    // extra field
		{"sandboxd-ns:998\n", 0, 0, false},                // a name
		{"", 0, 0, false},                                 // empty file
		{"999:998\x00\n", 0, 0, false},                    // NUL
		{"1:2\n" + string(make([]byte, 40)), 0, 0, false}, // too long
	} {
		uid, gid, ok := Parse([]byte(tc.in))
		if ok != tc.ok || uid != tc.uid || gid != tc.gid {
			t.Errorf("Parse(%q) = %d, %d, %v; want %d, %d, %v", tc.in, uid, gid, ok, tc.uid, tc.gid, tc.ok)
		}
	}
}

func TestIDsOK(t *testing.T) {
	const ruid, rgid = 995, 994
	for _, tc := range []struct {
		name       string
		ouid, ogid uint32
		ok         bool
	}{
		{"distinct", 990, 989, true},
		{"root uid", 0, 989, false},
		{"root gid", 990, 0, false},
		{"caller's uid", ruid, 989, false},
		{"caller's gid", 990, rgid, false},
		{"payload uid", PayloadID, 989, false},
		{"payload gid", 990, PayloadID, false},
	} {
		if got := IDsOK(tc.ouid, tc.ogid, ruid, rgid, ruid, rgid); got != tc.ok {
			t.Errorf("%s: IDsOK(%d, %d) = %v, want %v", tc.name, tc.ouid, tc.ogid, got, tc.ok)
		}
	}
	// A caller whose effective ids differ (file caps never change them,
	// but a set-id wrapper might): those count as the caller's too.
	if IDsOK(990, 989, ruid, rgid, 990, rgid) {
		t.Error("owner uid equal to the caller's euid accepted")
	}
}
