package spec

// Reasons a failing helper report names in facts["reason"], so that the
// supervisor and `sandboxctl doctor` switch on a value, never on message
// text. The prelude's (enum sbx_reason in nsinit/prelude/prelude.h) that
// callers act on are named here; nsinit.PreludeReason names the rest.
const (
	// ReasonUsernsRefused: the host refuses to create the user namespace
	// even with the helper's CAP_SYS_ADMIN (e.g. an LSM or a seccomp filter).
	ReasonUsernsRefused = "userns_refused"
	// ReasonUsernsLimit: user.max_user_namespaces is reached.
	ReasonUsernsLimit = "userns_limit"
	// ReasonRoot: the helper was started as uid or gid 0.
	ReasonRoot = "root"
	// ReasonOwnerFile: the namespace-owner file is missing or not trusted.
	ReasonOwnerFile = "owner_file"
	// ReasonOwnerIDs: the owner file names ids that may not own a namespace.
	ReasonOwnerIDs = "owner_ids"
	// ReasonSupervisorGone: the release pipe hung up before exec.
	ReasonSupervisorGone = "supervisor_gone"
	// ReasonFork: the holder could not be forked (EAGAIN: RLIMIT_NPROC).
	ReasonFork = "fork"
	// ReasonDrop: the prelude could not drop or verify the drop of its
	// capabilities and exited (ExitDrop) before any Go code ran.
	ReasonDrop = "drop"
)
