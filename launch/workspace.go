package launch

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

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
