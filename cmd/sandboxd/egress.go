package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/sandboxd/sandboxd/egress"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/supervisor"
)

// setupEgress starts the egress proxy when the operator set an allowlist.
// The TESTONLY switches are read here; a production binary refuses to
// start when one is set (egress.TestOnlyFromEnv).
func setupEgress(srv *supervisor.Server, cfg policy.Config, log *slog.Logger) error {
	testOnly, err := egress.TestOnlyFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	if cfg.EgressAllow == "" {
		return nil
	}
	allow, err := egress.ParseAllowlist(cfg.EgressAllow)
	if err != nil {
		return fmt.Errorf("--egress-allow: %w", err)
	}
	nets, err := egress.ParseAllowNets(cfg.EgressAllowNets)
	if err != nil {
		return fmt.Errorf("--egress-allow-net: %w", err)
	}
	p, err := egress.New(egress.Config{
		Allow: allow, AllowNets: nets, TestOnly: testOnly,
		Limits: egress.Limits{MaxConns: cfg.EgressMaxConns, MaxBytes: cfg.EgressMaxBytes},
	})
	if err != nil {
		return fmt.Errorf("egress: %w", err)
	}
	// The helper config's egress_dir (config.Default: next to workspaces/).
	dir := filepath.Join(cfg.StateDir, "egress")
	if st, err := os.Lstat(dir); err != nil {
		return fmt.Errorf("--egress-allow is set, but %s is not a directory (make install creates it, owned by the service user): %w", dir, err)
	} else if !st.IsDir() {
		return fmt.Errorf("--egress-allow is set, but %s is not a directory (make install creates it, owned by the service user)", dir)
	}
	// Socket directories a killed supervisor left: no exec of this run
	// owns them, and a helper must never bind a stale one.
	if stale, err := os.ReadDir(dir); err == nil {
		for _, e := range stale {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				log.Warn("remove a stale egress socket directory", "path", e.Name(), "err", err)
			}
		}
	}
	srv.SetEgress(p, dir)
	log.Info("egress proxy", "allow", cfg.EgressAllow, "allow_net", cfg.EgressAllowNets, "allow_uids", cfg.EgressAllowUIDs, "testonly", testOnly != nil)
	return nil
}
