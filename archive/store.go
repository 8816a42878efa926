package archive

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
)

// Backend names, as the --archive-backend flag spells them.
const (
	BackendLocal = "local"
	BackendS3    = "s3"
	BackendNone  = "none"
)

// Errors of the stores; errdefs classes decide how callers treat them.
var (
	// ErrNotFound: no archive under the key (a fresh conversation).
	ErrNotFound error = errdefs.New(errdefs.ErrNotFound, "no archive under this key", "", nil)
	// ErrChecksum: the stored bytes do not match the size and sha256
	// recorded when they were written; the archive is never restored.
	ErrChecksum error = errdefs.New(errdefs.ErrInternal, "the archive does not match its recorded size and sha256", "", nil)
	// ErrTooLarge: the stored object is larger than any archive the
	// supervisor may restore (S3Config.MaxBytes); it is never downloaded.
	ErrTooLarge error = errdefs.New(errdefs.ErrInternal, "the stored archive is larger than an archive may be", "", nil)
	// ErrUnavailable: the backend did not answer in time or failed.
	ErrUnavailable error = errdefs.New(errdefs.ErrUnavailable, "the archive store is unavailable", "", nil)
)

// Key names one archive. Build it with KeyFor; Name is never a
// caller-chosen string.
type Key struct {
	// Owner is the caller identity that owns the archive, as
	// policy.Caller.ID spells it: "uid:<n>" for a Unix-socket peer,
	// "key:<name>" for an API key.
	Owner string
	Name  string // hex sha256 of the owner and the session key
}

var (
	nameRE    = regexp.MustCompile(`^[0-9a-f]{64}$`)
	uidRE     = regexp.MustCompile(`^(0|[1-9][0-9]{0,9})$`)
	keyNameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`) // package apikey's names
)

// KeyFor is the archive key of a session key owned by the caller identity
// owner ("uid:<n>" or "key:<name>"). The owner and the key are hashed
// together, so one caller cannot name another's archive.
//
// A uid owner hashes "<n>:<key>", the scheme uid archives have always used,
// so archives written before API-key callers were archived restore
// unchanged. A key owner hashes "key:<name>:<key>": it starts with a letter
// where a uid's starts with a digit, and a key name holds no ':', so no
// (owner, key) pair of one namespace hashes like a pair of the other.
// An owner that is neither gives an invalid Key, which every store refuses.
func KeyFor(owner, key string) Key {
	id := owner
	if uid, ok := strings.CutPrefix(owner, "uid:"); ok {
		id = uid
	}
	sum := sha256.Sum256([]byte(id + ":" + key))
	return Key{Owner: owner, Name: hex.EncodeToString(sum[:])}
}

// UIDOwner is the owner identity of uid n ("uid:<n>").
func UIDOwner(n int) string { return "uid:" + strconv.Itoa(n) }

// ownerDir is the directory of owner's archives below a store's root: one
// per owner, so its bytes can be counted and bounded. "u<n>" for a uid (the
// directory uid archives have always had), "k<name>" for an API key; the
// prefix letter keeps a key named "." or ".." from ever being a path
// element of its own.
func ownerDir(owner string) (string, bool) {
	if uid, ok := strings.CutPrefix(owner, "uid:"); ok && uidRE.MatchString(uid) {
		return "u" + uid, true
	}
	if name, ok := strings.CutPrefix(owner, "key:"); ok && keyNameRE.MatchString(name) {
		return "k" + name, true
	}
	return "", false
}

// ownerOfDir is the inverse of ownerDir.
func ownerOfDir(dir string) (string, bool) {
	var owner string
	switch {
	case strings.HasPrefix(dir, "u"):
		owner = "uid:" + dir[1:]
	case strings.HasPrefix(dir, "k"):
		owner = "key:" + dir[1:]
	default:
		return "", false
	}
	if d, ok := ownerDir(owner); !ok || d != dir {
		return "", false
	}
	return owner, true
}

// Valid reports whether k could have come from KeyFor.
func (k Key) Valid() bool {
	_, ok := ownerDir(k.Owner)
	return ok && nameRE.MatchString(k.Name)
}

// rel is the key's path below a store's root: <owner dir>/<name>.tar.
// Only called on valid keys (and in messages, where an invalid owner shows
// as "?").
func (k Key) rel() string {
	d, ok := ownerDir(k.Owner)
	if !ok {
		d = "?"
	}
	return d + "/" + k.Name + ".tar"
}

// Name is k's name below a store's root (<owner dir>/<sha256>.tar), for
// audit records and logs: it never holds an endpoint or a credential.
func Name(k Key) string { return k.rel() }

// parseRel is the inverse of rel.
func parseRel(rel string) (Key, bool) {
	dir, file, ok := strings.Cut(rel, "/")
	name, tar := strings.CutSuffix(file, ".tar")
	if !ok || !tar {
		return Key{}, false
	}
	owner, ok := ownerOfDir(dir)
	if !ok {
		return Key{}, false
	}
	k := Key{Owner: owner, Name: name}
	return k, k.Valid()
}

// Info describes one stored archive.
type Info struct {
	Key     Key
	Size    int64
	SHA256  string    // hex; "" in List results of backends that do not list it
	ModTime time.Time // last written or restored (retention counts from it)
}

// WriteFunc streams an archive into w and returns how many bytes it wrote
// (workspace.ArchiveTo fits).
type WriteFunc func(w io.Writer) (int64, error)

// Store keeps archives. Every method honours ctx (bounded by the caller).
type Store interface {
	// Backend is "local" or "s3" (the metrics' label).
	Backend() string
	// Put stores what write streams under k, with its size and sha256.
	// On any error (write's included) nothing is stored and an earlier
	// archive under k is left as it was.
	Put(ctx context.Context, k Key, write WriteFunc) (Info, error)
	// Get returns the archive under k after verifying its size and
	// sha256 (ErrChecksum otherwise), or ErrNotFound. The caller closes
	// the Reader.
	Get(ctx context.Context, k Key) (*Reader, error)
	// Touch marks k as used now, for retention (best effort).
	Touch(ctx context.Context, k Key) error
	// Delete removes k; a missing k is not an error.
	Delete(ctx context.Context, k Key) error
	// List lists the archives of owner (a caller identity, as in Key),
	// or of every owner when owner is "".
	List(ctx context.Context, owner string) ([]Info, error)
}

// Reader is a verified archive: Read streams it, Close releases it (and
// removes its spool file, if any).
type Reader struct {
	Info Info
	r    io.Reader
	c    func() error
}

func (r *Reader) Read(p []byte) (int, error) { return r.r.Read(p) }

// Close releases the archive.
func (r *Reader) Close() error { return r.c() }

// hashWriter counts and hashes what passes through it.
type hashWriter struct {
	w io.Writer
	h interface {
		io.Writer
		Sum([]byte) []byte
	}
	n int64
}

func newHashWriter(w io.Writer) *hashWriter { return &hashWriter{w: w, h: sha256.New()} }

func (hw *hashWriter) Write(p []byte) (int, error) {
	n, err := hw.w.Write(p)
	hw.h.Write(p[:n])
	hw.n += int64(n)
	return n, err
}

func (hw *hashWriter) sum() string { return hex.EncodeToString(hw.h.Sum(nil)) }

// hashFile reads f from the start and returns its size and hex sha256.
func hashFile(ctx context.Context, f io.ReadSeeker) (int64, string, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, "", err
	}
	hw := newHashWriter(io.Discard)
	if _, err := io.Copy(hw, ctxReader{ctx, f}); err != nil {
		return 0, "", err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, "", err
	}
	return hw.n, hw.sum(), nil
}

// verify compares what was read with what was recorded.
func verify(k Key, wantSize int64, wantSum string, gotSize int64, gotSum string) error {
	if wantSum == "" {
		return fmt.Errorf("archive %s: no sha256 recorded: %w", k.rel(), ErrChecksum)
	}
	if gotSize != wantSize || gotSum != wantSum {
		return fmt.Errorf("archive %s: read %d bytes sha256 %s, recorded %d bytes sha256 %s: %w",
			k.rel(), gotSize, gotSum, wantSize, wantSum, ErrChecksum)
	}
	return nil
}

// ctxReader stops a long copy once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// IsNotFound reports whether err means no archive exists under the key.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
