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
	// ErrUnavailable: the backend did not answer in time or failed.
	ErrUnavailable error = errdefs.New(errdefs.ErrUnavailable, "the archive store is unavailable", "", nil)
)

// Key names one archive. Build it with KeyFor; Name is never a
// caller-chosen string.
type Key struct {
	Owner int    // uid of the session's owner
	Name  string // hex sha256 of "owner:key"
}

// KeyFor is the archive key of a session key owned by uid owner: the uid
// and the key are hashed together (the scheme local archives have always
// used), so one caller cannot name another's archive.
func KeyFor(owner int, key string) Key {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%d:%s", owner, key)))
	return Key{Owner: owner, Name: hex.EncodeToString(sum[:])}
}

var nameRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Valid reports whether k could have come from KeyFor.
func (k Key) Valid() bool { return k.Owner >= 0 && nameRE.MatchString(k.Name) }

// rel is the key's path below a store's root: u<uid>/<name>.tar, one
// directory per owner so its bytes can be counted and bounded.
func (k Key) rel() string { return "u" + strconv.Itoa(k.Owner) + "/" + k.Name + ".tar" }

// parseRel is the inverse of rel.
func parseRel(rel string) (Key, bool) {
	dir, file, ok := strings.Cut(rel, "/")
	uid, found := strings.CutPrefix(dir, "u")
	name, tar := strings.CutSuffix(file, ".tar")
	if !ok || !found || !tar {
		return Key{}, false
	}
	n, err := strconv.Atoi(uid)
	if err != nil || strconv.Itoa(n) != uid {
		return Key{}, false
	}
	k := Key{Owner: n, Name: name}
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
	// List lists the archives of owner, or of every owner when owner < 0.
	List(ctx context.Context, owner int) ([]Info, error)
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
