package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/cgroup"
	"github.com/sandboxd/sandboxd/kernel/runners"
	"github.com/sandboxd/sandboxd/launch"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/session"
)

// The supervisor's half of the warm pool (launch.WarmPool keeps the
// sandboxes): which keys are kept warm (those of an ordinary one-shot exec
// under the live settings), how one is built, which decided exec may take
// one (warmEligible), and running it there (runWarm).

// warmStarter is what the pool needs of the launcher (launch.HelperLauncher).
type warmStarter interface {
	StartWarm(req launch.Request) (*launch.Warm, error)
}

// StartWarmPool keeps between cfg.WarmPool.Min and Max warm sandboxes per
// language (a cap of 0, or a launcher that cannot build them: no pool),
// built by at most warmBuilders() at once, until the returned func is
// called, which destroys them and waits. helperPath and helperConfig are
// fingerprinted: a warm sandbox built before either (or the profile, or an
// environment) changed is destroyed, never used.
func (s *Server) StartWarmPool(ctx context.Context) func() {
	ws, ok := s.launcher.(warmStarter)
	if !ok || s.cfg.WarmPool.Max <= 0 {
		return func() {}
	}
	builders := warmBuilders(affinityCPUs(), cgroup.OwnCPULimit)
	s.log.Info("warm pool", "size", s.cfg.WarmPool.String(), "builders", builders)
	p := launch.NewWarmPool(launch.WarmPoolConfig{
		Min: s.cfg.WarmPool.Min, Max: s.cfg.WarmPool.Max, Builders: builders,
		Build:       func(key launch.WarmKey) (launch.WarmSandbox, error) { return s.buildWarm(ws, key) },
		Fingerprint: launch.HelperFingerprint(s.cfg.HelperPath, s.cfg.HelperConfigPath, launch.DefaultOwnerFile),
		Log:         s.log,
	})
	s.warm.Store(p)
	stop := p.Keep(ctx, s.warmKeys)
	return func() {
		s.warm.Store(nil)
		stop()
	}
}

// warmBuilders is how many warm sandboxes may be built at once: the CPUs
// the operator gives sandboxd, i.e. those it may run on (affinity) and, if
// its cgroups set a CPU quota, no more than that quota (rounded down);
// at least 1. A build is CPU-bound (helper, bwrap, the interpreter's
// start), so more builders than CPUs would only take them from execs.
func warmBuilders(affinity int, quota func(cgroup.Host) (float64, bool)) int {
	n := max(affinity, 1)
	if q, ok := quota(cgroup.Host{}); ok {
		n = min(n, int(q))
	}
	return max(n, 1)
}

// affinityCPUs is the number of CPUs this process may run on now (0 if
// the affinity cannot be read).
func affinityCPUs() int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return 0
	}
	return set.Count()
}

// warmLanguages are the languages a warm stub exists for.
var warmLanguages = []string{"python", "javascript"}

// warmTemplate is what policy decides for an ordinary one-shot exec of
// language: its key is the one a warm sandbox is built for.
func (s *Server) warmTemplate(language string) (launch.Request, error) {
	self := launch.Caller{UID: s.selfUID, GID: os.Getgid(), PID: os.Getpid()}
	d, err := policy.Decide(policy.Request{Exec: api.ExecRequest{Language: language, Code: "pass"}}, self, s.liveConfig())
	if err != nil {
		return launch.Request{}, err
	}
	return launch.Request{Caller: self, Runtime: d.Runtime, Limits: d.Limits, Network: d.Network, Environment: d.Environment.Name}, nil
}

// warmKeys are the keys of the current live settings.
func (s *Server) warmKeys() []launch.WarmKey {
	var keys []launch.WarmKey
	for _, lang := range warmLanguages {
		t, err := s.warmTemplate(lang)
		if err != nil {
			s.log.Debug("no warm pool for language", "language", lang, "err", err)
			continue
		}
		keys = append(keys, launch.WarmKeyOf(t))
	}
	return keys
}

// buildWarm starts one warm sandbox for key: the stub as its code, no
// env, stdin, files or artifacts, network none, the default limits (the
// cgroup's are set again per request), under a fresh launch id whose
// records are the supervisor's own (caller: the supervisor).
func (s *Server) buildWarm(ws warmStarter, key launch.WarmKey) (launch.WarmSandbox, error) {
	t, err := s.warmTemplate(languageOf(key.Runtime))
	if err != nil {
		return nil, err
	}
	if launch.WarmKeyOf(t) != key {
		return nil, errors.New("the live settings changed the warm key")
	}
	src, err := runners.WarmSource(key.Runtime)
	if err != nil {
		return nil, err
	}
	t.ExecID, t.Code, t.Kernel, t.Network = newExecID(), src, launch.KernelWarm, api.NetworkNone
	w, err := ws.StartWarm(t)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// languageOf maps a runtime back to the language that decides it (they
// are the same names for the warm languages).
func languageOf(runtime string) string { return runtime }

// warmEligible reports the key of a decided exec the pool may serve: a
// one-shot process exec of an ordinary kind (no session, no entrypoint,
// network none, no env). Its key must still match a warm sandbox's (take).
//
// A request with env launches cold: the stub could set its environment
// (os.environ, process.env) and its children's, but not the process's own
// /proc/self/environ, which the kernel keeps from its execve and only
// prctl(PR_SET_MM_ENV_START) with CAP_SYS_RESOURCE could move; a payload
// reading it would see the base without the request's names (I4).
func warmEligible(sess *session.Session, d decision) (launch.WarmKey, bool) {
	l := d.launch
	if sess != nil || l.SessionWorkspace != "" || d.mode != api.ModeProcess || d.entrypoint != "" ||
		l.Network != api.NetworkNone || l.Probe || l.Kernel != "" || len(l.Env) > 0 {
		return launch.WarmKey{}, false
	}
	return launch.WarmKeyOf(l), true
}

// runWarm runs d in a warm sandbox if the pool has one for it; ok false
// means launch cold (nothing of d was handed over).
func (s *Server) runWarm(ctx context.Context, sess *session.Session, d decision) (res *launch.ExecResult, ok bool, err error) {
	p := s.warm.Load()
	if p == nil {
		return nil, false, nil
	}
	key, eligible := warmEligible(sess, d)
	if !eligible {
		return nil, false, nil
	}
	if err := s.environmentQuick(key.Environment); err != nil {
		// The helper checks the environment's tree at every launch, and a
		// warm sandbox's check is as old as the sandbox: a tree changed
		// since launches cold, where the helper refuses it (503, the same
		// answer and trail as without the pool).
		s.log.Warn("environment changed since the warm sandboxes were built; launching cold", "environment", key.Environment, "err", err)
		return nil, false, nil
	}
	header := runners.WarmHeader(d.launch.Code, d.launch.Env)
	for tries := 0; tries < 2; tries++ {
		sb := p.Take(key)
		if sb == nil {
			return nil, false, nil
		}
		res, err = sb.Run(ctx, d.launch, header)
		if !errors.Is(err, launch.ErrWarmGone) {
			return res, true, err
		}
	}
	return nil, false, nil
}

// writeWarmMetrics writes the pool's counters (nothing without a pool).
func (s *Server) writeWarmMetrics(w io.Writer) {
	p := s.warm.Load()
	if p == nil {
		return
	}
	counts, st := p.IdleCounts(), p.Stats()
	targets, builds := p.Targets()
	for _, g := range []struct {
		name, help string
		v          map[string]int
	}{
		{"sandboxd_warm_pool_idle", "Warm sandboxes built (bwrap runs the stub) and waiting, by runtime.", counts},
		{"sandboxd_warm_pool_target", "Warm sandboxes the pool keeps for the runtime now: its recent exec rate times a build's duration, between the --warm-pool floor and cap.", targets},
	} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n", g.name, g.help, g.name)
		for _, rt := range warmLanguages {
			fmt.Fprintf(w, "%s{runtime=%q} %d\n", g.name, rt, g.v[rt])
		}
	}
	fmt.Fprintln(w, "# HELP sandboxd_warm_build_seconds Moving average of a warm sandbox's build (builder slot to bwrap running the stub), by runtime; 0 before one is measured.")
	fmt.Fprintln(w, "# TYPE sandboxd_warm_build_seconds gauge")
	for _, rt := range warmLanguages {
		fmt.Fprintf(w, "sandboxd_warm_build_seconds{runtime=%q} %.3f\n", rt, builds[rt].Seconds())
	}
	for _, m := range []struct {
		name, help string
		v          int64
	}{
		{"sandboxd_warm_execs_total", "One-shot execs served by a warm sandbox.", st.Taken},
		{"sandboxd_warm_misses_total", "Eligible one-shot execs that found no warm sandbox and launched cold.", st.Missed},
		{"sandboxd_warm_builds_total", "Warm sandboxes built.", st.Built},
		{"sandboxd_warm_build_failures_total", "Warm sandbox builds that failed.", st.Failed},
		{"sandboxd_warm_destroyed_unused_total", "Warm sandboxes destroyed unused (stale fingerprint, dead, or no longer wanted).", st.DestroyedUnused},
		{"sandboxd_warm_retired_total", "Idle warm sandboxes retired above the pool's target (the demand fell).", st.Retired},
	} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s %d\n", m.name, m.help, m.name, m.name, m.v)
	}
}
