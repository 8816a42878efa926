package policy

import (
	"slices"
	"strings"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/audit/facts"
)

// Environments is the catalog of named environments the supervisor read
// from the helper's root-owned config at start (the helper re-checks every
// name and tree at launch; this copy only lets policy refuse an unknown name
// with 400 before anything runs, and lets GET /v1/environments list them).
type Environments []api.Environment

// Lookup returns the environment called name.
func (e Environments) Lookup(name string) (api.Environment, bool) {
	for _, x := range e {
		if x.Name == name {
			return x, true
		}
	}
	return api.Environment{}, false
}

// Default returns the operator's default environment of language, if any.
func (e Environments) Default(language string) (api.Environment, bool) {
	for _, x := range e {
		if x.Language == language && x.Default {
			return x, true
		}
	}
	return api.Environment{}, false
}

func (e Environments) names(language string) string {
	var n []string
	for _, x := range e {
		if x.Language == language {
			n = append(n, x.Name)
		}
	}
	slices.Sort(n)
	if len(n) == 0 {
		return "none are configured for " + language
	}
	return "configured for " + language + ": " + strings.Join(n, ", ")
}

// ResolveEnvironment picks the environment of an exec: the request's, else
// the session's default (when it is of the exec's language), else the
// language's default; "" when none of them
// names one. A name that is not configured, or is for another language, is
// the caller's error (400).
func ResolveEnvironment(requested, sessionDefault, language string, envs Environments) (api.Environment, error) {
	name := requested
	if name == "" {
		// A session's default is for its execs of that environment's
		// language: a python default must not refuse the session's
		// javascript execs.
		if e, ok := envs.Lookup(sessionDefault); !ok || e.Language == language {
			name = sessionDefault
		}
	}
	if name == "" {
		d, _ := envs.Default(language)
		return d, nil
	}
	e, ok := envs.Lookup(name)
	if !ok {
		return e, invalid("environment %q is not configured (%s; GET /v1/environments lists them)", name, envs.names(language))
	}
	if e.Language != language {
		return e, invalid("environment %q is for %s, not %s", name, e.Language, language)
	}
	return e, nil
}

// ValidateSessionEnvironment checks a session's default environment when
// the session is created: it must name a configured environment.
func ValidateSessionEnvironment(name string, envs Environments) error {
	if name == "" {
		return nil
	}
	if _, ok := envs.Lookup(name); !ok {
		return invalid("environment %q is not configured (GET /v1/environments lists them)", name)
	}
	return nil
}

// decideEnvironment is Decide's environment rule.
func decideEnvironment(req Request, runtime string, cfg Config, f *facts.Decide) (api.Environment, error) {
	e, err := ResolveEnvironment(req.Exec.Environment, req.SessionEnvironment, runtime, cfg.Environments)
	if err != nil {
		return e, err
	}
	if e.Name != "" {
		f.Environment, f.EnvironmentDigest = e.Name, e.Digest
	}
	return e, nil
}
