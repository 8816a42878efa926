// Command sandboxd is the supervisor: the unprivileged half of sandboxd. It
// serves the JSON API on a Unix socket, enforces limits, writes the audit
// trail, and starts every sandbox through the sandboxd-nsinit helper. It
// refuses to run as root or with any capability (I1).
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/archive"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/cgroup"
	"github.com/sandboxd/sandboxd/e2b"
	"github.com/sandboxd/sandboxd/launch"
	"github.com/sandboxd/sandboxd/nsinit/config"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/session"
	"github.com/sandboxd/sandboxd/supervisor"
	"github.com/sandboxd/sandboxd/workspace"
)

// version is set at build time.
var version = "0.1.0-dev"

func main() { os.Exit(run()) }

func run() int {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	cfg, code, ok := parseConfig()
	if !ok {
		return code
	}
	d := &daemon{cfg: cfg, log: log, workspaces: filepath.Join(cfg.StateDir, "workspaces")}
	defer d.close()
	for _, phase := range []func() error{d.checkHost, d.openAudit, d.recover, d.newLauncher, d.newServer} {
		if err := phase(); err != nil {
			fmt.Fprintln(os.Stderr, "sandboxd:", err)
			return 1
		}
	}
	return d.serve()
}

// parseConfig reads the flags and SANDBOXD_* variables; ok is false when
// the process is to exit with code (help, version, a bad flag).
func parseConfig() (cfg policy.Config, code int, ok bool) {
	fs := flag.NewFlagSet("sandboxd", flag.ContinueOnError)
	showVersion := fs.Bool("version", false, "print the version and exit")
	cfg, err := policy.Load(fs, os.Args[1:], os.Getenv)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return cfg, 0, false
	case err != nil:
		fmt.Fprintln(os.Stderr, "sandboxd:", err)
		return cfg, 2, false
	case *showVersion:
		fmt.Println(version)
		return cfg, 0, false
	}
	return cfg, 0, true
}

// daemon is the supervisor process being started: its start-up phases
// run in order, each building on the last; close undoes them in reverse.
type daemon struct {
	cfg        policy.Config
	log        *slog.Logger
	workspaces string
	closers    []func()

	aw       *audit.FileWriter
	sessions *session.Store
	cg       *cgroup.Manager
	launcher *launch.HelperLauncher
	srv      *supervisor.Server
	trees    []config.Environment
	ln       net.Listener
}

func (d *daemon) onClose(f func()) { d.closers = append(d.closers, f) }

func (d *daemon) close() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
}

// checkHost refuses root and capabilities (I1), becomes a child subreaper
// and checks the helper's config against the state directory.
func (d *daemon) checkHost() error {
	if err := checkUnprivileged(); err != nil {
		return err
	}
	// bwrap exits without reaping the sandbox's pid 1; as a child
	// subreaper the supervisor inherits and reaps it instead of leaving a
	// zombie to a host init that may never reap (as in many containers).
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("become a child subreaper: %w", err)
	}
	return checkHelperConfig(d.cfg, d.workspaces)
}

// openAudit verifies the audit log before it is appended to (a broken one
// is set aside, never extended); execs a killed supervisor left are closed
// with an interrupted record (audit/SCHEMA.md).
func (d *daemon) openAudit() error {
	cfg := d.cfg
	aw, err := audit.Open(cfg.AuditLog(), audit.Options{
		Fsync: cfg.AuditFsync, RotateBytes: cfg.AuditRotateBytes, RetentionFiles: cfg.AuditRetentionFiles, Syslog: cfg.AuditSyslog,
		Version: version, Log: d.log,
		StartFacts: &audit.StartFacts{Socket: cfg.SocketPath, StateDir: cfg.StateDir, Helper: cfg.HelperPath,
			HelperConfig: cfg.HelperConfigPath, AuditEnvValues: cfg.AuditEnvValues},
	})
	if err != nil {
		return err
	}
	d.aw = aw
	d.onClose(func() { _ = aw.Close() })
	if info := aw.Opened(); info.State != "new" {
		d.log.Info("audit log opened", "path", cfg.AuditLog(), "state", info.State, "set_aside", info.SetAside,
			"previous_shutdown", info.PreviousShutdown, "interrupted_execs", len(info.Interrupted))
	}
	return nil
}

// recover brings sessions back with their workspaces and remaining TTL,
// and removes the one-shot workspaces and exec cgroups a killed supervisor
// left (their processes killed).
func (d *daemon) recover() error {
	cfg := d.cfg
	archives, err := openArchives(cfg, d.log)
	if err != nil {
		return err
	}
	d.sessions, err = session.Open(session.Config{
		StateDir: cfg.StateDir, MaxSessions: cfg.MaxSessions, TTLDefault: cfg.IdleTTLSeconds, TTLCap: cfg.IdleTTLCapSeconds,
		QuotaBytes: cfg.WorkspaceQuotaBytes, Archives: archives, ArchiveMaxBytes: cfg.ArchiveMaxBytes,
		SelfUID: os.Getuid(), Sink: d.aw, Log: d.log,
		MaxPerCaller: cfg.SessionShare(), ArchiveRetention: cfg.ArchiveRetention, ArchiveCallerMaxBytes: cfg.ArchiveCallerMaxBytes,
	})
	if err != nil {
		return err
	}
	d.log.Info("sessions recovered", "count", d.sessions.Count())
	if n := removeStaleWorkspaces(d.workspaces, d.sessions, d.log); n > 0 {
		d.log.Warn("removed one-shot workspaces left by an earlier run", "count", n)
	}
	if err := d.setupCgroups(); err != nil {
		return err
	}
	n, err := d.cg.Sweep()
	if n > 0 {
		d.log.Warn("killed and removed exec cgroups left by an earlier run", "count", n)
	}
	if err != nil {
		d.log.Error("exec cgroups left by an earlier run could not be removed", "err", err)
	}
	return nil
}

// setupCgroups is the cgroup phase of start-up: on v2 the supervisor moves
// into a leaf of its delegated cgroup and enables the controllers for the
// exec cgroups (cgroup.Setup); on v1 it finds the delegated directories.
// Fail closed: without a cgroup nothing would enforce memory, pids or CPU
// limits, so the supervisor refuses to start unless the operator said
// --allow-no-cgroups (then it runs degraded, and says so in health).
func (d *daemon) setupCgroups() error {
	d.cg = cgroup.Setup(cgroup.Host{UID: os.Getuid()}, d.cfg.CgroupParent)
	if d.cg.Mode() != cgroup.ModeNone {
		d.log.Info("resource control", "cgroups", d.cg.Mode(), "detail", d.cg.Reason())
		return nil
	}
	if !d.cfg.AllowNoCgroups {
		return fmt.Errorf("refusing to start: memory, pids and CPU limits cannot be enforced, no usable delegated cgroup subtree: %s (or, knowingly, start with --allow-no-cgroups / SANDBOXD_ALLOW_NO_CGROUPS=1: execs then run without those limits)", d.cg.Reason())
	}
	d.log.Warn("running without cgroups (--allow-no-cgroups): memory, pids and CPU limits are not enforced; health is degraded", "cgroups", d.cg.Mode(), "detail", d.cg.Reason())
	return nil
}

// newLauncher builds the launcher (and its pre-started helpers) after the
// sweep, so nothing of this run is mistaken for a leftover.
func (d *daemon) newLauncher() error {
	cfg := d.cfg
	launcher, err := launch.New(launch.Config{
		HelperPath: cfg.HelperPath, WorkspaceRoot: d.workspaces, Sink: d.aw, Log: d.log,
		Cgroups: d.cg, RequireCgroups: !cfg.AllowNoCgroups, QuotaBytes: cfg.WorkspaceQuotaBytes,
		Artifacts:  workspace.ArtifactLimits{MaxFileBytes: cfg.ArtifactMaxFileBytes, MaxFiles: cfg.ArtifactMaxFiles, MaxTotalBytes: cfg.ArtifactMaxTotalBytes},
		HelperPool: cfg.HelperPool,
	})
	if err != nil {
		return err
	}
	d.launcher = launcher
	d.onClose(launcher.Close)
	return nil
}

// newServer opens the socket and builds the API server: environments from
// the helper's root-owned config (never a flag), egress, live settings.
func (d *daemon) newServer() error {
	var err error
	if d.ln, err = supervisor.Listen(d.cfg.SocketPath, d.cfg.SocketGroup); err != nil {
		return err
	}
	envs, trees, err := supervisor.EnvironmentsFromHelperConfig(d.cfg.HelperConfigPath)
	if err != nil {
		d.log.Warn("no environments: the helper config is unreadable (doctor says why)", "err", err)
	}
	d.cfg.Environments, d.trees = envs, trees
	d.srv = supervisor.NewServer(d.cfg, d.launcher, d.launcher, d.aw, d.log, version)
	d.srv.SetSessions(d.sessions)
	if err := setupEgress(d.srv, d.cfg, d.log); err != nil {
		_ = d.ln.Close()
		return err
	}
	if err := d.srv.LoadSettings(d.cfg.StateDir); err != nil {
		_ = d.ln.Close()
		return err
	}
	return nil
}

// serve listens on TCP, starts the reaper, the environment watch and the
// warm pool, and serves until SIGINT or SIGTERM.
func (d *daemon) serve() int {
	cfg, log := d.cfg, d.log
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	d.srv.WatchEnvironments(ctx, d.trees, supervisor.DefaultEnvironmentRecheck)
	tcp, err := listenTCP(ctx, cfg, d.srv, log)
	if err != nil {
		_ = d.ln.Close()
		fmt.Fprintln(os.Stderr, "sandboxd:", err)
		return 1
	}
	// The keys in force are known only now: settings set by a key the file
	// no longer holds as admin are audited and, for archive destinations,
	// reset before the first request.
	if err := d.srv.AuditRevokedSetters(supervisor.RevokedAtStart); err != nil {
		_ = d.ln.Close()
		fmt.Fprintln(os.Stderr, "sandboxd:", err)
		return 1
	}
	go d.sessions.RunReaper(ctx, time.Second)
	// A child subreaper must reap what it adopts: a killed helper's keeper.
	go launch.ReapAdopted(ctx, time.Second, log)
	// Built after the sweeps, so a warm sandbox of an earlier run (its
	// cgroup, its workspace) is never mistaken for one of this run.
	stopWarm := d.srv.StartWarmPool(ctx)
	defer stopWarm()
	log.Info("sandboxd serving", "version", version, "socket", cfg.SocketPath, "tcp", cfg.Listen, "uid", os.Getuid(),
		"helper", cfg.HelperPath, "state_dir", cfg.StateDir, "audit_log", cfg.AuditLog())
	if err := d.srv.Serve(ctx, d.ln, tcp...); err != nil {
		log.Error("serve", "err", err)
		return 1
	}
	log.Info("sandboxd stopped")
	return 0
}

// listenTCP opens the --listen addresses: it loads the API keys (the
// configuration has already refused TCP without keys unless --allow-no-auth
// on loopback) and the TLS certificate and client CA. SIGHUP reloads the
// keys file and the certificate until ctx ends; a reload that fails keeps
// what was loaded before.
func listenTCP(ctx context.Context, cfg policy.Config, srv *supervisor.Server, log *slog.Logger) ([]net.Listener, error) {
	if len(cfg.Listen) == 0 && cfg.E2BListen == "" {
		return nil, nil
	}
	if cfg.APIKeysFile == "" {
		srv.SetAuth(supervisor.Auth{})
	} else if err := srv.LoadKeys(cfg.APIKeysFile); err != nil {
		return nil, err
	}
	if cfg.APIKeysFile == "" {
		log.Warn("TCP listeners without authentication (--allow-no-auth, loopback only): every local process is the caller key:anonymous")
	}
	var tlsConf *tls.Config
	var certs *supervisor.CertReloader
	if cfg.TLSCert != "" {
		var err error
		if certs, err = supervisor.NewCertReloader(cfg.TLSCert, cfg.TLSKey); err != nil {
			return nil, err
		}
		if tlsConf, err = supervisor.TLSConfig(certs, cfg.TLSClientCA); err != nil {
			return nil, err
		}
	} else {
		log.Warn("TCP listeners without TLS: API keys travel in clear text; set --tls-cert and --tls-key unless a TLS proxy fronts sandboxd")
	}
	lns, err := supervisor.ListenTCP(cfg.Listen, tlsConf)
	if err != nil {
		return nil, err
	}
	if lns, err = listenE2B(cfg, srv, tlsConf, lns, log); err != nil {
		return nil, err
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
			}
			if cfg.APIKeysFile != "" {
				// A failure is logged, audited and shown in health there.
				if srv.ReloadKeys(cfg.APIKeysFile) == nil {
					auditRevokedSetters(srv, supervisor.RevokedAtSIGHUP, log)
				}
			}
			if certs == nil {
				continue
			}
			if err := certs.Reload(); err != nil {
				log.Error("SIGHUP: TLS certificate not reloaded; the old one stays", "err", err)
				continue
			}
			log.Info("SIGHUP: TLS certificate reloaded", "cert", cfg.TLSCert)
		}
	}()
	return lns, nil
}

// auditRevokedSetters runs Server.AuditRevokedSetters after a keys reload;
// a failure leaves the settings as they were, so it is logged as an error.
func auditRevokedSetters(srv *supervisor.Server, trigger string, log *slog.Logger) {
	if err := srv.AuditRevokedSetters(trigger); err != nil {
		log.Error("settings of a revoked admin not audited or reset; they stay", "err", err)
	}
}

// listenE2B opens --e2b-listen, with the TLS of --listen, and mounts the
// E2B-compatible endpoint on it in front of the API (docs/E2B.md).
func listenE2B(cfg policy.Config, srv *supervisor.Server, tlsConf *tls.Config, lns []net.Listener, log *slog.Logger) ([]net.Listener, error) {
	if cfg.E2BListen == "" {
		return lns, nil
	}
	e, err := supervisor.ListenTCP([]string{"tcp://" + cfg.E2BListen}, tlsConf)
	if err != nil {
		for _, l := range lns {
			_ = l.Close()
		}
		return nil, fmt.Errorf("e2b-listen: %w", err)
	}
	srv.Mount(e[0], e2b.New(srv.Handler(), log.With("component", "e2b")))
	log.Info("E2B-compatible endpoint", "addr", e[0].Addr().String())
	return append(lns, e[0]), nil
}

// checkUnprivileged enforces I1: no root, no capability. The supervisor
// talks to every caller; if it were compromised it must hold nothing worth
// taking. (It cannot confine itself with seccomp or no_new_privs: the helper
// it execs would inherit the filter, and no_new_privs would switch off the
// helper's file capabilities.)
func checkUnprivileged() error {
	if os.Getuid() == 0 || os.Geteuid() == 0 || os.Getgid() == 0 || os.Getegid() == 0 {
		return errors.New("refusing to run as root (uid or gid 0): run sandboxd as its service user, e.g. `make run` or the systemd unit in deploy/")
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return fmt.Errorf("read own capabilities: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch k {
		case "CapEff", "CapPrm", "CapInh", "CapAmb":
			if strings.Trim(strings.TrimSpace(v), "0") != "" {
				return fmt.Errorf("refusing to run with capabilities (%s = %s): start sandboxd with none; only the helper carries file capabilities", k, strings.TrimSpace(v))
			}
		}
	}
	return nil
}

// checkHelperConfig fails early when the helper would refuse every launch:
// its config names another workspace root, or caps a limit below what this
// supervisor would ask for. An unreadable config is left to the health check
// (the helper reads it, not the supervisor).
func checkHelperConfig(cfg policy.Config, workspaces string) error {
	path := cfg.HelperConfigPath
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	hc, err := config.Parse(raw)
	if err != nil {
		return nil
	}
	if filepath.Clean(hc.WorkspaceRoot) != filepath.Clean(workspaces) {
		return fmt.Errorf("the helper config %s has workspace_root %q but this supervisor's is %q: run `make install` with the same SANDBOXD_STATE_DIR, or start sandboxd with --state-dir %s",
			path, hc.WorkspaceRoot, workspaces, filepath.Dir(hc.WorkspaceRoot))
	}
	for _, c := range []struct {
		what, flag string
		want, max  uint64
	}{
		{"/tmp size", "--tmp-size", uint64(cfg.TmpSizeBytes), uint64(hc.TmpSizeMaxBytes)},
		{"RLIMIT_NOFILE", "--nofile", cfg.NoFile, hc.RlimitMax["RLIMIT_NOFILE"]},
		{"RLIMIT_FSIZE", "--workspace-quota", uint64(cfg.WorkspaceQuotaBytes), hc.RlimitMax["RLIMIT_FSIZE"]},
	} {
		if c.want > c.max {
			return fmt.Errorf("%s %s = %d is above the helper's cap %d in %s: lower it, or raise the cap there (as root)", c.flag, c.what, c.want, c.max, path)
		}
	}
	return nil
}

// removeStaleWorkspaces clears one-shot workspaces a killed supervisor left
// (everything in the workspace root that is not a live session's).
func removeStaleWorkspaces(dir string, sessions *session.Store, log *slog.Logger) int {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		if sessions.Owns(e.Name()) {
			continue
		}
		if err := launch.RemoveWorkspace(filepath.Join(dir, e.Name())); err != nil {
			log.Error("remove stale workspace", "dir", e.Name(), "err", err)
			continue
		}
		n++
	}
	return n
}

// openArchives opens the archive store --archive-backend names (nil for
// none). The S3 backend is not contacted here: S3 down at start makes
// archives degraded, never the supervisor down.
func openArchives(cfg policy.Config, log *slog.Logger) (*archive.Observed, error) {
	st, err := supervisor.OpenArchiveStore(cfg)
	switch {
	case err != nil:
		return nil, err
	case st == nil:
		log.Info("archives off (--archive-backend none)")
		return nil, nil
	case cfg.ArchiveBackend == archive.BackendS3:
		log.Info("archives in S3", "endpoint", cfg.S3Endpoint, "bucket", cfg.S3Bucket, "prefix", cfg.S3Prefix, "region", cfg.S3Region, "path_style", cfg.S3PathStyle)
	default:
		log.Info("archives in a local directory", "dir", cfg.ArchiveLocalDir())
	}
	return archive.Observe(st), nil
}
