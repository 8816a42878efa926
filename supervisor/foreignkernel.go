package supervisor

import (
	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/launch"
	"github.com/sandboxd/sandboxd/session"
)

// foreignKernelRefusal refuses an exec in a session's kernel by anyone but
// the session's owner. An admin (root, the service uid, an admin key) may
// reach another caller's session, but its kernel is the owner's
// interpreter: a background thread the owner left running there sees the
// admin's code, can forge its stdout, displays and result, and in an
// egress session its connections are recorded under the admin's exec. A
// process exec starts a fresh interpreter in the same workspace and has
// none of this, so that is what the refusal offers. Nil when allowed.
func foreignKernelRefusal(sess *session.Session, caller launch.Caller, mode string) *APIError {
	if sess == nil || mode != api.ModeKernel || caller.ID() == sess.OwnerID() {
		return nil
	}
	return toAPI(errdefs.New(errdefs.ErrForbidden,
		"an exec by a caller other than the session's owner may not run in the owner's kernel: code the owner left running there would see it and could forge its result",
		`send "mode": "process" to run in a fresh interpreter in the session's workspace`, nil))
}
