package launch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// probeTTL is how long a health probe's answer is reused. A probe is a real
// launch (the whole helper and bwrap path, running /usr/bin/true), so a
// monitor polling /v1/health cannot turn it into load.
const probeTTL = 5 * time.Second

type probeCache struct {
	mu     sync.Mutex
	at     time.Time
	checks HealthChecks
}

// Probe runs a real launch of /usr/bin/true through the helper and bwrap and
// maps the outcome onto the health checks. Fail closed: anything that would
// stop an exec makes the matching check say why.
func (h *HelperLauncher) Probe(ctx context.Context) HealthChecks {
	h.probe.mu.Lock()
	defer h.probe.mu.Unlock()
	if time.Since(h.probe.at) < probeTTL && !h.probe.at.IsZero() {
		return h.probe.checks
	}
	c := h.probeOnce(ctx)
	h.probe.at, h.probe.checks = time.Now(), c
	return c
}

func (h *HelperLauncher) probeOnce(ctx context.Context) HealthChecks {
	c := HealthChecks{Bwrap: "ok", Userns: "ok", Seccomp: "ok", Helper: "ok", Cgroups: h.cgroupMode(), Disk: "ok"}
	c.Disk = diskCheck(h.cfg.WorkspaceRoot)
	if c.Cgroups == "none" && h.cfg.RequireCgroups {
		reason := "no cgroup subtree was delegated"
		if h.cfg.Cgroups != nil {
			reason = h.cfg.Cgroups.Reason()
		}
		c.Helper = "cgroups are required (--require-cgroups) but " + reason
		return c
	}

	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	id := "probe-" + hex.EncodeToString(rnd[:])
	dir := filepath.Join(h.cfg.WorkspaceRoot, id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		c.Disk = fmt.Sprintf("cannot create a workspace in %s: %v", h.cfg.WorkspaceRoot, err)
		c.Helper = "not probed: " + c.Disk
		return c
	}
	defer func() { _ = RemoveWorkspace(dir) }()

	req := Request{ExecID: id, Runtime: "probe"}
	req.Limits.TimeoutMS = 10000
	req.Limits.OutputLimitBytes = 4096
	hr, err := h.runHelper(ctx, req, buildSpec(req, id), nil)
	if err != nil {
		c.Helper = err.Error()
		return c
	}
	if hr.bwrapExit != nil && *hr.bwrapExit == 0 {
		return c
	}
	le := h.launchFailure(hr)
	msg := le.Error()
	step := ""
	for _, r := range hr.reports {
		if !r.OK {
			step = r.Step
		}
	}
	switch {
	case hr.bwrapExit != nil:
		c.Bwrap = fmt.Sprintf("probe payload exited %d: %s", *hr.bwrapExit, strings.TrimSpace(hr.stderr.Head(300)))
	case step == "seccomp":
		c.Seccomp = msg
	case step == "exec" || (step == "" && len(hr.reports) > 0):
		c.Bwrap = msg
	case step == "enter" && strings.Contains(msg, "CLONE_NEWUSER"):
		c.Userns = msg
	default:
		c.Helper = msg
	}
	return c
}

// diskCheck says whether the workspace root has room for a workspace.
func diskCheck(root string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		return fmt.Sprintf("statfs %s: %v", root, err)
	}
	free := st.Bavail * uint64(st.Bsize)
	if free < 64<<20 {
		return fmt.Sprintf("only %d MiB free under %s; free disk space", free>>20, root)
	}
	return "ok"
}
