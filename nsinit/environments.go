package nsinit

import (
	"fmt"

	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/nsinit/config"
	"github.com/sandboxd/sandboxd/nsinit/envtree"
	"github.com/sandboxd/sandboxd/nsinit/spec"
)

// fixEnvironment is the fix when an environment's tree is refused.
const fixEnvironment = "the environment's tree changed after it was registered: reinstall or re-register it as root (make run, or `sandboxctl env register`), then `sandboxctl doctor`"

// envMount is what an accepted environment adds to a launch.
type envMount struct {
	binds []string // bwrap options, before "--"
	env   []string // NAME=value, below the request's env
}

// CheckEnvironment resolves name in the helper's config and checks its
// tree the cheap way (envtree.Quick: lstat of every entry against the
// root-owned manifest) before anything of it reaches a sandbox. The root
// and the manifest must be root-owned, so the supervisor's uid can change
// neither. An empty name is no environment.
func CheckEnvironment(cfg *config.Config, name string) (*config.Environment, []string, error) {
	if name == "" {
		return nil, nil, nil
	}
	e, ok := cfg.Environment(name)
	if !ok {
		return nil, nil, fmt.Errorf("environment %q is not in the helper config", name)
	}
	if e.Root == "" {
		return e, nil, nil
	}
	for _, p := range []string{e.Root, e.Manifest} {
		if err := config.CheckRootOwned(p); err != nil {
			return nil, nil, fmt.Errorf("environment %q: %w", name, err)
		}
	}
	m, err := envtree.ReadManifest(e.Manifest)
	if err != nil {
		return nil, nil, fmt.Errorf("environment %q: %w", name, err)
	}
	if m.Digest != e.Digest {
		return nil, nil, fmt.Errorf("environment %q: its manifest has digest %s, the helper config registered %s", name, m.Digest, e.Digest)
	}
	if err := envtree.Quick(e.Root, m); err != nil {
		return nil, nil, fmt.Errorf("environment %q: %w", name, err)
	}
	return e, []string{"--ro-bind", e.Root, e.Mount}, nil
}

// environment runs CheckEnvironment for the launch, recording the result
// in the exec facts; a refusal is exit ExitEnvironment (503: the host's
// environment, not the request, is at fault).
func (l *launch) environment(xf *facts.Exec) (envMount, int) {
	e, binds, err := CheckEnvironment(l.cfg, l.spec.Environment)
	if err != nil {
		xf.Environment, xf.EnvironmentError = l.spec.Environment, envtree.Reason(err)
		return envMount{}, l.rep.fail(xf, spec.ExitEnvironment, err, fixEnvironment)
	}
	if e == nil {
		return envMount{}, 0
	}
	xf.Environment, xf.EnvironmentDigest = e.Name, e.EnvironmentDigest()
	return envMount{binds: binds, env: e.Env}, 0
}
