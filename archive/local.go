package archive

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Local keeps archives in a directory: <dir>/u<uid>/<name>.tar, and next to
// each its size and sha256 in <name>.tar.sha256. Both are written to
// temporary files, fsynced and renamed (the checksum first), so a crash
// leaves either the old archive, the new one, or a pair whose checksum does
// not match — which Get refuses — never a partial archive taken for whole.
// The temporary names are unique (os.CreateTemp), not internal/atomicfile's
// fixed path+".tmp": two sessions of one owner and key may be archived at
// once, and a fixed name would let one writer rename the other's half-written
// file into place.
type Local struct {
	dir string
	now func() time.Time
}

// OpenLocal opens (creating, 0700) the archive directory dir, which must be
// absolute, and removes the temporary files a crash left in it.
func OpenLocal(dir string) (*Local, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("archive: local directory %q is not absolute", dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("archive: %w", err)
	}
	l := &Local{dir: dir, now: time.Now}
	owners, _ := filepath.Glob(filepath.Join(dir, "*", "*.tmp"))
	for _, p := range owners {
		_ = os.Remove(p)
	}
	return l, nil
}

// Backend is "local".
func (l *Local) Backend() string { return BackendLocal }

func (l *Local) path(k Key) string { return filepath.Join(l.dir, filepath.FromSlash(k.rel())) }

// Put implements Store.
func (l *Local) Put(ctx context.Context, k Key, write WriteFunc) (Info, error) {
	if !k.Valid() {
		return Info{}, fmt.Errorf("archive: bad key %+v", k)
	}
	dst := l.path(k)
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return Info{}, fmt.Errorf("archive: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(dst), k.Name+".*.tmp")
	if err != nil {
		return Info{}, fmt.Errorf("archive: %w", err)
	}
	tmp := f.Name()
	defer func() { _ = os.Remove(tmp) }()
	defer f.Close()
	hw := newHashWriter(f)
	if _, err := write(hw); err != nil {
		return Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return Info{}, fmt.Errorf("archive: put: %w", err)
	}
	if err := f.Sync(); err != nil {
		return Info{}, fmt.Errorf("archive: %w", err)
	}
	info := Info{Key: k, Size: hw.n, SHA256: hw.sum(), ModTime: l.now()}
	if err := writeSumFile(dst+".sha256", info); err != nil {
		return Info{}, err
	}
	if err := os.Rename(tmp, dst); err != nil {
		return Info{}, fmt.Errorf("archive: %w", err)
	}
	syncDir(filepath.Dir(dst))
	return info, nil
}

// writeSumFile records size and sha256 atomically in path.
func writeSumFile(path string, info Info) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	defer func() { _ = os.Remove(f.Name()) }()
	_, err = fmt.Fprintf(f, "%s %d\n", info.SHA256, info.Size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("archive: record checksum: %w", err)
	}
	return nil
}

func readSumFile(path string) (sum string, size int64, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", 0, err
	}
	if _, err := fmt.Sscanf(strings.TrimSpace(string(b)), "%64s %d", &sum, &size); err != nil || !nameRE.MatchString(sum) {
		return "", 0, fmt.Errorf("unreadable checksum file")
	}
	return sum, size, nil
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}

// Get implements Store: the file is hashed through the descriptor that is
// then read, so a rename over it after the check changes nothing.
func (l *Local) Get(ctx context.Context, k Key) (*Reader, error) {
	if !k.Valid() {
		return nil, fmt.Errorf("archive: bad key %+v", k)
	}
	p := l.path(k)
	f, err := os.Open(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("archive %s: %w", k.rel(), ErrNotFound)
		}
		return nil, fmt.Errorf("archive: %w", err)
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, fmt.Errorf("archive %s: not a regular file: %w", k.rel(), ErrChecksum)
	}
	wantSum, wantSize, serr := readSumFile(p + ".sha256")
	n, got, err := hashFile(ctx, f)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("archive: read %s: %w", k.rel(), err)
	}
	if serr != nil {
		wantSum = ""
	}
	if err := verify(k, wantSize, wantSum, n, got); err != nil {
		_ = f.Close()
		return nil, err
	}
	return &Reader{Info: Info{Key: k, Size: n, SHA256: got, ModTime: fi.ModTime()}, r: f, c: f.Close}, nil
}

// Touch implements Store.
func (l *Local) Touch(_ context.Context, k Key) error {
	now := l.now()
	return os.Chtimes(l.path(k), now, now)
}

// Delete implements Store.
func (l *Local) Delete(_ context.Context, k Key) error {
	p := l.path(k)
	var errs []error
	for _, f := range []string{p, p + ".sha256"} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("archive: delete %s: %w", k.rel(), err)
	}
	return nil
}

// List implements Store. Symlinks and anything not named like an archive
// are ignored (never followed, never counted).
func (l *Local) List(_ context.Context, owner string) ([]Info, error) {
	pattern := filepath.Join(l.dir, "*", "*.tar")
	if owner != "" {
		d, ok := ownerDir(owner)
		if !ok {
			return nil, fmt.Errorf("archive: list: bad owner %q", owner)
		}
		pattern = filepath.Join(l.dir, d, "*.tar") // d has no glob metacharacter
	}
	paths, err := filepath.Glob(pattern)
	if err != nil {
		return nil, fmt.Errorf("archive: list: %w", err)
	}
	var out []Info
	for _, p := range paths {
		rel, err := filepath.Rel(l.dir, p)
		if err != nil {
			continue
		}
		k, ok := parseRel(filepath.ToSlash(rel))
		fi, err := os.Lstat(p)
		if !ok || err != nil || !fi.Mode().IsRegular() {
			continue
		}
		sum, _, _ := readSumFile(p + ".sha256")
		out = append(out, Info{Key: k, Size: fi.Size(), SHA256: sum, ModTime: fi.ModTime()})
	}
	return out, nil
}

var _ Store = (*Local)(nil)
