// Package launch owns one launch of the privileged helper, sandboxd-nsinit:
// the workspace it runs in, the pipes and fds of the helper contract
// (nsinit/spec), the start on a locked thread (born in its cgroup on v2,
// moved before the release byte on v1), the relay of the helper's step
// reports into the audit trail (checked against the permit sequence
// enter → network → seccomp → drop → exec), the watch of bwrap's status fd,
// supervision (context, timeout, workspace quota) and the teardown that
// leaves no process of the exec behind. It also runs the health probe, a
// real launch of /usr/bin/true, and warm launches (Warm): one-shot
// launches built before their request, handed exactly one exec and never
// reused.
//
// It runs in the unprivileged supervisor and must never hold or ask for a
// capability, never run a payload outside the helper, never let a launch
// run whose prepare record could not be audited, never return before every
// process of the exec has been reaped, and never know about HTTP: its errors
// are errdefs classes that the API layer maps.
package launch
