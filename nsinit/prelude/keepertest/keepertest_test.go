package keepertest

import (
	"os"
	"testing"
)

// TestAwaitLifeEnd: the keeper skips its scan only after exactly the clean
// byte and EOF; a bare EOF (a helper killed, or one that ended before or
// around bwrap) and anything else keep the scan.
func TestAwaitLifeEnd(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write []byte
		clean bool
	}{
		{"clean end", []byte{Clean}, true},
		{"EOF only: the helper died", nil, false},
		{"another byte", []byte{'x'}, false},
		{"clean twice", []byte{Clean, Clean}, false},
		{"clean then more", []byte{Clean, 'x'}, false},
		{"more then clean", []byte{'x', Clean}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if _, err := w.Write(tc.write); err != nil {
				t.Fatal(err)
			}
			w.Close()
			if got := AwaitLifeEnd(int(r.Fd())); got != tc.clean {
				t.Fatalf("after %q and EOF: clean %v, want %v", tc.write, got, tc.clean)
			}
		})
	}
}
