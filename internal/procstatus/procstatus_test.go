package procstatus

import "testing"

// TestField: a key's value without its tab and newline, the first of a
// multi-value line kept whole, a missing key reported as such, and a
// key that is only a prefix of another not matched.
func TestField(t *testing.T) {
	status := []byte("Name:\tbwrap\nUmask:\t0022\nState:\tS (sleeping)\nUid:\t995\t995\t995\t995\nNoNewPrivs:\t1\n")
	for _, tc := range []struct {
		key, want string
		ok        bool
	}{
		{"Name", "bwrap", true},
		{"State", "S (sleeping)", true},
		{"Uid", "995\t995\t995\t995", true},
		{"NoNewPrivs", "1", true},
		{"Gid", "", false},
		{"Ui", "", false},
	} {
		if got, ok := Field(status, tc.key); got != tc.want || ok != tc.ok {
			t.Errorf("Field(%q) = %q, %v; want %q, %v", tc.key, got, ok, tc.want, tc.ok)
		}
	}
}
