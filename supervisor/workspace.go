package supervisor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"
)

// StageFiles writes files into the workspace dir before the payload runs.
// Every path is resolved through os.Root, so neither "..", an absolute path
// nor a symlink can take a write outside dir. It returns the bytes written.
func StageFiles(dir string, files []StagedFile) (int64, error) {
	if len(files) == 0 {
		return 0, nil
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, fmt.Errorf("open workspace %q: %w", dir, err)
	}
	defer root.Close()
	var total int64
	for _, f := range files {
		p := path.Clean(f.Path)
		if p == "." || path.IsAbs(p) {
			return total, fmt.Errorf("stage %q: %w", f.Path, ErrWorkspaceEscape)
		}
		if parent := path.Dir(p); parent != "." {
			if err := root.MkdirAll(parent, 0o700); err != nil {
				return total, fmt.Errorf("stage %q: create parent: %w", f.Path, err)
			}
		}
		// O_NONBLOCK: a FIFO the payload planted must not hang the
		// supervisor; anything but a regular file is refused below.
		w, err := root.OpenFile(p, os.O_WRONLY|os.O_CREATE|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			return total, fmt.Errorf("stage %q: %w", f.Path, err)
		}
		if st, err := w.Stat(); err != nil || !st.Mode().IsRegular() {
			w.Close()
			return total, fmt.Errorf("stage %q: not a regular file", f.Path)
		}
		if err := w.Truncate(0); err != nil {
			w.Close()
			return total, fmt.Errorf("stage %q: %w", f.Path, err)
		}
		n, werr := w.Write(f.Content)
		cerr := w.Close()
		total += int64(n)
		if err := errors.Join(werr, cerr); err != nil {
			return total, fmt.Errorf("stage %q: %w", f.Path, err)
		}
	}
	return total, nil
}

// RemoveWorkspace removes dir and everything the payload left in it. The
// payload runs as the supervisor's uid on the host, so it owns every file,
// but it may have removed write or search permission from directories: those
// are restored before removal. Symlinks are removed, never followed.
func RemoveWorkspace(dir string) error {
	var err error
	for attempt := 0; attempt < 8; attempt++ {
		if err = os.RemoveAll(dir); err == nil {
			return nil
		}
		// Each pass makes one more level of locked directories removable.
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, _ error) error {
			if d != nil && d.IsDir() {
				_ = os.Chmod(p, 0o700)
			}
			return nil
		})
	}
	return fmt.Errorf("remove workspace %q: %w", dir, err)
}
