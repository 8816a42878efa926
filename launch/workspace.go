package launch

import "github.com/sandboxd/sandboxd/workspace"

// RemoveWorkspace removes dir and everything the payload left in it, by
// descriptors, never following a symlink (workspace.Remove).
func RemoveWorkspace(dir string) error { return workspace.Remove(dir) }
