package supervisor

import "github.com/sandboxd/sandboxd/launch"

// RemoveWorkspace removes dir and everything the payload left in it (see
// launch.RemoveWorkspace, which owns the workspaces' life cycle).
func RemoveWorkspace(dir string) error { return launch.RemoveWorkspace(dir) }
