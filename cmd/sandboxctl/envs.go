package main

import (
	"flag"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/sandboxd/sandboxd/nsinit/config"
	"github.com/sandboxd/sandboxd/nsinit/envtree"
)

// cmdEnvRegister (admin env-register, as root) registers an environment in
// the helper's root-owned config: it hashes the tree, writes the root-owned
// manifest next to it (outside it), and adds or replaces the entry. The
// tree must already be root's alone -- every entry root-owned, not
// writable by group or others, no setuid/setgid, no device: registration
// refuses it otherwise, and so does the helper at every launch.
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
	if err := envtree.Register(*cfgPath, e); err != nil {
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
