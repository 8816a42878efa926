package supervisor

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/kernel"
	"github.com/sandboxd/sandboxd/launch"
	"github.com/sandboxd/sandboxd/nsinit/config"
	"github.com/sandboxd/sandboxd/nsinit/envtree"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/session"
)

// DefaultEnvironmentRecheck is how often the supervisor re-hashes every
// environment tree in full (envtree.Full). The helper's per-launch check is
// lstat-only (envtree.Quick); this catches what that cannot see.
const DefaultEnvironmentRecheck = 10 * time.Minute

// EnvironmentsFromHelperConfig reads the environments of the helper's
// config: the catalog policy decides with, and the trees to re-check. A
// missing or invalid config gives none (the health check reports it).
func EnvironmentsFromHelperConfig(path string) (policy.Environments, []config.Environment, error) {
	hc, err := config.Load(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read environments: %w", err)
	}
	return Catalog(hc.Environments), hc.Environments, nil
}

// Catalog turns the helper config's environments into the API's view,
// sorted by name.
func Catalog(envs []config.Environment) policy.Environments {
	out := make(policy.Environments, 0, len(envs))
	for _, e := range envs {
		pk := make([]api.Package, 0, len(e.Packages))
		for _, p := range e.Packages {
			pk = append(pk, api.Package{Name: p.Name, Version: p.Version})
		}
		out = append(out, api.Environment{Name: e.Name, Language: e.Language, Digest: e.EnvironmentDigest(), TreeDigest: e.Digest,
			Env: e.EnvMap(), Packages: pk, Default: e.Default})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// envChecker holds the result of the last full check of each tree.
type envChecker struct {
	trees []config.Environment
	mu    sync.Mutex
	bad   map[string]string // name -> reason
}

// CheckTree runs the full check of one environment (none for an
// environment without a tree).
func CheckTree(e config.Environment) error {
	if e.Root == "" {
		return nil
	}
	return envtree.CheckRegistered(e.Root, e.Manifest, e.Digest)
}

// recheck re-hashes every tree and records which are broken.
func (c *envChecker) recheck(log *slog.Logger) {
	bad := map[string]string{}
	for _, e := range c.trees {
		if err := CheckTree(e); err != nil {
			bad[e.Name] = envtree.Reason(err)
			log.Error("environment tree is not as registered; its execs are refused", "environment", e.Name, "err", err)
		}
	}
	c.mu.Lock()
	c.bad = bad
	c.mu.Unlock()
}

// quick runs the per-launch check (lstat against the manifest) of one
// tree, as the helper does: health then reports a change at once, not only
// after the next full re-hash.
func (c *envChecker) quick(name string) error {
	if c == nil {
		return nil
	}
	for _, e := range c.trees {
		if e.Name != name || e.Root == "" {
			continue
		}
		m, err := envtree.ReadManifest(e.Manifest)
		if err != nil {
			return err
		}
		return envtree.Quick(e.Root, m)
	}
	return nil
}

func (c *envChecker) broken(name string) (string, bool) {
	if c == nil {
		return "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.bad[name]
	return r, ok
}

// WatchEnvironments re-hashes trees now and every interval until ctx ends.
// An exec in an environment found broken is refused with 503 and the
// reason (the helper's own per-launch check refuses it too).
func (s *Server) WatchEnvironments(ctx context.Context, trees []config.Environment, interval time.Duration) {
	c := &envChecker{trees: trees}
	c.recheck(s.log)
	s.envMu.Lock()
	s.envs = c
	s.envMu.Unlock()
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				c.recheck(s.log)
			}
		}
	}()
}

// environmentRefusal is the 503 for an environment the full check found
// modified.
func (s *Server) environmentRefusal(name string) *APIError {
	s.envMu.Lock()
	c := s.envs
	s.envMu.Unlock()
	reason, bad := c.broken(name)
	if !bad {
		return nil
	}
	return toAPI(errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("environment %q cannot be used: %s", name, reason),
		"re-register the environment as root (make run) and check `sandboxctl doctor`", nil))
}

// environmentQuick runs the helper's per-launch check (lstat against the
// manifest) of environment name's tree; nil without a tree or a watcher.
func (s *Server) environmentQuick(name string) error {
	if name == "" {
		return nil
	}
	s.envMu.Lock()
	c := s.envs
	s.envMu.Unlock()
	return c.quick(name)
}

// handleEnvironments serves GET /v1/environments.
func (s *Server) handleEnvironments(w http.ResponseWriter, r *http.Request) {
	list := api.EnvironmentList{Environments: []api.Environment{}}
	list.Environments = append(list.Environments, s.cfg.Environments...)
	for i := range list.Environments {
		if list.Environments[i].Packages == nil {
			list.Environments[i].Packages = []api.Package{}
		}
	}
	writeJSON(w, http.StatusOK, list)
}

// environmentHealth lists the environments for GET /v1/health: "ok" or the
// reason of the last full check.
func (s *Server) environmentHealth() []api.EnvironmentHealth {
	s.envMu.Lock()
	c := s.envs
	s.envMu.Unlock()
	var out []api.EnvironmentHealth
	for _, e := range s.cfg.Environments {
		st := api.CheckOK
		if reason, bad := c.broken(e.Name); bad {
			st = reason
		} else if err := c.quick(e.Name); err != nil {
			st = envtree.Reason(err)
		}
		out = append(out, api.EnvironmentHealth{Name: e.Name, Digest: e.Digest, Status: st})
	}
	return out
}

// kernelEnvironmentConflict refuses an exec whose environment is not the
// one the session's running kernel of its language was launched in: the
// kernel cannot change environment, and running the exec there would
// silently give it other packages than it asked for. (A kernel that has
// ended is replaced by one in the exec's environment.)
func (s *Server) kernelEnvironmentConflict(sess *session.Session, req launch.Request) error {
	held, _ := s.sessions.KernelOf(sess, req.Runtime)
	k, ok := held.(*kernel.Kernel)
	if !ok || !k.Alive() || k.Environment() == req.Environment {
		return nil
	}
	name := func(e string) string {
		if e == "" {
			return "no environment"
		}
		return fmt.Sprintf("environment %q", e)
	}
	return errdefs.New(errdefs.ErrConflict,
		fmt.Sprintf("the session's %s kernel runs in %s; this exec asks for %s", req.Runtime, name(k.Environment()), name(req.Environment)),
		fmt.Sprintf(`send "mode": "process", or restart the kernel (POST /v1/sessions/%s/kernels/%s/restart starts it in the session's environment)`, sess.ID, req.Runtime), nil)
}

// sessionKernelEnvironment is the environment a restarted kernel of
// language starts in: the session's default if it is of that language,
// else the language's default (policy.ResolveEnvironment with no request).
func (s *Server) sessionKernelEnvironment(sess *session.Session, language string) string {
	e, err := policy.ResolveEnvironment("", s.sessions.EnvironmentOf(sess), language, s.cfg.Environments)
	if err != nil {
		return ""
	}
	return e.Name
}

// environmentRef attests a kernel exec's environment: the kernel's, as
// the helper checked it when the kernel was launched.
func (s *Server) environmentRef(name string) *api.EnvironmentRef {
	if name == "" {
		return nil
	}
	e, _ := s.cfg.Environments.Lookup(name)
	return &api.EnvironmentRef{Name: name, Digest: e.Digest}
}
