package launch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/cgroup"
	"github.com/sandboxd/sandboxd/errdefs"
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
// stop an exec makes the matching check say why. The probe's trail is an
// exec's (accept, decide, prepare, the helper's steps, reap), every record
// marked probe and attributed to by, the peer whose health request ran it.
func (h *HelperLauncher) Probe(ctx context.Context, by Caller) HealthChecks {
	h.probe.mu.Lock()
	defer h.probe.mu.Unlock()
	if time.Since(h.probe.at) < probeTTL && !h.probe.at.IsZero() {
		return h.probe.checks
	}
	c := h.probeOnce(ctx, by)
	h.probe.at, h.probe.checks = time.Now(), c
	return c
}

// probeRequest is the decided request of a health probe: the helper runs
// its fixed probe runtime (/usr/bin/true), no code.
func probeRequest(by Caller) Request {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	req := Request{ExecID: "probe-" + hex.EncodeToString(rnd[:]), Caller: by, Runtime: "probe", Probe: true, Network: "none"}
	req.Limits.TimeoutMS = 10000
	req.Limits.OutputLimitBytes = 4096
	return req
}

func (h *HelperLauncher) probeOnce(ctx context.Context, by Caller) HealthChecks {
	c := HealthChecks{Bwrap: "ok", Userns: "ok", Seccomp: "ok", Helper: "ok", Cgroups: h.cgroupMode(), Disk: "ok"}
	c.Disk = diskCheck(h.cfg.WorkspaceRoot)
	req := probeRequest(by)
	// The supervisor's own steps of an exec, for the probe: accepted (the
	// health request), decided (fixed limits, or refused when cgroups are
	// missing and not allowed to be).
	if err := h.audit(req, audit.Record{Step: audit.StepAccept, OK: true, Facts: &facts.Accept{Method: "GET", Path: "/v1/health"}}); err != nil {
		c.Helper = "not probed: the audit log cannot be written: " + err.Error()
		return c
	}
	if c.Cgroups == cgroup.ModeNone && h.cfg.RequireCgroups {
		reason := "no cgroup subtree was delegated"
		if h.cfg.Cgroups != nil {
			reason = h.cfg.Cgroups.Reason()
		}
		c.Helper = errdefs.New(errdefs.ErrUnavailable, noCgroupsMessage+reason, fixNoCgroups, nil).Error()
		_ = h.audit(req, audit.Record{Step: audit.StepDecide, OK: false, Error: c.Helper})
		return c
	}
	if err := h.audit(req, audit.Record{Step: audit.StepDecide, OK: true, Facts: &facts.Decide{Runtime: req.Runtime, Limits: LimitsFacts(h.AppliedLimits(req.Limits))}}); err != nil {
		c.Helper = "not probed: the audit log cannot be written: " + err.Error()
		return c
	}
	res, hr, err := h.launch(ctx, req)
	switch {
	case err == nil && res.ExitCode != nil && *res.ExitCode == 0:
		return c
	case err == nil:
		c.Bwrap = fmt.Sprintf("probe payload did not exit 0 (exit %v, signal %v): %s", deref(res.ExitCode), deref(res.Signal), strings.TrimSpace(res.Stderr))
	case hr == nil:
		var pe *os.PathError
		if errors.As(err, &pe) && pe.Op == "mkdir" {
			c.Disk = fmt.Sprintf("cannot create a workspace in %s: %v", h.cfg.WorkspaceRoot, pe)
		}
		c.Helper = "not probed: " + err.Error()
	default:
		classifyProbeFailure(&c, hr, err.Error())
	}
	return c
}

// classifyProbeFailure says which check a failed probe launch counts against.
func classifyProbeFailure(c *HealthChecks, hr *helperRun, msg string) {
	step := ""
	for _, r := range hr.reports {
		if !r.OK {
			step = r.Step
		}
	}
	switch {
	case hr.violation != nil:
		c.Helper = msg
	case step == "seccomp":
		c.Seccomp = msg
	case step == "exec" || (step == "" && len(hr.reports) > 0):
		c.Bwrap = msg
	case step == "enter" && strings.Contains(msg, "CLONE_NEWUSER"):
		c.Userns = msg
	default:
		c.Helper = msg
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
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
