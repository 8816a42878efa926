package envtree

import (
	"archive/tar"
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sandboxd/sandboxd/internal/testutil"
	"github.com/sandboxd/sandboxd/nsinit/config"
)

type tarEntry struct {
	name string
	typ  byte
	mode int64
	body string
	link string
}

func tarOf(t *testing.T, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Size: int64(len(e.body)), Linkname: e.link}
		must(t, tw.WriteHeader(h))
		if e.typ == tar.TypeReg {
			_, err := tw.Write([]byte(e.body))
			must(t, err)
		}
	}
	must(t, tw.Close())
	return buf.Bytes()
}

// TestUntar: files and directories get fixed modes whatever the tar says
// (0755 directories and executables, 0644 other files, never setuid or
// world-writable); names outside the tree, links and devices are refused.
func TestUntar(t *testing.T) {
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })
	dir := t.TempDir()
	must(t, Untar(tarOf(t,
		tarEntry{name: "pkg/", typ: tar.TypeDir, mode: 0o777},
		tarEntry{name: "pkg/mod.py", typ: tar.TypeReg, mode: 0o666, body: "x = 1\n"},
		tarEntry{name: "pkg/tool", typ: tar.TypeReg, mode: 0o4777, body: "#!/bin/sh\n"},
	), dir))
	for p, want := range map[string]os.FileMode{"pkg": 0o755 | os.ModeDir, "pkg/mod.py": 0o644, "pkg/tool": 0o755} {
		st, err := os.Lstat(filepath.Join(dir, p))
		must(t, err)
		if st.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, st.Mode(), want)
		}
	}
	for name, bad := range map[string][]byte{
		"parent":   tarOf(t, tarEntry{name: "../x", typ: tar.TypeReg, body: "x"}),
		"absolute": tarOf(t, tarEntry{name: "/etc/x", typ: tar.TypeReg, body: "x"}),
		"symlink":  tarOf(t, tarEntry{name: "l", typ: tar.TypeSymlink, link: "/etc/passwd"}),
		"hardlink": tarOf(t, tarEntry{name: "h", typ: tar.TypeLink, link: "pkg/mod.py"}),
		"device":   tarOf(t, tarEntry{name: "d", typ: tar.TypeChar}),
		"again":    tarOf(t, tarEntry{name: "pkg/mod.py", typ: tar.TypeReg, body: "y"}),
	} {
		if err := Untar(bad, dir); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestInstallAndRegister: a built tree lands at its content-addressed
// place and registers; a tree with an entry that is not root's alone is
// refused by Register, and the config is left as it was.
func TestInstallAndRegister(t *testing.T) {
	testutil.RequireRoot(t, "install root-owned trees and chown one entry away")
	lib := filepath.Join(rootDirOf(t), "lib")
	cfgPath := writeHelperConfig(t)
	b64 := base64.StdEncoding.EncodeToString(tarOf(t,
		tarEntry{name: "m/", typ: tar.TypeDir, mode: 0o755},
		tarEntry{name: "m/a.py", typ: tar.TypeReg, mode: 0o644, body: "a = 1\n"}))
	root, digest, err := Install("extra", b64, lib)
	must(t, err)
	if !strings.HasPrefix(filepath.Base(root), "extra-") || !strings.HasPrefix(digest, "sha256:") {
		t.Fatalf("installed at %s digest %s", root, digest)
	}
	e := testEnvironment("extra", root)
	must(t, Register(cfgPath, e))
	before, err := os.ReadFile(cfgPath)
	must(t, err)

	must(t, os.Lchown(filepath.Join(root, "m", "a.py"), 65534, 65534))
	e.Name = "tampered"
	if err := Register(cfgPath, e); !errors.Is(err, ErrNotRootOnly) {
		t.Fatalf("Register of a tree with a uid-65534 entry: %v, want ErrNotRootOnly", err)
	}
	after, err := os.ReadFile(cfgPath)
	must(t, err)
	if !bytes.Equal(before, after) {
		t.Fatal("a refused registration changed the helper config")
	}
	gone, err := Unregister(cfgPath, "extra")
	must(t, err)
	if gone.Root != root {
		t.Fatalf("Unregister returned root %q, want %q", gone.Root, root)
	}
}

// rootDirOf makes a fresh 0755 directory directly under /tmp (root-owned
// and sticky), so that config.CheckRootOwned passes on every directory
// above a tree below it.
func rootDirOf(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "sandboxd-envtree-test-")
	must(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	must(t, os.Chmod(d, 0o755))
	return d
}

// writeHelperConfig writes a default helper config and returns its path.
func writeHelperConfig(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "nsinit.json")
	c := config.Default("/var/lib/sandboxd/workspaces", "/usr/local/libexec/sandboxd/sandboxd-exec", "/etc/sandboxd/profiles/payload.json")
	must(t, writeConfig(p, &c))
	return p
}

func testEnvironment(name, root string) config.Environment {
	return config.Environment{Name: name, Language: "python", Root: root, Mount: config.EnvironmentMountPrefix + name,
		Manifest: root + ".manifest.json", Digest: EmptyDigest}
}
