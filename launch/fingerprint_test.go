package launch

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sandboxd/sandboxd/nsinit/config"
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

// TestFingerprintCoversWhatALaunchRuns: a warm sandbox built before the
// bubblewrap binary, the namespace-owner file, the relay or a runtime's
// interpreter changed is not handed out: each one changes the
// fingerprint.
func TestFingerprintCoversWhatALaunchRuns(t *testing.T) {
	dir := t.TempDir()
	file := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(name+" v1"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	helper, cfg, owner := file("helper"), file("nsinit.json"), file("nsinit.owner")
	hc := &config.Config{Bwrap: file("bwrap"), Relay: file("relay"), Shim: file("shim"), PayloadProfile: file("profile"),
		Runtimes: map[string]config.Runtime{"python": {Argv: []string{file("python3")}}, "javascript": {Argv: []string{file("node")}}}}
	c := &fingerprintCache{helperPath: helper, configPath: cfg, ownerPath: owner,
		load: func(string) (*config.Config, error) { return hc, nil }}
	prev := c.get()
	for _, changed := range []string{hc.Bwrap, owner, hc.Relay, hc.Runtimes["python"].Argv[0], hc.Runtimes["javascript"].Argv[0], hc.Shim} {
		if err := os.WriteFile(changed, []byte("replaced, longer than before"), 0o600); err != nil {
			t.Fatal(err)
		}
		fp := c.get()
		if fp == prev {
			t.Errorf("changing %s kept the warm pool's fingerprint", filepath.Base(changed))
		}
		prev = fp
	}
}
