package launch

import (
	"os"
	"path/filepath"
	"testing"
)

func TestFingerprintFollowsTheFiles(t *testing.T) {
	dir := t.TempDir()
	helper, cfg := filepath.Join(dir, "helper"), filepath.Join(dir, "nsinit.json")
	for _, f := range []string{helper, cfg} {
		if err := os.WriteFile(f, []byte("v1"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c := &fingerprintCache{helperPath: helper, configPath: cfg}
	first := c.get()
	if again := c.get(); again != first {
		t.Fatal("the fingerprint changed with no file changed")
	}
	// A config replaced by rename (new inode), and one rewritten in place
	// with another size: both change the fingerprint.
	tmp := cfg + ".new"
	if err := os.WriteFile(tmp, []byte("v2"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, cfg); err != nil {
		t.Fatal(err)
	}
	second := c.get()
	if second == first {
		t.Fatal("a replaced config kept the fingerprint")
	}
	if err := os.WriteFile(helper, []byte("a new helper binary"), 0o700); err != nil {
		t.Fatal(err)
	}
	if third := c.get(); third == second {
		t.Fatal("a rewritten helper kept the fingerprint")
	}
}
