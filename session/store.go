package session

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/archive"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/internal/atomicfile"
	"github.com/sandboxd/sandboxd/launch"
	"github.com/sandboxd/sandboxd/workspace"
)

// Session is one persistent workspace and its metadata. Execs in a session
// run one at a time; a delete or an idle TTL ends it.
//
// A session belongs to the caller that created it (its identity, Caller.ID:
// a uid or an API key's name): other callers get 404 for it, as if it did
// not exist, except root, the supervisor's own uid (they could read the
// state directory anyway) and API keys marked admin, which see every session.
type Session struct {
	ID       string `json:"id"`
	Key      string `json:"key,omitempty"`
	OwnerUID int    `json:"owner_uid"`
	// Owner is the owner's identity ("uid:N" or "key:<name>"); empty in
	// sessions persisted before API keys existed, which belong to OwnerUID.
	Owner      string    `json:"owner,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	LastUsedAt time.Time `json:"last_used_at"`
	TTLSeconds int64     `json:"ttl_seconds"`
	Restored   bool      `json:"restored"`
	// KernelsRun lists the languages whose kernel has run in this session,
	// persisted so that a restarted supervisor's first exec of one says
	// restarted: true (its kernel died with the old supervisor).
	KernelsRun []string `json:"kernels_run,omitempty"`
	// Network is the session's network mode ("egress"; empty: none); it
	// holds for every exec in the session.
	Network string `json:"network,omitempty"`
	// Environment is the session's default environment (set at create).
	Environment string `json:"environment,omitempty"`

	// Guarded by Store.mu.
	kernels  map[string]Kernel // running kernels by language
	deleting bool
	busy     int // execs and file operations in progress
	// execSlot serialises execs: one token, taken for the whole exec.
	execSlot chan struct{}
	// cancelExec ends the running exec, if any (delete, shutdown).
	cancelExec context.CancelFunc
	drained    chan struct{} // closed when busy drops to 0 while deleting
}

// OwnerID is the session owner's identity ("uid:N" or "key:<name>").
func (s *Session) OwnerID() string { return s.owner() }

// owner is the session owner's identity.
func (s *Session) owner() string {
	if s.Owner != "" {
		return s.Owner
	}
	return launch.Caller{UID: s.OwnerUID}.ID()
}

// WorkspaceName is the session's directory name below the workspace root
// (one path component, as the helper requires).
func (s *Session) WorkspaceName() string { return "s-" + s.ID }

// ExpiresAt is when the session ends if it stays idle.
func (s *Session) ExpiresAt() time.Time {
	return s.LastUsedAt.Add(time.Duration(s.TTLSeconds) * time.Second)
}

// View is the API's session object (package api owns it).
type View = api.Session

// Errors of the session store; their errdefs class decides the API answer
// (supervisor/errors.go).
var (
	ErrNotFound error = errdefs.New(errdefs.ErrNotFound, "no such session", "", nil)
	ErrDeleting error = errdefs.New(errdefs.ErrConflict, "the session is being deleted", "", nil)
	ErrTooMany  error = errdefs.New(errdefs.ErrResourceExhausted, "the maximum number of sessions is reached; delete one or retry later", "", nil)
)

// Config configures a Store.
type Config struct {
	StateDir     string // sessions live in StateDir/sessions, workspaces in StateDir/workspaces
	MaxSessions  int
	MaxPerCaller int   // sessions one uid may hold (I11); 0: no per-caller bound
	TTLDefault   int64 // seconds
	TTLCap       int64
	QuotaBytes   int64
	// Archives stores keyed sessions' workspaces (nil: ArchiveDir, a
	// local store, or none when that is empty too).
	Archives        *archive.Observed
	ArchiveDir      string
	ArchiveMaxBytes int64
	SelfUID         int
	Sink            audit.Sink
	Log             *slog.Logger
	Now             func() time.Time

	// ArchiveRetention expires archives not written or restored for this
	// long; ArchiveCallerMaxBytes bounds one uid's archives (oldest removed
	// first). 0 disables either (I11).
	ArchiveRetention      time.Duration
	ArchiveCallerMaxBytes int64
}

// Store owns the sessions: their metadata (persisted in the state
// directory, so a restarted supervisor recovers them), their workspaces and
// their lifecycle. It never runs anything itself.
type Store struct {
	cfg Config
	mu  sync.Mutex
	// persistMu serialises metadata writes (persist); never taken under mu.
	persistMu sync.Mutex
	sessions  map[string]*Session
	metaDir   string
	wsRoot    string
	// archives is the archive store in force (nil: archives off). An
	// admin switches it live (supervisor/settings.go, archives.go); each create and
	// delete reads it once, so one operation sees one store.
	archives atomic.Pointer[archive.Observed]
	// shareRefused counts creates refused because the caller held its
	// share of the sessions (the caller-share refusal metric).
	shareRefused atomic.Uint64
}

// Open loads every session persisted in the state directory.
// Metadata whose workspace is gone is dropped; a half-written metadata file
// (*.tmp) is never taken for a whole one.
func Open(cfg Config) (*Store, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	st := &Store{cfg: cfg, sessions: map[string]*Session{},
		metaDir: filepath.Join(cfg.StateDir, "sessions"), wsRoot: filepath.Join(cfg.StateDir, "workspaces")}
	st.archives.Store(cfg.Archives)
	if cfg.Archives == nil && cfg.ArchiveDir != "" {
		l, err := archive.OpenLocal(cfg.ArchiveDir)
		if err != nil {
			return nil, err
		}
		st.archives.Store(archive.Observe(l))
	}
	for _, d := range []string{st.metaDir, st.wsRoot} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	ents, err := os.ReadDir(st.metaDir)
	if err != nil {
		return nil, fmt.Errorf("read sessions: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasSuffix(name, ".tmp") {
			_ = os.Remove(filepath.Join(st.metaDir, name))
			continue
		}
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		s, err := st.loadMeta(filepath.Join(st.metaDir, name))
		if err != nil {
			cfg.Log.Error("drop unreadable session metadata", "file", name, "err", err)
			_ = os.Remove(filepath.Join(st.metaDir, name))
			continue
		}
		if fi, err := os.Lstat(st.WorkspaceDir(s)); err != nil || !fi.IsDir() {
			cfg.Log.Error("drop session whose workspace is gone", "session", s.ID)
			_ = os.Remove(filepath.Join(st.metaDir, name))
			continue
		}
		if ws, err := workspace.Open(st.WorkspaceDir(s), cfg.QuotaBytes); err == nil {
			_ = ws.Sweep() // uploads cut short by a crash
			_ = ws.Close()
		}
		st.sessions[s.ID] = s
	}
	return st, nil
}

func (st *Store) loadMeta(path string) (*Session, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s Session
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	if !isHexID(s.ID) || filepath.Base(path) != s.ID+".json" {
		return nil, fmt.Errorf("session id %q does not match its file", s.ID)
	}
	s.execSlot = make(chan struct{}, 1)
	return &s, nil
}

func isHexID(s string) bool {
	if len(s) != 32 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// WorkspaceDir is the host directory of a session's workspace.
func (st *Store) WorkspaceDir(s *Session) string {
	return filepath.Join(st.wsRoot, s.WorkspaceName())
}

// Owns reports whether name (a directory in the workspace root) belongs to
// a live session; the one-shot clean-up at start-up keeps those.
func (st *Store) Owns(name string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	id, ok := strings.CutPrefix(name, "s-")
	if !ok {
		return false
	}
	_, ok = st.sessions[id]
	return ok
}

// persist writes a session's metadata atomically and durably (package
// atomicfile: temp file, fsync, rename, fsync of the directory).
func (st *Store) persist(s *Session) error {
	// One write at a time: every write of a session's metadata goes
	// through the same temporary file, and the state marshalled last must
	// be the one written last.
	st.persistMu.Lock()
	defer st.persistMu.Unlock()
	st.mu.Lock()
	b, err := json.MarshalIndent(s, "", "  ")
	st.mu.Unlock()
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(st.metaDir, s.ID+".json"), b, 0o600); err != nil {
		return fmt.Errorf("write session %s: %w", s.ID, err)
	}
	return nil
}

// audit writes a record of one of the session steps (session.create,
// .restore, .archive, .delete, .archive_removed) under the session's id.
func (st *Store) audit(s *Session, caller launch.Caller, f facts.Facts, err error) {
	if st.cfg.Sink == nil {
		return
	}
	rec := audit.Record{ExecID: s.ID, Step: f.Step(), Source: audit.SourceSupervisor,
		CallerUID: caller.UID, CallerGID: caller.GID, CallerPID: caller.PID, Caller: caller.ID(), OK: err == nil, Facts: f}
	if err != nil {
		rec.Error = err.Error()
	}
	if werr := st.cfg.Sink.Write(rec); werr != nil {
		st.cfg.Log.Error("audit write failed", "session", s.ID, "step", f.Step(), "err", werr)
	}
}

// ClampTTL applies the default and the operator's cap (clamped, as the API
// says, not refused).
func (st *Store) ClampTTL(req *int64) (int64, error) {
	st.mu.Lock() // an admin may change the default live (SetLimits)
	ttl := st.cfg.TTLDefault
	st.mu.Unlock()
	if req != nil {
		ttl = *req
	}
	if ttl < 1 {
		return 0, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("ttl_seconds %d: must be at least 1", ttl), "", nil)
	}
	return min(ttl, st.cfg.TTLCap), nil
}

// Archives is the archive store (nil: archives are off), for the health
// check and the metrics.
func (st *Store) Archives() *archive.Observed { return st.archives.Load() }

// SetArchives makes a the store of the next creates and deletes (nil:
// archives off); an archive or restore under way finishes on its store.
func (st *Store) SetArchives(a *archive.Observed) { st.archives.Store(a) }

// ShareRefused counts the creates refused because the caller held its
// share of the sessions.
func (st *Store) ShareRefused() uint64 { return st.shareRefused.Load() }

// Create makes a session (and its workspace), restoring the key's archive
// when there is one. A restore failure never fails the request.
func (st *Store) Create(caller launch.Caller, ttlReq *int64, key string) (*Session, error) {
	return st.CreateNetwork(caller, ttlReq, key, "")
}

// CreateNetwork is Create with the session's network mode, already decided
// by policy ("" or "none": none).
func (st *Store) CreateNetwork(caller launch.Caller, ttlReq *int64, key, network string) (*Session, error) {
	ttl, err := st.ClampTTL(ttlReq)
	if err != nil {
		return nil, err
	}
	if network == api.NetworkNone {
		network = ""
	}
	now := st.cfg.Now().UTC()
	s := &Session{ID: newID(), Key: key, OwnerUID: caller.UID, Owner: caller.ID(), CreatedAt: now, LastUsedAt: now,
		TTLSeconds: ttl, Network: network, execSlot: make(chan struct{}, 1)}
	st.mu.Lock()
	if len(st.sessions) >= st.cfg.MaxSessions {
		st.mu.Unlock()
		return nil, ErrTooMany
	}
	if n := st.ownedLocked(caller.ID()); st.cfg.MaxPerCaller > 0 && n >= st.cfg.MaxPerCaller {
		st.mu.Unlock()
		st.shareRefused.Add(1)
		// Class ResourceExhausted, as the global cap: 429 with
		// Retry-After; errors.Is(err, ErrTooMany) holds too.
		return nil, errdefs.New(errdefs.ErrResourceExhausted,
			fmt.Sprintf("%s holds %d sessions, its share (--max-sessions-per-caller); delete one or retry later", caller.ID(), n),
			"", ErrTooMany)
	}
	st.sessions[s.ID] = s // reserve the slot
	st.mu.Unlock()
	fail := func(err error) (*Session, error) {
		st.mu.Lock()
		delete(st.sessions, s.ID)
		st.mu.Unlock()
		_ = launch.RemoveWorkspace(st.WorkspaceDir(s))
		return nil, err
	}
	if err := os.Mkdir(st.WorkspaceDir(s), 0o700); err != nil {
		return fail(fmt.Errorf("create workspace: %w", err))
	}
	created := &facts.SessionCreate{SessionID: s.ID, TTLSeconds: ttl, Workspace: st.WorkspaceDir(s)}
	if a := st.Archives(); key != "" && a != nil {
		sum := sha256.Sum256([]byte(key))
		created.KeySHA256 = hex.EncodeToString(sum[:])
		if err := st.restore(a, s, caller); err != nil {
			return fail(err)
		}
	}
	if err := st.persist(s); err != nil {
		return fail(err)
	}
	created.Restored = s.Restored
	st.audit(s, caller, created, nil)
	return s, nil
}

// restore fills s's new workspace from its key's archive, if there is one.
// The archive is verified (size and sha256) before a byte is written, and a
// failed restore leaves the workspace empty: a restore failure never fails
// the request, only a workspace that cannot be made again does.
func (st *Store) restore(a *archive.Observed, s *Session, caller launch.Caller) error {
	// Archives are keyed by the caller's identity (uid:<n> or key:<name>,
	// package archive), the same identity that owns the session: one
	// caller can never restore another's archive, whatever key it names.
	k := archive.KeyFor(caller.ID(), s.Key)
	f := &facts.SessionRestore{SessionID: s.ID, ArchiveObject: archiveObject(a, k)}
	ctx := context.Background() // the store bounds its own calls
	r, err := a.Get(ctx, k)
	if err == nil {
		// Retention counts from the last write or restore: an archive in
		// use does not expire.
		_ = a.Touch(ctx, k)
		f.Bytes, f.SHA256 = &r.Info.Size, r.Info.SHA256
		err = workspace.RestoreFrom(r, st.WorkspaceDir(s), st.cfg.QuotaBytes)
		_ = r.Close()
	}
	switch {
	case archive.IsNotFound(err):
		return nil
	case err != nil:
		st.cfg.Log.Error("restore failed; the session starts empty", "session", s.ID, "backend", a.Backend(), "err", err)
		st.audit(s, caller, f, err)
		_ = launch.RemoveWorkspace(st.WorkspaceDir(s))
		if err := os.Mkdir(st.WorkspaceDir(s), 0o700); err != nil {
			return fmt.Errorf("create workspace: %w", err)
		}
		return nil
	}
	s.Restored = true
	st.audit(s, caller, f, nil)
	return nil
}

// archiveObject names an archive in audit records: the backend's relative
// name (u<uid>/<sha256>.tar), never a credential or endpoint.
func archiveObject(a *archive.Observed, k archive.Key) facts.ArchiveObject {
	return facts.ArchiveObject{Archive: archive.Name(k), Backend: a.Backend()}
}

// archive stores s's workspace under its key (best effort: it never fails
// the delete) and returns the bytes stored (nil when nothing was).
func (st *Store) archive(a *archive.Observed, s *Session, caller launch.Caller) *int64 {
	k := archive.KeyFor(s.owner(), s.Key)
	f := &facts.SessionArchive{SessionID: s.ID, ArchiveObject: archiveObject(a, k)}
	ws, err := workspace.Open(st.WorkspaceDir(s), st.cfg.QuotaBytes)
	var info archive.Info
	if err == nil {
		info, err = a.Put(context.Background(), k, func(w io.Writer) (int64, error) {
			return workspace.ArchiveTo(ws, w, st.cfg.ArchiveMaxBytes)
		})
		_ = ws.Close()
	}
	if err != nil {
		// Never fails the request: the delete goes on.
		maxBytes := st.cfg.ArchiveMaxBytes
		f.MaxBytes = &maxBytes
		st.cfg.Log.Warn("archive skipped", "session", s.ID, "backend", a.Backend(), "err", err)
		st.audit(s, caller, f, err)
		return nil
	}
	st.trimArchives(a, s, caller)
	f.Bytes, f.SHA256 = &info.Size, info.SHA256
	st.audit(s, caller, f, nil)
	return f.Bytes
}

// ownedLocked counts the sessions of the caller who; st.mu is held.
func (st *Store) ownedLocked(who string) int {
	n := 0
	for _, s := range st.sessions {
		if s.owner() == who {
			n++
		}
	}
	return n
}

// visible reports whether caller may see s.
func (st *Store) visible(s *Session, caller launch.Caller) bool {
	// A key caller's UID is -1, so the uid rules never match it.
	return caller.UID == 0 || caller.UID == st.cfg.SelfUID || caller.Admin || caller.ID() == s.owner()
}

// Get returns a session the caller may see.
func (st *Store) Get(id string, caller launch.Caller) (*Session, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	s, ok := st.sessions[id]
	if !ok || !st.visible(s, caller) {
		return nil, ErrNotFound
	}
	return s, nil
}

// View renders a session for the API.
func (st *Store) View(s *Session) View {
	var disk int64
	if ws, err := workspace.Open(st.WorkspaceDir(s), st.cfg.QuotaBytes); err == nil {
		disk, _ = ws.Usage()
		_ = ws.Close()
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	ks := make([]Kernel, 0, len(s.kernels))
	for _, k := range s.kernels {
		ks = append(ks, k)
	}
	v := View{ID: s.ID, Key: s.Key, CreatedAt: s.CreatedAt, ExpiresAt: s.ExpiresAt(), LastUsedAt: s.LastUsedAt,
		TTLSeconds: s.TTLSeconds, Restored: s.Restored, DiskBytes: disk, Busy: s.busy > 0, Kernels: []api.Kernel{}, Network: s.Network, Environment: s.Environment}
	st.mu.Unlock()
	for _, k := range ks {
		if k.Alive() {
			v.Kernels = append(v.Kernels, k.Info())
		}
	}
	sort.Slice(v.Kernels, func(i, j int) bool { return v.Kernels[i].Language < v.Kernels[j].Language })
	st.mu.Lock()
	return v
}

// List returns the sessions the caller may see, oldest first.
func (st *Store) List(caller launch.Caller) []*Session {
	st.mu.Lock()
	defer st.mu.Unlock()
	var out []*Session
	for _, s := range st.sessions {
		if st.visible(s, caller) {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out
}

// Count returns the number of live sessions.
func (st *Store) Count() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.sessions)
}

// Use marks the start of an operation on s (an exec or a file operation).
// It fails once the session is being deleted. done must be called.
func (st *Store) Use(s *Session) (done func(), err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if s.deleting {
		return nil, ErrDeleting
	}
	if _, ok := st.sessions[s.ID]; !ok {
		return nil, ErrNotFound
	}
	s.busy++
	var once sync.Once
	return func() {
		once.Do(func() {
			st.mu.Lock()
			s.busy--
			s.LastUsedAt = st.cfg.Now().UTC()
			deleting, last := s.deleting, s.busy == 0
			if deleting && last && s.drained != nil {
				close(s.drained)
			}
			st.mu.Unlock()
			if !deleting {
				if err := st.persist(s); err != nil {
					st.cfg.Log.Error("persist session", "session", s.ID, "err", err)
				}
			}
		})
	}, nil
}

// BeginExec waits (until wait is done) for the session's exec slot and
// returns a context, derived from parent, that a delete of the session
// cancels.
func (st *Store) BeginExec(wait, parent context.Context, s *Session) (context.Context, func(), error) {
	select {
	case s.execSlot <- struct{}{}:
	case <-wait.Done():
		return nil, nil, wait.Err()
	}
	execCtx, cancel := context.WithCancel(parent)
	st.mu.Lock()
	if s.deleting {
		st.mu.Unlock()
		cancel()
		<-s.execSlot
		return nil, nil, ErrDeleting
	}
	s.cancelExec = cancel
	st.mu.Unlock()
	return execCtx, func() {
		st.mu.Lock()
		s.cancelExec = nil
		st.mu.Unlock()
		cancel()
		<-s.execSlot
	}, nil
}

// Delete ends a session: a running exec is killed, the workspace archived
// when the session has a key and archives are configured, then removed.
// why is "delete" or "ttl".
func (st *Store) Delete(id string, caller launch.Caller, why string) error {
	st.mu.Lock()
	s, ok := st.sessions[id]
	if !ok || !st.visible(s, caller) {
		st.mu.Unlock()
		return ErrNotFound
	}
	if s.deleting {
		st.mu.Unlock()
		return ErrDeleting
	}
	s.deleting = true
	s.drained = make(chan struct{})
	if s.busy == 0 {
		close(s.drained)
	}
	if s.cancelExec != nil {
		s.cancelExec() // I6: a session delete kills every process of its exec
	}
	st.mu.Unlock()
	<-s.drained
	// The kernels write into the workspace: they go before it does.
	st.stopKernels(s)

	deleted := &facts.SessionDelete{SessionID: s.ID, Why: why}
	if a := st.Archives(); s.Key != "" && a != nil {
		deleted.ArchiveBytes = st.archive(a, s, caller)
	}
	err := launch.RemoveWorkspace(st.WorkspaceDir(s))
	_ = os.Remove(filepath.Join(st.metaDir, s.ID+".json"))
	st.mu.Lock()
	delete(st.sessions, s.ID)
	st.mu.Unlock()
	if err != nil {
		st.audit(s, caller, deleted, err)
		return err
	}
	st.audit(s, caller, deleted, nil)
	return nil
}

// trimArchives keeps the owner's archives within ArchiveCallerMaxBytes,
// oldest removed first, each removal audited.
func (st *Store) trimArchives(a *archive.Observed, s *Session, caller launch.Caller) {
	removed, err := archive.Trim(context.Background(), a, s.owner(), st.cfg.ArchiveCallerMaxBytes)
	for _, r := range removed {
		st.audit(s, caller, &facts.SessionArchiveRemoved{SessionID: s.ID, ArchiveObject: archiveObject(a, r.Key), Bytes: r.Size,
			Why: "caller_budget", Owner: s.owner(), OwnerUID: s.OwnerUID, CallerMaxBytes: st.cfg.ArchiveCallerMaxBytes}, nil)
	}
	if err != nil {
		st.cfg.Log.Error("archive budget", "owner", s.owner(), "err", err)
	}
}

// ExpireArchives removes the archives past ArchiveRetention (at start and
// then periodically, from RunReaper); each removal is audited. It returns
// how many it removed.
func (st *Store) ExpireArchives() int {
	a := st.Archives()
	if a == nil || st.cfg.ArchiveRetention <= 0 {
		return 0
	}
	removed, err := archive.Expire(context.Background(), a, st.cfg.ArchiveRetention, st.cfg.Now())
	for _, r := range removed {
		if st.cfg.Sink == nil {
			break
		}
		rec := audit.Record{ExecID: newID(), Step: facts.StepArchiveExpire, Source: audit.SourceSupervisor, CallerUID: st.cfg.SelfUID, CallerGID: -1,
			CallerPID: os.Getpid(), OK: true, Facts: &facts.ArchiveExpire{ArchiveObject: archiveObject(a, r.Key), Bytes: r.Size,
				LastUsed: r.ModTime.UTC(), RetentionSeconds: int64(st.cfg.ArchiveRetention.Seconds())}}
		if err := st.cfg.Sink.Write(rec); err != nil {
			st.cfg.Log.Error("audit write failed", "step", rec.Step, "err", err)
		}
	}
	if err != nil {
		st.cfg.Log.Error("archive retention", "err", err)
	}
	if len(removed) > 0 {
		st.cfg.Log.Info("expired archives removed", "count", len(removed), "retention", st.cfg.ArchiveRetention)
	}
	return len(removed)
}

// ReapExpired deletes every idle session past its TTL; it returns how many.
func (st *Store) ReapExpired() int {
	now := st.cfg.Now()
	st.mu.Lock()
	var expired []string
	for id, s := range st.sessions {
		if !s.deleting && s.busy == 0 && now.After(s.ExpiresAt()) {
			expired = append(expired, id)
		}
	}
	st.mu.Unlock()
	n := 0
	for _, id := range expired {
		if err := st.Delete(id, launch.Caller{UID: st.cfg.SelfUID, GID: -1, PID: os.Getpid()}, "ttl"); err == nil {
			n++
		}
	}
	return n
}

// archiveExpiryInterval is how often RunReaper expires archives.
const archiveExpiryInterval = time.Hour

// RunReaper deletes expired sessions every interval, and expired archives
// at once and then hourly, until ctx is done.
func (st *Store) RunReaper(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	st.ExpireArchives()
	lastExpiry := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n := st.ReapExpired(); n > 0 {
				st.cfg.Log.Info("idle sessions reaped", "count", n)
			}
			if time.Since(lastExpiry) >= archiveExpiryInterval {
				st.ExpireArchives()
				lastExpiry = time.Now()
			}
		}
	}
}

// CancelAll kills every running session exec (supervisor shutdown).
func (st *Store) CancelAll() {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, s := range st.sessions {
		if s.cancelExec != nil {
			s.cancelExec()
		}
		for _, k := range s.kernels {
			go k.Stop()
		}
	}
}

// KernelOf returns the session's kernel of language and whether one of that
// language ever ran in the session.
func (st *Store) KernelOf(s *Session, language string) (Kernel, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return s.kernels[language], slices.Contains(s.KernelsRun, language)
}

// SetKernel records k as the session's kernel of its language (nil: none)
// and persists that one has run.
func (st *Store) SetKernel(s *Session, language string, k Kernel) {
	st.mu.Lock()
	if s.kernels == nil {
		s.kernels = map[string]Kernel{}
	}
	if k == nil {
		delete(s.kernels, language)
		st.mu.Unlock()
		return
	}
	s.kernels[language] = k
	changed := !slices.Contains(s.KernelsRun, language)
	if changed {
		s.KernelsRun = append(s.KernelsRun, language)
	}
	st.mu.Unlock()
	if changed {
		if err := st.persist(s); err != nil {
			st.cfg.Log.Error("persist session", "session", s.ID, "err", err)
		}
	}
}

// stopKernels kills every kernel of s and waits until each is reaped.
func (st *Store) stopKernels(s *Session) {
	st.mu.Lock()
	ks := s.kernels
	s.kernels = nil
	st.mu.Unlock()
	for _, k := range ks {
		k.Stop()
	}
}

// Kernel is a session's running kernel as the store holds it: the store
// lists, reports and stops kernels; it never runs an exec in one.
type Kernel interface {
	Alive() bool
	Stop()
	Info() api.Kernel
}

// SetEnvironment records a new session's default environment and
// persists it before the session is answered: a supervisor killed before
// the session's first exec must recover it with its environment (the
// metadata Create wrote does not have it yet).
func (st *Store) SetEnvironment(s *Session, name string) error {
	if name == "" {
		return nil
	}
	st.mu.Lock()
	s.Environment = name
	st.mu.Unlock()
	return st.persist(s)
}

// EnvironmentOf reads a session's default environment.
func (st *Store) EnvironmentOf(s *Session) string {
	if st == nil {
		return s.Environment
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return s.Environment
}

// SetLimits changes the store's limits for the sessions created from now
// on: how many in all, how many one caller may hold, the default TTL.
func (st *Store) SetLimits(maxSessions, maxPerCaller int, ttlDefault int64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.cfg.MaxSessions = maxSessions
	st.cfg.MaxPerCaller = maxPerCaller
	st.cfg.TTLDefault = ttlDefault
}

// newID returns 128 random bits in hex: a session id one caller cannot
// guess of another's (a path component of its workspace), or the id of a
// record of the store's own.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error; it crashes instead.
	return hex.EncodeToString(b[:])
}
