package nsinit

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/internal/testutil"
	"github.com/sandboxd/sandboxd/nsinit/config"
	"github.com/sandboxd/sandboxd/nsinit/envtree"
)

// TestCheckEnvironment runs as root (CheckRootOwned needs root-owned trees);
// under CI=true not being root fails rather than skips.
func TestCheckEnvironment(t *testing.T) {
	testutil.RequireRoot(t, "make root-owned environment trees")
	dir, err := os.MkdirTemp("/tmp", "envcheck-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "tree")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "matplotlibrc"), []byte("font.family: sans-serif\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := envtree.Build(root)
	if err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(dir, "manifest.json")
	if err := envtree.WriteManifest(manifest, m); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default("/var/lib/sandboxd/workspaces", "/x/shim", "/x/profile.json")
	cfg.Environments = []config.Environment{
		{Name: "ds", Language: "python", Root: root, Mount: "/opt/sandboxd/env/ds", Manifest: manifest, Digest: m.Digest, Env: []string{"MATPLOTLIBRC=/opt/sandboxd/env/ds/matplotlibrc"}},
		{Name: "minimal", Language: "python", Digest: envtree.EmptyDigest},
		{Name: "wrongdigest", Language: "python", Root: root, Mount: "/opt/sandboxd/env/w", Manifest: manifest, Digest: envtree.EmptyDigest},
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	e, binds, err := CheckEnvironment(&cfg, "ds")
	if err != nil || e.Name != "ds" || !slices.Equal(binds, []string{"--ro-bind", root, "/opt/sandboxd/env/ds"}) {
		t.Fatalf("ds: %v %v %v", e, binds, err)
	}
	argv := BwrapArgs(&cfg, cfg.Runtimes["python"], BwrapFDs{Code: -1}, 1<<20, binds...)
	if i, j := slices.Index(argv, "--ro-bind"), slices.Index(argv, "--"); i < 0 || i > j || argv[i+2] != "/opt/sandboxd/env/ds" {
		t.Fatalf("the bind is not among the options: %q", argv)
	}
	if _, binds, err := CheckEnvironment(&cfg, "minimal"); err != nil || binds != nil {
		t.Fatalf("minimal: %v %v", binds, err)
	}
	if _, _, err := CheckEnvironment(&cfg, "nope"); err == nil || !strings.Contains(err.Error(), "not in the helper config") {
		t.Fatalf("unknown: %v", err)
	}
	if _, _, err := CheckEnvironment(&cfg, "wrongdigest"); err == nil || !strings.Contains(err.Error(), "registered") {
		t.Fatalf("digest mismatch: %v", err)
	}
	if err := os.WriteFile(filepath.Join(root, "matplotlibrc"), []byte("font.family: serif\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := CheckEnvironment(&cfg, "ds"); !envtree.IsModified(err) {
		t.Fatalf("modified tree accepted: %v", err)
	}
	// A tree the service user could write is refused outright.
	if err := os.Chown(root, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	if _, _, err := CheckEnvironment(&cfg, "ds"); err == nil || !strings.Contains(err.Error(), "not root") {
		t.Fatalf("non-root tree: %v", err)
	}
}
