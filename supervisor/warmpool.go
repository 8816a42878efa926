package supervisor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/kernel/runners"
	"github.com/sandboxd/sandboxd/launch"
	"github.com/sandboxd/sandboxd/nsinit/config"
	"github.com/sandboxd/sandboxd/policy"
)

// The warm pool (docs/DESIGN.md "Warm pool") keeps
// --warm-pool sandboxes per language fully built and waiting: helper,
// bwrap, interpreter started, empty one-shot workspace, own cgroup. An
// ordinary one-shot exec takes one (launch.Warm.Run), which is never
// reused: it is reaped after the exec and a replacement is built in the
// background. A request the pool cannot serve launches cold, with the
// same result and the same trail. A warm sandbox is never shared: taking
// removes it from the pool under the lock, and Run refuses a second owner.

// warmRecheck is how often idle warm sandboxes are checked against the
// current fingerprint and keys (besides the check at every take).
const warmRecheck = 30 * time.Second

// warmRetry is how long a key waits after a failed build before the next.
const warmRetry = 5 * time.Second

// warmKey is what a warm sandbox was built for. Everything the helper
// fixes at launch is in it: the runtime, the environment, the /tmp size
// and the rlimits. A request takes a warm sandbox only if its decision has
// exactly this key; memory, pids and CPU are set per request (cgroup).
type warmKey struct {
	Runtime       string
	Environment   string
	TmpSizeBytes  int64
	NoFile        uint64
	FileSizeBytes uint64
}

func keyOf(r LaunchRequest) warmKey {
	return warmKey{Runtime: r.Runtime, Environment: r.Environment, TmpSizeBytes: r.Limits.TmpSizeBytes,
		NoFile: r.Limits.NoFile, FileSizeBytes: r.Limits.FileSizeBytes}
}

// warmSandbox is a built warm sandbox (*launch.Warm).
type warmSandbox interface {
	ID() string
	Run(ctx context.Context, ex launch.Request, header []byte) (*ExecResult, error)
	Stop()
	Dead() <-chan struct{}
	Ready() <-chan struct{}
}

// warmEntry is an idle warm sandbox and the fingerprint it was built under.
type warmEntry struct {
	sb warmSandbox
	fp string
}

// unusable says why e must not be used under fingerprint fp ("": usable).
func (e *warmEntry) unusable(fp string) string {
	switch {
	case e.fp != fp:
		return "stale: the helper, its config, the profile or an environment changed since it was built"
	case isClosed(e.sb.Dead()):
		return "dead: it ended while idle"
	}
	return ""
}

// warmPool holds the idle warm sandboxes by key.
type warmPool struct {
	size        int
	build       func(key warmKey) (warmSandbox, error)
	fingerprint func() string
	log         *slog.Logger

	mu       sync.Mutex
	keys     map[warmKey]bool // the keys kept warm
	idle     map[warmKey][]*warmEntry
	building map[warmKey]int
	closed   bool
	builders sync.WaitGroup
	buildOne chan struct{} // one build at a time: builds compete with execs for CPU

	taken, missed, built, failed, stale atomic.Int64
}

func newWarmPool(size int, build func(warmKey) (warmSandbox, error), fingerprint func() string, log *slog.Logger) *warmPool {
	return &warmPool{size: size, build: build, fingerprint: fingerprint, log: log,
		keys: map[warmKey]bool{}, idle: map[warmKey][]*warmEntry{}, building: map[warmKey]int{},
		buildOne: make(chan struct{}, 1)}
}

// setKeys sets the keys kept warm; idle sandboxes of other keys are
// destroyed, and every key is filled.
func (p *warmPool) setKeys(keys []warmKey) {
	want := map[warmKey]bool{}
	for _, k := range keys {
		want[k] = true
	}
	p.mu.Lock()
	var drop []*warmEntry
	for k, list := range p.idle {
		if !want[k] {
			drop = append(drop, list...)
			delete(p.idle, k)
		}
	}
	p.keys = want
	p.mu.Unlock()
	p.stop(drop)
	for _, k := range keys {
		p.fill(k)
	}
}

// fill starts the builds that bring key back to size.
func (p *warmPool) fill(key warmKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || !p.keys[key] {
		return
	}
	for n := p.size - len(p.idle[key]) - p.building[key]; n > 0; n-- {
		p.building[key]++
		p.builders.Add(1)
		go p.buildFor(key)
	}
}

// buildFor builds one warm sandbox for key and adds it to the pool.
func (p *warmPool) buildFor(key warmKey) {
	defer p.builders.Done()
	p.buildOne <- struct{}{}
	fp := p.fingerprint()
	var sb warmSandbox
	var err error
	if p.wanted(key) {
		sb, err = p.build(key)
	} else {
		err = errors.New("the pool no longer wants this key")
	}
	<-p.buildOne
	p.mu.Lock()
	p.building[key]--
	keep := err == nil && !p.closed && p.keys[key]
	if keep {
		p.idle[key] = append(p.idle[key], &warmEntry{sb: sb, fp: fp})
	}
	closed := p.closed
	p.mu.Unlock()
	switch {
	case keep:
		p.built.Add(1)
	case err == nil:
		sb.Stop()
	case !closed && p.wanted(key):
		p.failed.Add(1)
		p.log.Warn("warm sandbox build failed; one-shot execs launch cold meanwhile", "runtime", key.Runtime, "err", err)
		time.AfterFunc(warmRetry, func() { p.fill(key) })
	}
}

func (p *warmPool) wanted(key warmKey) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.closed && p.keys[key]
}

// take removes and returns an idle sandbox of key built under the current
// fingerprint, or nil (the exec launches cold). Stale and dead ones met on
// the way are destroyed, never used; a replacement build starts either way.
func (p *warmPool) take(key warmKey) warmSandbox {
	fp := p.fingerprint()
	var drop []*warmEntry
	var got warmSandbox
	p.mu.Lock()
	kept := p.idle[key][:0:0]
	for _, e := range p.idle[key] {
		switch why := e.unusable(fp); {
		case why != "":
			p.log.Info("warm sandbox destroyed unused", "launch_id", e.sb.ID(), "reason", why)
			drop = append(drop, e)
		case got == nil && isClosed(e.sb.Ready()):
			got = e.sb
		default:
			kept = append(kept, e)
		}
	}
	if got == nil && len(kept) > 0 {
		// None is built yet: the oldest is the nearest to it, and still
		// ahead of a cold launch.
		got, kept = kept[0].sb, kept[1:]
	}
	p.idle[key] = kept
	p.mu.Unlock()
	p.stop(drop)
	if got == nil {
		p.missed.Add(1)
	} else {
		p.taken.Add(1)
	}
	p.fill(key)
	return got
}

// recheck destroys idle sandboxes built under another fingerprint (the
// helper, its config, the profile or an environment changed) or dead,
// and refills.
func (p *warmPool) recheck() {
	fp := p.fingerprint()
	var drop []*warmEntry
	p.mu.Lock()
	keys := make([]warmKey, 0, len(p.keys))
	for k := range p.keys {
		keys = append(keys, k)
	}
	for k, list := range p.idle {
		kept := list[:0:0]
		for _, e := range list {
			if why := e.unusable(fp); why != "" {
				p.log.Info("warm sandbox destroyed unused", "launch_id", e.sb.ID(), "reason", why)
				drop = append(drop, e)
			} else {
				kept = append(kept, e)
			}
		}
		p.idle[k] = kept
	}
	p.mu.Unlock()
	p.stop(drop)
	for _, k := range keys {
		p.fill(k)
	}
}

// stop destroys entries (stale, dead or unwanted) in the background.
func (p *warmPool) stop(drop []*warmEntry) {
	if len(drop) == 0 {
		return
	}
	p.stale.Add(int64(len(drop)))
	for _, e := range drop {
		go e.sb.Stop()
	}
}

// close stops every idle sandbox and waits for builds in flight, whose
// sandboxes are stopped too.
func (p *warmPool) close() {
	p.mu.Lock()
	p.closed = true
	var all []warmSandbox
	for _, list := range p.idle {
		for _, e := range list {
			all = append(all, e.sb)
		}
	}
	p.idle = map[warmKey][]*warmEntry{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, sb := range all {
		wg.Add(1)
		go func() { defer wg.Done(); sb.Stop() }()
	}
	wg.Wait()
	p.builders.Wait()
}

// idleCounts is the number of idle sandboxes per runtime that are built
// and alive (metrics).
func (p *warmPool) idleCounts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for k, list := range p.idle {
		for _, e := range list {
			if !isClosed(e.sb.Dead()) && isClosed(e.sb.Ready()) {
				out[k.Runtime]++
			}
		}
	}
	return out
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// warmStarter is what the pool needs of the launcher (launch.HelperLauncher).
type warmStarter interface {
	StartWarm(req launch.Request) (*launch.Warm, error)
}

// StartWarmPool keeps cfg.WarmPool warm sandboxes per language (0, or a
// launcher that cannot build them: no pool) until the returned func is
// called, which destroys them and waits. helperPath and helperConfig are
// fingerprinted: a warm sandbox built before either (or the profile, or an
// environment) changed is destroyed, never used.
func (s *Server) StartWarmPool(ctx context.Context) func() {
	ws, ok := s.launcher.(warmStarter)
	if !ok || s.cfg.WarmPool <= 0 {
		return func() {}
	}
	fc := &fingerprintCache{helperPath: s.cfg.HelperPath, configPath: s.cfg.HelperConfigPath}
	p := newWarmPool(s.cfg.WarmPool, func(key warmKey) (warmSandbox, error) { return s.buildWarm(ws, key) }, fc.get, s.log)
	s.warm.Store(p)
	p.setKeys(s.warmKeys())
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(warmRecheck)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				p.setKeys(s.warmKeys())
				p.recheck()
			}
		}
	}()
	return func() {
		cancel()
		<-done
		s.warm.Store(nil)
		p.close()
	}
}

// warmLanguages are the languages a warm stub exists for.
var warmLanguages = []string{"python", "javascript"}

// warmTemplate is what policy decides for an ordinary one-shot exec of
// language: its key is the one a warm sandbox is built for.
func (s *Server) warmTemplate(language string) (LaunchRequest, error) {
	self := Caller{UID: s.selfUID, GID: os.Getgid(), PID: os.Getpid()}
	d, err := policy.Decide(policy.Request{Exec: api.ExecRequest{Language: language, Code: "pass"}}, self, s.liveConfig())
	if err != nil {
		return LaunchRequest{}, err
	}
	return LaunchRequest{Caller: self, Runtime: d.Runtime, Limits: d.Limits, Network: d.Network, Environment: d.Environment.Name}, nil
}

// warmKeys are the keys of the current live settings.
func (s *Server) warmKeys() []warmKey {
	var keys []warmKey
	for _, lang := range warmLanguages {
		t, err := s.warmTemplate(lang)
		if err != nil {
			s.log.Debug("no warm pool for language", "language", lang, "err", err)
			continue
		}
		keys = append(keys, keyOf(t))
	}
	return keys
}

// buildWarm starts one warm sandbox for key: the stub as its code, no
// env, stdin, files or artifacts, network none, the default limits (the
// cgroup's are set again per request), under a fresh launch id whose
// records are the supervisor's own (caller: the supervisor).
func (s *Server) buildWarm(ws warmStarter, key warmKey) (warmSandbox, error) {
	t, err := s.warmTemplate(languageOf(key.Runtime))
	if err != nil {
		return nil, err
	}
	if keyOf(t) != key {
		return nil, errors.New("the live settings changed the warm key")
	}
	src, err := runners.WarmSource(key.Runtime)
	if err != nil {
		return nil, err
	}
	t.ExecID, t.Code, t.Kernel, t.Network = newExecID(), src, "warm", api.NetworkNone
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
func warmEligible(sess *Session, d decision) (warmKey, bool) {
	l := d.launch
	if sess != nil || l.SessionWorkspace != "" || d.mode != api.ModeProcess || d.entrypoint != "" ||
		l.Network != api.NetworkNone || l.Probe || l.Kernel != "" || len(l.Env) > 0 {
		return warmKey{}, false
	}
	return keyOf(l), true
}

// runWarm runs d in a warm sandbox if the pool has one for it; ok false
// means launch cold (nothing of d was handed over).
func (s *Server) runWarm(ctx context.Context, sess *Session, d decision) (res *ExecResult, ok bool, err error) {
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
		sb := p.take(key)
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
	counts := p.idleCounts()
	fmt.Fprintln(w, "# HELP sandboxd_warm_pool_idle Warm sandboxes built (bwrap runs the stub) and waiting, by runtime.")
	fmt.Fprintln(w, "# TYPE sandboxd_warm_pool_idle gauge")
	for _, rt := range warmLanguages {
		fmt.Fprintf(w, "sandboxd_warm_pool_idle{runtime=%q} %d\n", rt, counts[rt])
	}
	for _, m := range []struct {
		name, help string
		v          int64
	}{
		{"sandboxd_warm_execs_total", "One-shot execs served by a warm sandbox.", p.taken.Load()},
		{"sandboxd_warm_misses_total", "Eligible one-shot execs that found no warm sandbox and launched cold.", p.missed.Load()},
		{"sandboxd_warm_builds_total", "Warm sandboxes built.", p.built.Load()},
		{"sandboxd_warm_build_failures_total", "Warm sandbox builds that failed.", p.failed.Load()},
		{"sandboxd_warm_destroyed_unused_total", "Warm sandboxes destroyed unused (stale fingerprint, dead, or no longer wanted).", p.stale.Load()},
	} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s %d\n", m.name, m.help, m.name, m.name, m.v)
	}
}

// fingerprintCache recomputes helperFingerprint only when a file it read
// changed: every take asks (on the exec's critical path), and hashing the
// config and the profile there would cost more than the stat calls that
// tell whether they changed. A replaced file (rename) has a new inode, one
// written in place a new mtime or size.
type fingerprintCache struct {
	helperPath, configPath string

	mu    sync.Mutex
	stamp string // the stat of every file the fingerprint read
	paths []string
	fp    string
}

func (c *fingerprintCache) get() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fp != "" && statStamp(c.paths) == c.stamp {
		return c.fp
	}
	paths := []string{c.helperPath, c.configPath}
	if hc, err := config.Load(c.configPath); err == nil {
		paths = append(paths, hc.PayloadProfile, hc.Shim)
	}
	// Stamp first: a change while hashing makes the next take recompute.
	c.paths, c.stamp = paths, statStamp(paths)
	c.fp = helperFingerprint(c.helperPath, c.configPath)
	return c.fp
}

// statStamp is the inode, size and mtime of each path (or its error).
func statStamp(paths []string) string {
	var b strings.Builder
	for _, p := range paths {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			fmt.Fprintf(&b, "%s: %v\n", p, err)
			continue
		}
		fmt.Fprintf(&b, "%s: %d %d %d.%d\n", p, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec)
	}
	return b.String()
}

// helperFingerprint identifies what a launch would attest: the helper
// binary (inode, size, mtime), its config's bytes (binds, runtimes,
// environments and their digests) and the payload profile's bytes.
func helperFingerprint(helperPath, configPath string) string {
	h := sha256.New()
	stamp := func(path string) {
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			fmt.Fprintf(h, "%s: %v\n", path, err)
			return
		}
		fmt.Fprintf(h, "%s: %d %d %d.%d\n", path, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec)
	}
	content := func(path string) {
		b, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintf(h, "%s: %v\n", path, err)
			return
		}
		fmt.Fprintf(h, "%s: %x\n", path, sha256.Sum256(b))
	}
	stamp(helperPath)
	content(configPath)
	if hc, err := config.Load(configPath); err == nil {
		content(hc.PayloadProfile)
		stamp(hc.Shim)
		envs := make([]string, 0, len(hc.Environments))
		for _, e := range hc.Environments {
			envs = append(envs, e.Name+"@"+e.Digest)
		}
		sort.Strings(envs)
		fmt.Fprintln(h, envs)
	}
	return hex.EncodeToString(h.Sum(nil))
}
