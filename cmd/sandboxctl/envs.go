package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/sandboxd/sandboxd/internal/atomicfile"

	"github.com/sandboxd/sandboxd/nsinit/config"
	"github.com/sandboxd/sandboxd/nsinit/envtree"
)

// cmdEnvRegister (admin env-register, as root) registers an environment in
// the helper's root-owned config: it hashes the tree, writes the root-owned
// manifest next to it (outside it), and adds or replaces the entry. The
// tree must already be root-owned and not writable by anyone else: the
// helper refuses it otherwise.
func cmdEnvRegister(args []string, io stdio) int {
	fs := flag.NewFlagSet("admin env-register", flag.ContinueOnError)
	fs.SetOutput(io.err)
	cfgPath := fs.String("helper-config", config.DefaultPath, "the helper's config to update")
	name := fs.String("name", "", "environment name")
	lang := fs.String("language", "", "python or javascript")
	root := fs.String("root", "", "host directory of the tree (empty: an environment without a tree)")
	mount := fs.String("mount", "", "where the tree appears in the sandbox (default /opt/sandboxd/env/NAME)")
	def := fs.Bool("default", false, "make it the language's default")
	var env, pkgs multiFlag
	fs.Var(&env, "env", "NAME=value set in the payload's environment (repeatable; $MOUNT is replaced by the mount)")
	fs.Var(&pkgs, "package", "NAME=VERSION the environment declares (repeatable)")
	if err := fs.Parse(args); err != nil || *name == "" || *lang == "" || fs.NArg() != 0 {
		fmt.Fprintln(io.err, "sandboxctl: usage: sandboxctl admin env-register --name NAME --language LANG [--root DIR [--mount PATH]] [--env K=V]... [--package N=V]... [--default] [--helper-config PATH]")
		return exitUsage
	}
	e := config.Environment{Name: *name, Language: *lang, Default: *def, Digest: envtree.EmptyDigest}
	if *root != "" {
		e.Root, e.Mount = filepath.Clean(*root), *mount
		if e.Mount == "" {
			e.Mount = config.EnvironmentMountPrefix + *name
		}
		e.Manifest = e.Root + ".manifest.json"
	}
	for _, kv := range env {
		e.Env = append(e.Env, strings.ReplaceAll(kv, "$MOUNT", e.Mount))
	}
	for _, p := range pkgs {
		n, v, ok := strings.Cut(p, "=")
		if !ok || n == "" {
			fmt.Fprintf(io.err, "sandboxctl: --package %q: want NAME=VERSION\n", p)
			return exitUsage
		}
		e.Packages = append(e.Packages, config.Package{Name: n, Version: v})
	}
	if err := registerEnvironment(*cfgPath, e); err != nil {
		fmt.Fprintln(io.err, "sandboxctl:", err)
		return exitNotReady // the host, not the arguments
	}
	fmt.Fprintf(io.out, "registered environment %s (%s) digest %s in %s\n", e.Name, e.Language, digestOf(*cfgPath, e.Name), *cfgPath)
	return exitOK
}

func digestOf(cfgPath, name string) string {
	c, err := config.Load(cfgPath)
	if err != nil {
		return "?"
	}
	if e, ok := c.Environment(name); ok {
		return e.Digest
	}
	return "?"
}

// registerEnvironment hashes e's tree, writes its manifest and puts e into
// the helper config at cfgPath (replacing an entry of the same name).
func registerEnvironment(cfgPath string, e config.Environment) error {
	c, err := config.Load(cfgPath)
	if err != nil {
		return err
	}
	if e.Root != "" {
		if err := config.CheckRootOwned(e.Root); err != nil {
			return fmt.Errorf("environment tree: %w", err)
		}
		m, err := envtree.Build(e.Root)
		if err != nil {
			return err
		}
		if err := envtree.WriteManifest(e.Manifest, m); err != nil {
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
