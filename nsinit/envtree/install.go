package envtree

import (
	"archive/tar"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sandboxd/sandboxd/internal/atomicfile"
	"github.com/sandboxd/sandboxd/nsinit/config"
)

// This file is the root side of environments, run by `sandboxctl` as root
// (never by the helper, which only checks): unpacking a build's tar --
// bytes a sandbox produced, so untrusted -- installing the tree at its
// content-addressed place, and registering or removing it in the helper's
// root-owned config.

// Untar extracts a build's tar into dir, as root: regular files and
// directories only, no name leaving dir, every entry created new
// (O_EXCL, never through a symlink), root-owned, with fixed modes (0755
// directories and executables, 0644 other files) whatever the tar or the
// umask says.
func Untar(b []byte, dir string) error {
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("the build's tar: %w", err)
		}
		clean := filepath.Clean(h.Name)
		if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") || clean == "." {
			return fmt.Errorf("the build's tar names %q outside the tree", h.Name)
		}
		p := filepath.Join(dir, clean)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.Mkdir(p, 0o755); err != nil {
				return err
			}
			if err := os.Chmod(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := untarFile(tr, h, p); err != nil {
				return err
			}
		default:
			return fmt.Errorf("the build's tar has %q of type %c: only files and directories", h.Name, h.Typeflag)
		}
	}
}

// untarFile writes one regular file of the tar at p.
func untarFile(tr *tar.Reader, h *tar.Header, p string) error {
	mode := os.FileMode(0o644)
	if h.Mode&0o111 != 0 {
		mode = 0o755
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, mode)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, io.LimitReader(tr, h.Size))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Chmod(p, mode)
}

// Install unpacks the build's tar (base64) into a stage below lib, hashes
// it, and moves it to lib/NAME-<first 16 hex of the digest>: the same
// lock gives the same digest, so the same directory. It returns the
// tree's root and digest.
func Install(name, tarB64, lib string) (string, string, error) {
	tarball, err := base64.StdEncoding.DecodeString(tarB64)
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(lib, 0o755); err != nil {
		return "", "", err
	}
	stage, err := os.MkdirTemp(lib, "."+name+"-build-")
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(stage)
	if err := os.Chmod(stage, 0o755); err != nil {
		return "", "", err
	}
	if err := Untar(tarball, stage); err != nil {
		return "", "", err
	}
	m, err := Build(stage)
	if err != nil {
		return "", "", err
	}
	root := filepath.Join(lib, name+"-"+strings.TrimPrefix(m.Digest, "sha256:")[:16])
	if _, err := os.Stat(root); err == nil {
		return root, m.Digest, nil
	}
	if err := os.Rename(stage, root); err != nil {
		return "", "", err
	}
	return root, m.Digest, nil
}

// Register hashes e's tree, writes its manifest and puts e into the helper
// config at cfgPath (replacing an entry of the same name). The tree's root
// and every directory above it must be root-owned, and every entry root's
// alone (Build refuses it otherwise).
func Register(cfgPath string, e config.Environment) error {
	c, err := config.Load(cfgPath)
	if err != nil {
		return err
	}
	if e.Root != "" {
		if err := config.CheckRootOwned(e.Root); err != nil {
			return fmt.Errorf("environment tree: %w", err)
		}
		m, err := Build(e.Root)
		if err != nil {
			return err
		}
		if err := WriteManifest(e.Manifest, m); err != nil {
			return err
		}
		e.Digest = m.Digest
	}
	var out []config.Environment
	for _, x := range c.Environments {
		if x.Name == e.Name {
			continue
		}
		if e.Default && x.Language == e.Language {
			x.Default = false
		}
		out = append(out, x)
	}
	c.Environments = append(out, e)
	return writeConfig(cfgPath, c)
}

// Unregister takes name out of the helper config and returns its entry,
// with Root emptied when another environment still uses the tree; a
// language's default is refused, and so is a name that is not there.
func Unregister(cfgPath, name string) (config.Environment, error) {
	c, err := config.Load(cfgPath)
	if err != nil {
		return config.Environment{}, err
	}
	e, ok := c.Environment(name)
	if !ok {
		return config.Environment{}, fmt.Errorf("no environment %q in %s", name, cfgPath)
	}
	gone := *e
	if gone.Default {
		return gone, fmt.Errorf("%q is the default of %s: make another the default first (sandboxctl env build/register --default)", name, gone.Language)
	}
	var keep []config.Environment
	shared := false
	for _, x := range c.Environments {
		if x.Name != name {
			keep = append(keep, x)
			shared = shared || (gone.Root != "" && x.Root == gone.Root)
		}
	}
	c.Environments = keep
	if err := writeConfig(cfgPath, c); err != nil {
		return gone, err
	}
	if shared {
		gone.Root = "" // another environment still uses the tree
	}
	return gone, nil
}

// writeConfig validates c and replaces the helper config at cfgPath with
// it, atomically and durably.
func writeConfig(cfgPath string, c *config.Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(cfgPath, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write helper config: %w", err)
	}
	return nil
}
