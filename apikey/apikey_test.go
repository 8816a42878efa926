package apikey

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const k1 = "0123456789abcdef0123456789abcdef0123456789abcdef"
const k2 = "fedcba9876543210fedcba9876543210fedcba9876543210"

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, file, err string
	}{
		{"two keys", "# comment\nalice:" + k1 + "\n\nbob:" + k2 + ":admin\n", ""},
		{"empty", "# nothing\n", "no keys"},
		{"short key", "alice:" + k1[:31] + "\n", "at least 32"},
		{"duplicate name", "alice:" + k1 + "\nalice:" + k2 + "\n", "already used"},
		{"duplicate key", "alice:" + k1 + "\nbob:" + k1 + "\n", "same as line 1"},
		{"no key", "alice\n", "want"},
		{"bad name", "al ice:" + k1 + "\n", "name"},
		{"bad flag", "alice:" + k1 + ":root\n", "unknown flag"},
		{"flags", "alice:" + k1 + ":admin,egress\nbob:" + k2 + ":egress\n", ""},
		{"bad char", "alice:" + k1 + "\"\n", "Authorization"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]byte(tc.file))
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err %v; want %q (set %v)", err, tc.err, s)
			}
			if strings.Contains(err.Error(), k1[:20]) {
				t.Fatalf("the error shows the key: %v", err)
			}
		})
	}
}

func TestMatch(t *testing.T) {
	s, err := Parse([]byte("alice:" + k1 + "\nbob:" + k2 + ":admin\n"))
	if err != nil {
		t.Fatal(err)
	}
	if k, ok := s.Match(k1); !ok || k.Name != "alice" || k.Admin {
		t.Fatalf("alice: %+v %v", k, ok)
	}
	if k, ok := s.Match(k2); !ok || k.Name != "bob" || !k.Admin || k.Egress {
		t.Fatalf("bob: %+v %v", k, ok)
	}
	for _, bad := range []string{"", k1 + "0", k1[:47], k1[:47] + "0", "alice", strings.ToUpper(k1)} {
		if k, ok := s.Match(bad); ok {
			t.Fatalf("%q matched %s", bad, k.Name)
		}
	}
}

// TestLoadChecksFile: mode and ownership are checked before the keys.
func TestLoadChecksFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "keys")
	if err := os.WriteFile(p, []byte("alice:"+k1+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p, os.Getuid()); err != nil {
		t.Fatalf("0600 own file: %v", err)
	}
	if err := os.Chmod(p, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p, os.Getuid()); err == nil || !strings.Contains(err.Error(), "mode 0640") {
		t.Fatalf("0640: %v", err)
	}
	_ = os.Chmod(p, 0o600)
	if os.Getuid() != 0 {
		if _, err := Load(p, os.Getuid()+1); err == nil || !strings.Contains(err.Error(), "owned by uid") {
			t.Fatalf("someone else's file: %v", err)
		}
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(p, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(link, os.Getuid()); err == nil {
		t.Fatal("a symlink was followed")
	}
	if _, err := Load(dir, os.Getuid()); err == nil {
		t.Fatal("a directory was accepted")
	}
}
