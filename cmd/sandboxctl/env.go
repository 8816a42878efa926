package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/client"
	"github.com/sandboxd/sandboxd/nsinit/config"
	"github.com/sandboxd/sandboxd/nsinit/envtree"
	"github.com/sandboxd/sandboxd/policy"
)

// defaultEnvLib is the root-owned directory of built environment trees.
const defaultEnvLib = "/usr/local/lib/sandboxd/env"

const envUsage = `usage: sandboxctl env build NAME --language python --requirements FILE (--index URL | --find-links DIR) [--ca-file F]
       sandboxctl env build NAME --language javascript --lockfile FILE [--registry URL] [--ca-file F]
         [--default] [--timeout-ms N] [--socket PATH] [--helper-config PATH] [--lib DIR]
       sandboxctl env ls [--json] [--helper-config PATH]
       sandboxctl env show NAME [--json] [--helper-config PATH]
       sandboxctl env rm NAME [--helper-config PATH] [--lib DIR]
       sandboxctl env register ...   (as admin env-register)`

// cmdEnv is the operator's view of environments: they live in the helper's
// root-owned config, so ls and show read it, and build, register and rm
// (as root) write it. The supervisor reads it at start.
func cmdEnv(ctx context.Context, args []string, sio stdio, lookupEnv func(string) (string, bool)) int {
	if len(args) == 0 {
		return usage(sio.err, "%s", envUsage)
	}
	switch args[0] {
	case "build":
		return cmdEnvBuild(ctx, args[1:], sio, lookupEnv)
	case "ls", "show":
		return cmdEnvShow(args[0], args[1:], sio)
	case "rm":
		return cmdEnvRm(args[1:], sio)
	case "register":
		return cmdEnvRegister(args[1:], sio)
	}
	return usage(sio.err, "env: unknown command %q\n%s", args[0], envUsage)
}

// envBuildFlags are the flags of env build.
type envBuildFlags struct {
	lang, reqs, lockfile, index, links, registry, caFile string
	socket, cfgPath, lib                                 string
	timeoutMS                                            int64
	def                                                  bool
}

func parseEnvBuild(args []string, lookupEnv func(string) (string, bool)) (string, envBuildFlags, error) {
	var f envBuildFlags
	fs := flag.NewFlagSet("env build", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.lang, "language", "", "python or javascript")
	fs.StringVar(&f.reqs, "requirements", "", "python: requirements.txt of NAME==VERSION --hash=sha256:... lines")
	fs.StringVar(&f.lockfile, "lockfile", "", "javascript: package-lock.json (lockfileVersion 2 or 3)")
	fs.StringVar(&f.index, "index", "", "python: PEP 503 index URL (https), reached through the egress proxy")
	fs.StringVar(&f.links, "find-links", "", "python: directory of wheels (no network)")
	fs.StringVar(&f.registry, "registry", "", "javascript: npm registry URL (default "+policy.DefaultNPMRegistry+")")
	fs.StringVar(&f.caFile, "ca-file", "", "extra CA certificates (PEM) for the index or registry")
	fs.StringVar(&f.socket, "socket", defaultSocket(lookupEnv), "supervisor socket")
	fs.StringVar(&f.cfgPath, "helper-config", config.DefaultPath, "the helper's config to register it in")
	fs.StringVar(&f.lib, "lib", defaultEnvLib, "root-owned directory of environment trees")
	fs.Int64Var(&f.timeoutMS, "timeout-ms", 0, "the build's timeout (default the supervisor's --exec-timeout-max)")
	fs.BoolVar(&f.def, "default", false, "make it the language's default")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return "", f, err
	}
	if len(pos) != 1 {
		return "", f, errors.New("want exactly one NAME")
	}
	switch {
	case f.lang == "python" && (f.reqs == "" || f.lockfile != "" || f.registry != "" || (f.index == "") == (f.links == "")):
		return "", f, errors.New("python: --requirements FILE and one of --index URL or --find-links DIR")
	case f.lang == "javascript" && (f.lockfile == "" || f.reqs != "" || f.index != "" || f.links != ""):
		return "", f, errors.New("javascript: --lockfile FILE [--registry URL]")
	case f.lang != "python" && f.lang != "javascript":
		return "", f, errors.New("--language python or javascript")
	}
	return pos[0], f, nil
}

// cmdEnvBuild builds a pinned environment inside a sandbox of the running
// supervisor (POST /v1/environments/build), then, as root, unpacks the
// tree, hashes it, moves it to its content-addressed place and registers
// it in the helper config.
func cmdEnvBuild(ctx context.Context, args []string, sio stdio, lookupEnv func(string) (string, bool)) int {
	name, f, err := parseEnvBuild(args, lookupEnv)
	if err != nil {
		return usage(sio.err, "env build: %v\n%s", err, envUsage)
	}
	if os.Geteuid() != 0 {
		// Checked first: the build takes minutes, and only root can then
		// write the root-owned tree and the helper config.
		fmt.Fprintln(sio.err, "sandboxctl: env build: run it as root (it installs a root-owned tree and edits the helper config)")
		return exitUsage
	}
	req, pkgs, err := envBuildRequest(name, f)
	if err != nil {
		fmt.Fprintln(sio.err, "sandboxctl: env build:", err)
		return exitUsage
	}
	res, err := client.New(f.socket).BuildEnvironment(ctx, req)
	if err != nil {
		return fail(sio.err, err)
	}
	if res.ExitCode == nil || *res.ExitCode != 0 || len(res.Artifacts) != 1 {
		fmt.Fprintf(sio.err, "sandboxctl: env build: the build failed in the sandbox (exit %v, exec %s):\n%s\n", exitOf(res), res.ID, strings.TrimSpace(res.Stdout+"\n"+res.Stderr))
		return exitNotReady
	}
	root, digest, err := envtree.Install(name, res.Artifacts[0].ContentBase64, f.lib)
	if err != nil {
		fmt.Fprintln(sio.err, "sandboxctl: env build:", err)
		return exitNotReady
	}
	mount := config.EnvironmentMountPrefix + name
	e := config.Environment{Name: name, Language: f.lang, Root: root, Mount: mount, Manifest: root + ".manifest.json", Default: f.def,
		Env: []string{"PYTHONPATH=" + mount}}
	if f.lang == "javascript" {
		e.Env = []string{"NODE_PATH=" + mount + "/node_modules"}
	}
	for _, p := range pkgs {
		e.Packages = append(e.Packages, config.Package{Name: p.Name, Version: p.Version})
	}
	if err := envtree.Register(f.cfgPath, e); err != nil {
		fmt.Fprintln(sio.err, "sandboxctl: env build:", err)
		return exitNotReady
	}
	fmt.Fprintf(sio.out, "built environment %s digest %s in %s (exec %s, lock sha256 %s; restart sandboxd to offer it)\n",
		name, digest, root, res.ID, sha256Hex([]byte(req.Lock)))
	return exitOK
}

func exitOf(r *api.ExecResult) string {
	if r.ExitCode == nil {
		if r.Signal != nil {
			return "signal " + *r.Signal
		}
		return "none"
	}
	return fmt.Sprint(*r.ExitCode)
}

// envBuildRequest reads the lock and its inputs and checks the lock the
// way the supervisor will (policy.PlanEnvironmentBuild), so a bad lock is
// refused before anything is sent.
func envBuildRequest(name string, f envBuildFlags) (api.EnvironmentBuildRequest, []api.Package, error) {
	req := api.EnvironmentBuildRequest{Name: name, Language: f.lang, Index: f.index, Registry: f.registry}
	if f.timeoutMS > 0 {
		req.TimeoutMS = &f.timeoutMS
	}
	lockPath := f.reqs
	if f.lang == "javascript" {
		lockPath = f.lockfile
	}
	lock, err := os.ReadFile(lockPath)
	if err != nil {
		return req, nil, err
	}
	req.Lock = string(lock)
	if f.caFile != "" {
		ca, err := os.ReadFile(f.caFile)
		if err != nil {
			return req, nil, err
		}
		req.CAPEM = string(ca)
	}
	if f.links != "" {
		wheels, _ := filepath.Glob(filepath.Join(f.links, "*.whl"))
		for _, w := range wheels {
			b, err := os.ReadFile(w)
			if err != nil {
				return req, nil, err
			}
			req.Files = append(req.Files, api.ExecFile{Path: filepath.Base(w), ContentBase64: base64.StdEncoding.EncodeToString(b)})
		}
		if len(req.Files) == 0 {
			return req, nil, fmt.Errorf("--find-links %s: no *.whl files", f.links)
		}
	}
	plan, err := policy.PlanEnvironmentBuild(req)
	if err != nil {
		return req, nil, err
	}
	return req, plan.Packages, nil
}

// cmdEnvShow lists the environments of the helper config (ls) or shows one.
func cmdEnvShow(verb string, args []string, sio stdio) int {
	fs := flag.NewFlagSet("env "+verb, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfgPath := fs.String("helper-config", config.DefaultPath, "")
	asJSON := fs.Bool("json", false, "")
	pos, err := parseInterspersed(fs, args)
	if err != nil || (verb == "ls") != (len(pos) == 0) || len(pos) > 1 {
		return usage(sio.err, "%s", envUsage)
	}
	c, err := config.Load(*cfgPath)
	if err != nil {
		fmt.Fprintln(sio.err, "sandboxctl:", err)
		return exitNotReady
	}
	envs := c.Environments
	if verb == "show" {
		e, ok := c.Environment(pos[0])
		if !ok {
			fmt.Fprintf(sio.err, "sandboxctl: env show: no environment %q in %s\n", pos[0], *cfgPath)
			return exitNotReady
		}
		envs = []config.Environment{*e}
	}
	if *asJSON {
		b, _ := json.MarshalIndent(envs, "", "  ")
		fmt.Fprintln(sio.out, string(b))
		return exitOK
	}
	if verb == "show" {
		e := envs[0]
		fmt.Fprintf(sio.out, "name      %s\nlanguage  %s\ndefault   %v\ndigest    %s\nroot      %s\nmount     %s\nmanifest  %s\n", e.Name, e.Language, e.Default, e.Digest, e.Root, e.Mount, e.Manifest)
		for _, kv := range e.Env {
			fmt.Fprintf(sio.out, "env       %s\n", kv)
		}
		for _, p := range e.Packages {
			fmt.Fprintf(sio.out, "package   %s %s\n", p.Name, p.Version)
		}
		return exitOK
	}
	tw := tabwriter.NewWriter(sio.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tLANGUAGE\tDEFAULT\tPACKAGES\tDIGEST")
	for _, e := range envs {
		fmt.Fprintf(tw, "%s\t%s\t%v\t%d\t%s\n", e.Name, e.Language, e.Default, len(e.Packages), e.Digest)
	}
	_ = tw.Flush()
	return exitOK
}

// cmdEnvRm removes an environment from the helper config (as root). A
// language's default is refused: every exec of that language without an
// environment would fail. Its tree and manifest are removed when they are
// below --lib and no other environment uses them.
func cmdEnvRm(args []string, sio stdio) int {
	fs := flag.NewFlagSet("env rm", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfgPath := fs.String("helper-config", config.DefaultPath, "")
	lib := fs.String("lib", defaultEnvLib, "")
	pos, err := parseInterspersed(fs, args)
	if err != nil || len(pos) != 1 {
		return usage(sio.err, "%s", envUsage)
	}
	name := pos[0]
	gone, err := envtree.Unregister(*cfgPath, name)
	if err != nil {
		fmt.Fprintln(sio.err, "sandboxctl: env rm:", err)
		return exitNotReady
	}
	if gone.Root != "" && strings.HasPrefix(gone.Root, filepath.Clean(*lib)+"/") {
		if err := os.RemoveAll(gone.Root); err != nil {
			fmt.Fprintln(sio.err, "sandboxctl: env rm:", err)
			return exitNotReady
		}
		_ = os.Remove(gone.Manifest)
	}
	fmt.Fprintf(sio.out, "removed environment %s (restart sandboxd so it is no longer listed)\n", name)
	return exitOK
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
