package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/client"
	"github.com/sandboxd/sandboxd/nsinit/config"
	"github.com/sandboxd/sandboxd/nsinit/envtree"
)

// envBuildScript runs inside the sandbox, as the payload's uid with no
// network: pip installs exactly the pinned, hash-checked requirements from
// the staged wheelhouse into /workspace/site (no byte-code, no cache, so two
// builds of one lock give the same bytes), and tars the result with fixed
// owners and times. Install scripts are untrusted: they run here, never as
// root on the host.
const envBuildScript = `import os, subprocess, sys, tarfile
r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--find-links", "/workspace/wheels",
    "--require-hashes", "--no-compile", "--no-cache-dir", "--disable-pip-version-check", "--no-warn-script-location",
    "--only-binary", ":all:", "--target", "/workspace/site", "-r", "/workspace/requirements.txt"])
if r.returncode != 0:
    sys.exit(r.returncode)
def norm(ti):
    ti.uid = ti.gid = 0; ti.uname = ti.gname = ""; ti.mtime = 0
    if ti.isdir(): ti.mode = 0o755
    elif ti.isfile(): ti.mode = 0o755 if ti.mode & 0o111 else 0o644
    else: raise SystemExit("refusing %s: only files and directories" % ti.name)
    return ti
with tarfile.open("/workspace/site.tar", "w", format=tarfile.PAX_FORMAT) as t:
    for root, dirs, files in os.walk("/workspace/site"):
        dirs.sort()
        for n in sorted(dirs) + sorted(files):
            p = os.path.join(root, n)
            t.add(p, arcname=os.path.relpath(p, "/workspace/site"), recursive=False, filter=norm)
`

// pinRe is one exact pin with at least one hash, as pip --require-hashes
// wants it (continuation lines are joined first).
var pinRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!_-]+( +--hash=sha256:[0-9a-f]{64})+$`)

// checkLock refuses anything but exact pins with sha256 hashes.
func checkLock(req []byte) error {
	text := strings.ReplaceAll(string(req), "\\\n", " ")
	n := 0
	for i, line := range strings.Split(text, "\n") {
		line = strings.Join(strings.Fields(line), " ")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !pinRe.MatchString(line) {
			return fmt.Errorf("requirements line %d %q: want NAME==VERSION --hash=sha256:<hex> (exact pins with hashes only)", i+1, line)
		}
		n++
	}
	if n == 0 {
		return errors.New("requirements: no pins")
	}
	return nil
}

// cmdEnvBuild (admin env-build, as root) builds a pinned Python environment
// inside a sandbox of the running supervisor and registers it.
func cmdEnvBuild(args []string, io stdio) int {
	fs := flag.NewFlagSet("admin env-build", flag.ContinueOnError)
	fs.SetOutput(io.err)
	name := fs.String("name", "", "environment name")
	lang := fs.String("language", "python", "only python")
	reqPath := fs.String("requirements", "", "requirements.txt: NAME==VERSION --hash=sha256:... lines")
	links := fs.String("find-links", "", "directory of wheels (the only index: no network)")
	socket := fs.String("socket", client.DefaultSocket, "supervisor socket")
	cfgPath := fs.String("helper-config", config.DefaultPath, "the helper's config to register it in")
	lib := fs.String("lib", "/usr/local/lib/sandboxd/env", "root-owned directory of environment trees")
	if err := fs.Parse(args); err != nil || *name == "" || *reqPath == "" || *links == "" || *lang != "python" {
		fmt.Fprintln(io.err, "sandboxctl: usage: sandboxctl admin env-build --name NAME --language python --requirements FILE --find-links DIR [--socket PATH] [--helper-config PATH]")
		return exitUsage
	}
	root, digest, err := buildEnv(*name, *reqPath, *links, *socket, *lib)
	if err != nil {
		fmt.Fprintln(io.err, "sandboxctl: env build:", err)
		return exitNotReady
	}
	e := config.Environment{Name: *name, Language: "python", Root: root, Mount: config.EnvironmentMountPrefix + *name,
		Manifest: root + ".manifest.json", Env: []string{"PYTHONPATH=" + config.EnvironmentMountPrefix + *name}}
	if err := registerEnvironment(*cfgPath, e); err != nil {
		fmt.Fprintln(io.err, "sandboxctl: env build:", err)
		return exitNotReady
	}
	fmt.Fprintf(io.out, "built environment %s digest %s in %s (restart sandboxd to offer it)\n", *name, digest, root)
	return exitOK
}

func buildEnv(name, reqPath, links, socket, lib string) (string, string, error) {
	req, err := os.ReadFile(reqPath)
	if err != nil {
		return "", "", err
	}
	if err := checkLock(req); err != nil {
		return "", "", err
	}
	files := []api.ExecFile{{Path: "requirements.txt", ContentBase64: base64.StdEncoding.EncodeToString(req)}}
	wheels, _ := filepath.Glob(filepath.Join(links, "*.whl"))
	for _, w := range wheels {
		b, err := os.ReadFile(w)
		if err != nil {
			return "", "", err
		}
		files = append(files, api.ExecFile{Path: "wheels/" + filepath.Base(w), ContentBase64: base64.StdEncoding.EncodeToString(b)})
	}
	timeout := int64(60000)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, _, err := client.New(socket).Exec(ctx, api.ExecRequest{Language: "python", Code: envBuildScript, Files: files,
		TimeoutMS: &timeout, Artifacts: []string{"site.tar"}, Environment: "minimal"})
	if err != nil {
		return "", "", err
	}
	if res.ExitCode == nil || *res.ExitCode != 0 || len(res.Artifacts) != 1 {
		return "", "", fmt.Errorf("the build failed in the sandbox (exit %v, exec %s):\n%s", res.ExitCode, res.ID, strings.TrimSpace(res.Stdout+"\n"+res.Stderr))
	}
	tarball, err := base64.StdEncoding.DecodeString(res.Artifacts[0].ContentBase64)
	if err != nil {
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
	if err := untar(tarball, stage); err != nil {
		return "", "", err
	}
	m, err := envtree.Build(stage)
	if err != nil {
		return "", "", err
	}
	// Content-addressed: the same lock gives the same digest, so the same
	// directory.
	root := filepath.Join(lib, name+"-"+strings.TrimPrefix(m.Digest, "sha256:")[:16])
	if _, err := os.Stat(root); err == nil {
		return root, m.Digest, nil
	}
	if err := os.Rename(stage, root); err != nil {
		return "", "", err
	}
	return root, m.Digest, nil
}

// untar extracts the sandbox's tar into dir, as root: regular files and
// directories only, no name leaving dir, root-owned, never writable by
// group or others.
func untar(b []byte, dir string) error {
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
		case tar.TypeReg:
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
			if err := os.Chmod(p, mode); err != nil {
				return err
			}
		default:
			return fmt.Errorf("the build's tar has %q of type %c: only files and directories", h.Name, h.Typeflag)
		}
	}
}
