package supervisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/archive"
	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/internal/atomicfile"
	"github.com/sandboxd/sandboxd/launch"
	"github.com/sandboxd/sandboxd/policy"
)

// SettingsFileName is where the admin overrides persist, in the sessions
// directory of the state directory: that directory is the service user's
// in every recipe (the state directory itself is root-owned), and the
// session loader reads only *.json there, so it never takes this file for a
// session.
const SettingsFileName = "admin-settings.state"

// liveSettings holds the admin's overrides of the operator's configuration
// and the effective configuration new execs and sessions read. op is the
// operator's configuration: every override stays under its values.
type liveSettings struct {
	op   policy.Config
	def  policy.Config
	path string // "": not persisted (LoadSettings not called)

	mu      sync.Mutex // serialises changes; readers use eff
	ov      policy.Overrides
	arch    archiveSwitch // the archive store of the archive settings
	eff     atomic.Pointer[policy.Config]
	changes atomic.Uint64
}

func newLiveSettings(op policy.Config) *liveSettings {
	l := &liveSettings{op: op, def: policy.Defaults(), ov: policy.Overrides{Ints: map[string]int64{}}}
	eff := op
	l.eff.Store(&eff)
	return l
}

// liveConfig is the configuration in force now: the operator's with the
// admin's overrides. Read it once per request, so one request sees one set.
func (s *Server) liveConfig() policy.Config { return *s.live.eff.Load() }

// LoadSettings reads the overrides persisted in stateDir, re-clamps them
// against the operator's caps (which may have been lowered since) and
// applies them. A missing file means no overrides; an unreadable or
// corrupt one is an error: starting with the operator's looser values
// instead of the admin's tighter ones would silently undo a tightening.
func (s *Server) LoadSettings(stateDir string) error {
	l := s.live
	l.mu.Lock()
	defer l.mu.Unlock()
	l.path = filepath.Join(stateDir, "sessions", SettingsFileName)
	b, err := os.ReadFile(l.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read admin settings: %w", err)
	}
	var ov policy.Overrides
	if err := json.Unmarshal(b, &ov); err != nil {
		return fmt.Errorf("admin settings %s: %w (fix or remove the file)", l.path, err)
	}
	ov, notes := policy.Reclamp(l.op, ov)
	for _, n := range notes {
		s.log.Warn("admin setting re-clamped at start", "change", n)
	}
	eff := policy.Effective(l.op, ov)
	// The admin's archive store is opened now: one that cannot be (the
	// operator removed the S3 credentials) stops the start, as the
	// operator's own would, rather than archiving where the admin did not
	// choose.
	o, changed, err := l.arch.prepare(l.op, eff, s.sessions)
	if err != nil {
		return fmt.Errorf("admin settings %s: %w (reset archive_backend or fix the operator's S3 configuration)", l.path, err)
	}
	l.ov = ov
	if changed {
		l.arch.commit(eff, o, s.sessions)
	}
	s.applyLive(eff)
	s.log.Info("admin settings loaded", "path", l.path, "overrides", ov.Count(), "archive_backend", eff.ArchiveBackend)
	return nil
}

// applyLive makes eff the configuration of new execs and sessions: the
// decide step reads it per request, admission's max takes effect as running
// execs finish, the session store's max and default TTL at the next create.
func (s *Server) applyLive(eff policy.Config) {
	s.live.eff.Store(&eff)
	s.gate.SetMax(eff.MaxConcurrentExecs)
	if s.sessions != nil {
		s.sessions.SetLimits(eff.MaxSessions, eff.SessionShare(), eff.IdleTTLSeconds)
	}
}

func (s *Server) settingsRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET "+api.AdminSettingsPath, s.adminOnly(s.handleSettingsGet))
	mux.HandleFunc("PATCH "+api.AdminSettingsPath, s.adminOnly(s.handleSettingsPatch))
	mux.Handle(api.AdminSettingsPath, methodNotAllowedHandler("GET, HEAD, PATCH"))
}

// isAdmin: root, the supervisor's own uid, --admin-uid, and an API key
// marked admin in the keys file (name:key:admin). Being allowed to use the
// API (--allow-uid/--allow-gid, a plain key) is not enough. A key caller is
// judged by its key alone: its UID is -1, never a uid of the host.
func (s *Server) isAdmin(c launch.Caller) bool {
	if c.Key != "" {
		return c.Admin
	}
	return c.UID >= 0 && (c.UID == 0 || c.UID == s.selfUID || slices.Contains(s.cfg.AdminUIDs, c.UID))
}

func (s *Server) adminOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		caller, err := callerFrom(r.Context())
		if err == nil && s.isAdmin(caller) {
			h(w, r)
			return
		}
		msg := fmt.Sprintf("uid %d is not an admin; the operator can make it one with --admin-uid", caller.UID)
		if caller.Key != "" {
			msg = fmt.Sprintf("API key %q is not an admin; the operator can mark it name:key:admin in the keys file", caller.Key)
		}
		s.auditRefusal(s.record(newExecID(), facts.StepSettingsChange, caller, apiErr(api.CodeForbidden, msg),
			&facts.SettingsChange{Method: r.Method, Path: r.URL.Path}))
		writeError(w, apiErr(api.CodeForbidden, msg))
	}
}

func (s *Server) settingsView() api.Settings {
	s.live.mu.Lock()
	ov := s.live.ov.Clone()
	s.live.mu.Unlock()
	var out api.Settings
	for _, st := range policy.SettingStates(s.live.def, s.live.op, ov) {
		out.Settings = append(out.Settings, api.Setting{Key: st.Key, Value: st.Value, Cap: st.Cap, Source: st.Source, SetBy: st.SetBy})
	}
	// The credentials: only whether the operator's file or environment
	// holds them, never a byte of them (policy.RedactSetting).
	var cred any
	if archive.HasCredentials(s.live.op.S3CredentialsFile) {
		cred = "set"
	}
	out.Settings = append(out.Settings, api.Setting{Key: policy.SettingS3Credentials,
		Value: policy.RedactSetting(policy.SettingS3Credentials, cred), Cap: "operator only", Source: policy.SourceFlag})
	sort.Slice(out.Settings, func(i, j int) bool { return out.Settings[i].Key < out.Settings[j].Key })
	return out
}

func (s *Server) handleSettingsGet(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.settingsView())
}

func (s *Server) handleSettingsPatch(w http.ResponseWriter, r *http.Request) {
	caller, _ := callerFrom(r.Context())
	body, apiE := readBody(w, r, s.cfg.MaxBodyBytes)
	if apiE != nil {
		writeError(w, apiE)
		return
	}
	if err := s.changeSettings(caller, body); err != nil {
		writeError(w, toAPI(err))
		return
	}
	writeJSON(w, http.StatusOK, s.settingsView())
}

// changeSettings validates the patch, persists the new overrides
// atomically, audits the change and only then applies it. A refused patch
// changes nothing; when the audit record cannot be written the old file is
// put back and nothing is applied (no unaudited change).
func (s *Server) changeSettings(caller launch.Caller, body []byte) error {
	l := s.live
	l.mu.Lock()
	defer l.mu.Unlock()
	next, err := policy.ApplyPatch(l.op, l.ov, body, caller.ID())
	if err != nil {
		s.auditRefusal(s.record(newExecID(), facts.StepSettingsChange, caller, toAPI(err), nil))
		return err
	}
	oldEff, newEff := policy.Effective(l.op, l.ov), policy.Effective(l.op, next)
	diff := settingsDiff(l.def, l.op, l.ov, next)
	store, archChanged, err := l.arch.prepare(l.op, newEff, s.sessions)
	if err != nil {
		s.auditRefusal(s.record(newExecID(), facts.StepSettingsChange, caller, toAPI(err), &facts.SettingsChange{Changes: diff}))
		return err
	}
	if err := l.persist(next); err != nil {
		return errdefs.New(errdefs.ErrUnavailable, "the settings cannot be persisted, so nothing was changed", "see the supervisor log", err)
	}
	rec := s.record(newExecID(), facts.StepSettingsChange, caller, nil, &facts.SettingsChange{Changes: diff})
	if err := s.writeAudit(rec); err != nil {
		s.log.Error("audit of a settings change failed; restoring the old settings", "err", err)
		if perr := l.persist(l.ov); perr != nil {
			s.log.Error("restore the old settings file", "err", perr)
		}
		return errdefs.New(errdefs.ErrUnavailable, "the audit log cannot be written, so nothing was changed", "check the audit log's disk space and permissions", err)
	}
	l.ov = next
	l.changes.Add(1)
	if archChanged {
		l.arch.commit(newEff, store, s.sessions)
	}
	s.applyLive(newEff)
	s.log.Info("admin settings changed", "caller", caller.ID(), "changes", diff,
		"exec_timeout_ms", newEff.ExecTimeoutMS, "was", oldEff.ExecTimeoutMS)
	return nil
}

// settingsDiff lists each setting whose effective value or source changed,
// old -> new, redacted by policy.RedactSetting. Keyed by setting name, an
// open set that grows with the settings; old and new are of each setting's
// own type.
func settingsDiff(def, op policy.Config, oldOv, newOv policy.Overrides) map[string]facts.SettingChange {
	before := map[string]policy.SettingState{}
	for _, st := range policy.SettingStates(def, op, oldOv) {
		before[st.Key] = st
	}
	out := map[string]facts.SettingChange{}
	for _, st := range policy.SettingStates(def, op, newOv) {
		if b := before[st.Key]; b != st {
			out[st.Key] = facts.SettingChange{Old: b.Value, New: st.Value, Source: st.Source}
		}
	}
	return out
}

func (l *liveSettings) persist(ov policy.Overrides) error {
	if l.path == "" {
		return nil
	}
	b, err := json.Marshal(ov)
	if err != nil {
		return fmt.Errorf("encode admin settings: %w", err)
	}
	if err := atomicfile.WriteFile(l.path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("persist admin settings: %w", err)
	}
	return nil
}

func (l *liveSettings) writeMetrics(w io.Writer) {
	fmt.Fprintf(w, "# HELP sandboxd_settings_changes_total Admin settings changes applied.\n# TYPE sandboxd_settings_changes_total counter\nsandboxd_settings_changes_total %d\n", l.changes.Load())
}
