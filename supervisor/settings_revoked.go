package supervisor

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/launch"
	"github.com/sandboxd/sandboxd/policy"
)

// Triggers of AuditRevokedSetters.
const (
	RevokedAtStart  = "start"
	RevokedAtSIGHUP = "SIGHUP"
)

// setterIsAdmin reports whether the caller identity setBy (launch.Caller.ID)
// is an admin now: an API key that the keys file in force still holds and
// marks admin, or a uid isAdmin accepts. Anything else is not (fail
// closed: a setter nobody can vouch for has no authority).
func (s *Server) setterIsAdmin(setBy string) bool {
	if name, ok := strings.CutPrefix(setBy, "key:"); ok {
		a := s.auth.Load()
		if a == nil || a.Keys == nil {
			return false
		}
		k, ok := a.Keys.Lookup(name)
		return ok && k.Admin
	}
	if n, ok := strings.CutPrefix(setBy, "uid:"); ok {
		uid, err := strconv.Atoi(n)
		return err == nil && uid >= 0 && s.isAdmin(launch.Caller{UID: uid, GID: -1, PID: -1})
	}
	return false
}

// AuditRevokedSetters writes one settings.setter_revoked record per live
// setting whose setter is no longer an admin (policy.Revoked), and resets
// those that decide where archives go to the operator's values. Call it at
// start, once the keys are loaded, and after each keys reload that
// succeeds. As with an admin change, the records are durable before the
// reset is applied: when they cannot be written, the old settings file is
// put back and nothing changes (the error says so).
func (s *Server) AuditRevokedSetters(trigger string) error {
	l := s.live
	l.mu.Lock()
	defer l.mu.Unlock()
	revoked, next := policy.Revoked(l.op, l.ov, s.setterIsAdmin)
	if len(revoked) == 0 {
		return nil
	}
	newEff := policy.Effective(l.op, next)
	store, archChanged, err := l.arch.prepare(l.op, newEff, s.sessions)
	if err != nil {
		return fmt.Errorf("reset the settings of a revoked admin: %w", err)
	}
	if err := l.persist(next); err != nil {
		return fmt.Errorf("reset the settings of a revoked admin: %w", err)
	}
	for _, r := range revoked {
		rec := audit.Record{Time: time.Now().UTC(), ExecID: newExecID(), Step: facts.StepSettingsSetterRevoked,
			Source: "supervisor", CallerUID: -1, CallerGID: -1, CallerPID: -1, OK: true,
			Facts: &facts.SettingsSetterRevoked{Setting: r.Key, Value: r.Value, SetBy: r.SetBy, Reset: r.Reset, Trigger: trigger}}
		if err := s.writeAudit(rec); err != nil {
			if perr := l.persist(l.ov); perr != nil {
				s.log.Error("restore the old settings file", "err", perr)
			}
			return fmt.Errorf("audit a revoked admin's setting %s: %w (nothing was reset)", r.Key, err)
		}
		s.log.Warn("live setting set by an admin no longer in force", "setting", r.Key, "value", r.Value,
			"set_by", r.SetBy, "reset", r.Reset, "trigger", trigger)
	}
	l.ov = next
	l.changes.Add(1)
	if archChanged {
		l.arch.commit(newEff, store, s.sessions)
	}
	s.applyLive(newEff)
	return nil
}
