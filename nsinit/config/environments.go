package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
)

// EnvironmentMountPrefix is where every environment tree appears inside the
// sandbox: below it, so that an environment can never shadow /usr, /etc,
// /workspace, /tmp or the helper's own /run/sandboxd.
const EnvironmentMountPrefix = "/opt/sandboxd/env/"

// Environment is one named runtime environment: a read-only tree bound into
// the sandbox, the variables that point the runtime at it, and the digest
// registration computed (package nsinit/envtree). Requests name it; they
// never give a path.
type Environment struct {
	Name     string `json:"name"`
	Language string `json:"language"`
	// Root is the host directory of the tree, root-owned; empty for an
	// environment that adds no tree (e.g. "minimal").
	Root string `json:"root,omitempty"`
	// Mount is where Root appears in the sandbox, read-only, below
	// EnvironmentMountPrefix.
	Mount string `json:"mount,omitempty"`
	// Manifest is the root-owned manifest of Root, outside Root.
	Manifest string `json:"manifest,omitempty"`
	// Digest is the tree's content digest (envtree.Digest), as registered:
	// what the helper checks the tree against. The environment's own
	// digest, which also covers Env, is EnvironmentDigest.
	Digest string `json:"digest"`
	// Env is NAME=value set in the payload's environment (PYTHONPATH,
	// MATPLOTLIBRC, MPLCONFIGDIR, NODE_PATH ...); a request's env wins.
	// It is part of the environment's definition: EnvironmentDigest
	// covers it.
	Env []string `json:"env,omitempty"`
	// Packages are what the environment declares it provides.
	Packages []Package `json:"packages,omitempty"`
	// Default makes it the environment of its language's requests that
	// name none; at most one per language.
	Default bool `json:"default,omitempty"`
}

// Package is one declared package of an environment.
type Package struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// EnvironmentDigest is the digest of the environment as a payload gets it:
// sha256 over a version line, the tree's registered digest and the
// variables, sorted, one NAME=value a line. It is what GET
// /v1/environments lists, the decide record and the helper's exec facts
// attest and the result's policy.environment.digest says: the helper
// computes it from the same root-owned config whose variables it sets and
// whose tree digest it checks, so the attested digest covers exactly what
// the payload got. A value may contain a newline, so each entry is
// length-prefixed: two lists never hash alike.
func (e Environment) EnvironmentDigest() string {
	env := append([]string(nil), e.Env...)
	sort.Strings(env)
	h := sha256.New()
	fmt.Fprintf(h, "sandboxd environment v1\ntree %s\n", e.Digest)
	for _, kv := range env {
		fmt.Fprintf(h, "%d:%s\n", len(kv), kv)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// EnvMap is Env as a map of names to values.
func (e Environment) EnvMap() map[string]string {
	out := make(map[string]string, len(e.Env))
	for _, kv := range e.Env {
		name, value, _ := strings.Cut(kv, "=")
		out[name] = value
	}
	return out
}

// Environment returns the environment called name.
func (c *Config) Environment(name string) (*Environment, bool) {
	for i := range c.Environments {
		if c.Environments[i].Name == name {
			return &c.Environments[i], true
		}
	}
	return nil, false
}

func isEnvToken(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') || (i == 0 && (c == '.' || c == '-')) {
			return false
		}
	}
	return true
}

func cleanAbs(p string) bool { return filepath.IsAbs(p) && filepath.Clean(p) == p }

// validateEnvironments checks the environments' shape against the runtimes.
func (c *Config) validateEnvironments() error {
	names := map[string]bool{}
	defaults := map[string]string{}
	for _, e := range c.Environments {
		if !isEnvToken(e.Name) {
			return fmt.Errorf("helper config: environment name %q: want 1-64 of [a-z0-9._-]", e.Name)
		}
		if names[e.Name] {
			return fmt.Errorf("helper config: environment %q declared twice", e.Name)
		}
		names[e.Name] = true
		if _, ok := c.Runtimes[e.Language]; !ok {
			return fmt.Errorf("helper config: environment %q: language %q is not a configured runtime", e.Name, e.Language)
		}
		if !strings.HasPrefix(e.Digest, "sha256:") || len(e.Digest) != len("sha256:")+64 {
			return fmt.Errorf("helper config: environment %q: digest %q is not sha256:<64 hex>", e.Name, e.Digest)
		}
		if err := e.validateTree(); err != nil {
			return fmt.Errorf("helper config: environment %q: %w", e.Name, err)
		}
		for _, kv := range e.Env {
			if name, _, ok := strings.Cut(kv, "="); !ok || name == "" || strings.HasPrefix(name, "LD_") {
				return fmt.Errorf("helper config: environment %q: env entry %q is not NAME=value (LD_ names are refused)", e.Name, kv)
			}
		}
		if e.Default {
			if other, dup := defaults[e.Language]; dup {
				return fmt.Errorf("helper config: environments %q and %q are both the default of %s", other, e.Name, e.Language)
			}
			defaults[e.Language] = e.Name
		}
	}
	return nil
}

func (e *Environment) validateTree() error {
	if e.Root == "" {
		if e.Mount != "" || e.Manifest != "" {
			return fmt.Errorf("mount and manifest need a root")
		}
		return nil
	}
	if !cleanAbs(e.Root) || !cleanAbs(e.Manifest) || !cleanAbs(e.Mount) {
		return fmt.Errorf("root, manifest and mount must be clean absolute paths")
	}
	if !strings.HasPrefix(e.Mount, EnvironmentMountPrefix) || len(e.Mount) == len(EnvironmentMountPrefix) {
		return fmt.Errorf("mount %q must be below %s", e.Mount, EnvironmentMountPrefix)
	}
	if strings.HasPrefix(e.Manifest+"/", e.Root+"/") {
		return fmt.Errorf("manifest %q must be outside the tree %q", e.Manifest, e.Root)
	}
	return nil
}
