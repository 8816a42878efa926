// Package session owns the sessions of sandboxd: each one's metadata
// (persisted in the state directory, so a restarted supervisor recovers
// it), its workspace's life cycle, its TTL and reaper, the archive glue of
// a keyed session (restore at create, archive at delete, retention), the
// per-caller share of sessions, and the session's running kernels, which
// it holds only as handles to list, report and stop (Kernel).
//
// It never runs anything itself: no exec, no kernel start, no HTTP. It must
// never hand one caller's session to another (every lookup is by owner),
// never answer a create whose metadata could not be written (a restarted
// supervisor would lose it), and never fail a create for a restore that
// failed (the workspace starts empty, and the audit record says why).
package session
