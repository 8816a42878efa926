package supervisor

// The archive store in force and its live switch: an
// admin's archive_backend and archive_s3_* settings open a new store for
// the next creates and deletes, without a restart. The store is opened
// before the change is persisted, so a backend that cannot be opened (no
// S3 credentials, a spool directory that cannot be made) refuses the patch
// and changes nothing. Credentials are never part of a setting: the S3
// store reads the operator's file or environment.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"sync"

	"github.com/sandboxd/sandboxd/archive"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/session"
)

// OpenArchiveStore opens the store of cfg's archive backend: nil for none.
// The S3 backend is not contacted here: S3 down makes archives degraded,
// never the supervisor down. Without credentials it fails with
// archive.ErrNoCredentials (errdefs.ErrInvalid).
func OpenArchiveStore(cfg policy.Config) (archive.Store, error) {
	switch cfg.ArchiveBackend {
	case archive.BackendNone:
		return nil, nil
	case archive.BackendS3:
		s3, err := archive.OpenS3(context.Background(), archive.S3Config{
			Endpoint: cfg.S3Endpoint, Bucket: cfg.S3Bucket, Region: cfg.S3Region, Prefix: cfg.S3Prefix,
			VirtualHosted: !cfg.S3PathStyle, CredentialsFile: cfg.S3CredentialsFile,
			SpoolDir: filepath.Join(cfg.ArchiveLocalDir(), "spool"), Timeout: cfg.S3Timeout,
			MaxBytes: cfg.ArchiveRestoreMaxBytes(),
		})
		if err != nil {
			return nil, err
		}
		return s3, nil
	case archive.BackendLocal:
		l, err := archive.OpenLocal(cfg.ArchiveLocalDir())
		if err != nil {
			return nil, err
		}
		return l, nil
	}
	return nil, fmt.Errorf("archive backend %q is not local, s3 or none", cfg.ArchiveBackend)
}

// archiveSwitch remembers every store opened for a set of parameters (a
// switch back reuses it, and a backend's counters continue across its
// stores) and which parameters are in force.
type archiveSwitch struct {
	mu       sync.Mutex
	ready    bool
	cur      policy.ArchiveParams
	byParams map[policy.ArchiveParams]*archive.Observed
	latest   map[string]*archive.Observed // by backend, for the metrics
	open     func(policy.Config) (archive.Store, error)
}

// init records the store the supervisor started with, once.
func (a *archiveSwitch) initLocked(op policy.Config, st *session.Store) {
	if a.ready {
		return
	}
	a.ready = true
	a.byParams = map[policy.ArchiveParams]*archive.Observed{}
	a.latest = map[string]*archive.Observed{}
	if a.open == nil {
		a.open = OpenArchiveStore
	}
	a.cur = policy.ArchiveParamsOf(op)
	if st != nil {
		if o := st.Archives(); o != nil {
			a.byParams[a.cur] = o
			a.latest[o.Backend()] = o
		}
	}
	if a.cur.Backend == archive.BackendNone {
		a.byParams[a.cur] = nil
	}
}

// prepare opens (or finds) the store of eff's archive parameters. changed
// is false when they are those in force. A store that cannot be opened is
// an error the patch answers with: 400 without credentials, 503 otherwise.
func (a *archiveSwitch) prepare(op, eff policy.Config, st *session.Store) (o *archive.Observed, changed bool, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.initLocked(op, st)
	p := policy.ArchiveParamsOf(eff)
	if p == a.cur {
		return nil, false, nil
	}
	if o, ok := a.byParams[p]; ok {
		return o, true, nil
	}
	store, err := a.open(eff)
	switch {
	case errors.Is(err, archive.ErrNoCredentials):
		return nil, false, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("%s %s: %v", policy.SettingArchiveBackend, p.Backend, archive.ErrNoCredentials), "", err)
	case err != nil:
		return nil, false, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("the %s archive store cannot be opened, so nothing was changed", p.Backend), "see the supervisor log", err)
	case store == nil:
		return nil, true, nil
	}
	return archive.ObserveAfter(store, a.latest[store.Backend()]), true, nil
}

// commit puts o (prepared for eff) in force in st.
func (a *archiveSwitch) commit(eff policy.Config, o *archive.Observed, st *session.Store) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := policy.ArchiveParamsOf(eff)
	a.cur = p
	a.byParams[p] = o
	if o != nil {
		a.latest[o.Backend()] = o
	}
	if st != nil {
		st.SetArchives(o)
	}
}

// writeMetrics writes the archive metrics of every backend used since the
// start (counters do not vanish when an admin switches away).
func (a *archiveSwitch) writeMetrics(w io.Writer, st *session.Store) {
	a.mu.Lock()
	var all []*archive.Observed
	if !a.ready {
		if st != nil && st.Archives() != nil {
			all = append(all, st.Archives())
		}
	}
	for _, o := range a.latest {
		all = append(all, o)
	}
	a.mu.Unlock()
	sort.Slice(all, func(i, j int) bool { return all[i].Backend() < all[j].Backend() })
	archive.WriteMetrics(w, all...)
}
