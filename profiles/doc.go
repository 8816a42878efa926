// Package profiles owns sandboxd's seccomp profiles and the code that loads
// and compiles them.
//
// It holds two profiles, both in the Docker/OCI seccomp JSON format (the
// format of a Kubernetes "Localhost" profile: defaultAction, defaultErrnoRet,
// architectures or archMap, and syscalls[] with names, action, errnoRet, args
// and Docker's includes/excludes conditions):
//
//   - payload.json: the filter bubblewrap applies to the sandboxed payload,
//     Docker's default profile resolved for a process with no capabilities
//     and tightened (namespaces, mounts, ptrace, bpf, keyrings, io_uring, ...
//     answer EPERM; syscalls the profile does not know answer ENOSYS). Its
//     socket list is sandboxd's own, not Docker's: socket and socketpair
//     only for AF_UNIX, AF_INET/AF_INET6 (protocol 0, TCP, UDP) and
//     AF_NETLINK with NETLINK_ROUTE; every other family answers
//     EAFNOSUPPORT and every other protocol EPROTONOSUPPORT, so a payload
//     cannot make the kernel load a protocol module.
//   - kubernetes-worker.json: the Localhost profile for the supervisor's
//     container, Docker's default plus only what nsinit and bubblewrap need
//     to build a sandbox.
//
// Both are generated from github.com/moby/profiles/seccomp by
// internal/gen (go generate) and embedded in the binary; see Embedded.
//
// The package is pure up to Install: Parse validates strictly and resolves a
// profile for the running architecture and for a process with no
// capabilities, BPF compiles it with libseccomp into the cBPF program that
// bubblewrap's --seccomp FD expects, and only Install touches the calling
// process.
//
// What this package must never do: silently weaken a rule. A profile it
// cannot express exactly (an unknown action, operator, architecture or field,
// a notify action without a listener, a flag it cannot honour, conditional
// rules that libseccomp would let an unconditional rule override, a deny rule
// it cannot compile under an allowing default) is an error, never a filter
// that is quietly looser than the file says. The only rules it drops are
// those naming a syscall this libseccomp does not know: allow rules silently
// (the syscall then gets the default action, which is stricter), deny rules
// only when the default action also denies, and then recorded in
// Profile.Skipped for the audit trail. It never sets no_new_privs behind the
// caller's back unless the kernel requires it (see Install).
package profiles

//go:generate go run ./internal/gen -out .
