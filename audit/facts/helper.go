package facts

// The helper steps, in the order sandboxd-nsinit runs and reports them. A
// fact that the helper had not observed when a step failed is absent from
// the record (omitzero), never a zero that reads like evidence.

// Enter is the facts of the enter step: the helper validated the spec
// against its own root-owned config and its C prelude made the user
// namespace. A config or spec refusal reports only t_us.
type Enter struct {
	ExecID         string `json:"exec_id" audit:"required" doc:"from the launch spec, after validation"`
	CallerUID      int    `json:"caller_uid" audit:"required" doc:"from the launch spec, after validation"`
	Runtime        string `json:"runtime" audit:"required" doc:"from the launch spec, after validation (probe for a health probe)"`
	Probe          bool   `json:"probe" audit:"required" doc:"a health probe (no payload code)"`
	HelperVersion  string `json:"helper_version" audit:"required" doc:"the helper binary's build version"`
	Config         string `json:"config" audit:"required" doc:"path of the helper config it read (compiled in)"`
	ConfigSHA256   string `json:"config_sha256" audit:"required" doc:"SHA-256 of the helper config it read"`
	EUID           int    `json:"euid" audit:"required" doc:"the helper's effective uid, read by the prelude"`
	EGID           int    `json:"egid" audit:"required" doc:"the helper's effective gid, read by the prelude"`
	UIDMap         string `json:"uid_map" audit:"required" doc:"the map as the prelude wrote it to the holder's /proc/PID/uid_map (1000 <service uid> 1)"`
	GIDMap         string `json:"gid_map" audit:"required" doc:"the map as the prelude wrote it to the holder's /proc/PID/gid_map"`
	Setgroups      string `json:"setgroups" audit:"required" doc:"what the prelude wrote to /proc/PID/setgroups: deny"`
	HolderPID      int    `json:"holder_pid" audit:"required" doc:"the prelude's child that holds the new user namespace"`
	PreludeUS      int64  `json:"prelude_us" audit:"required" doc:"how long the prelude (the only code with a host capability) ran, µs"`
	UsernsInode    uint64 `json:"userns_inode,omitzero" audit:"required" doc:"inode of the new user namespace (stat of /proc/self/fd/<userns fd>)"`
	OwnUsernsInode uint64 `json:"own_userns_inode,omitzero" audit:"required" doc:"inode of the helper's own user namespace (/proc/self/ns/user): the initial one, so the helper holds nothing in the sandbox's"`
	Workspace      string `json:"workspace,omitzero" audit:"required" doc:"the workspace name, opened with openat2 (RESOLVE_BENEATH, RESOLVE_NO_SYMLINKS, RESOLVE_NO_XDEV) below the configured root and owned by the service uid"`
	// The prelude's namespace-owner facts (the a-prelude branch writes them).
	RUID            int    `json:"ruid,omitzero" doc:"the helper's real uid (the supervisor's service user), read by the prelude"`
	RGID            int    `json:"rgid,omitzero" doc:"the helper's real gid, read by the prelude"`
	OwnerUID        int    `json:"owner_uid,omitzero" doc:"the uid that owns the sandbox's user namespace, from the root-owned owner file (-1 when the prelude did not get that far)"`
	OwnerGID        int    `json:"owner_gid,omitzero" doc:"the gid that owns the sandbox's user namespace, likewise"`
	OwnerFile       string `json:"owner_file,omitzero" doc:"the owner file the prelude read"`
	CapsEffectiveUS int64  `json:"caps_effective_us,omitzero" doc:"how long, in total, any capability was effective in the prelude, µs"`
	Reason          string `json:"reason,omitzero" doc:"on a prelude failure: why, one of the prelude's reason names (spec.Reason*)"`
	Timing
}

// Step implements Facts.
func (*Enter) Step() string { return StepEnter }

// Sentences implements Facts.
func (*Enter) Sentences() []Sentence {
	return []Sentence{
		{Text: "The helper {helper_version} (config {config}, sha256 {config_sha256}) ran as euid {euid}, egid {egid} for exec {exec_id} of caller uid {caller_uid} (probe: {probe})."},
		{Text: "Its prelude made the user namespace (inode {userns_inode}; the helper itself stayed in inode {own_userns_inode}) held by pid {holder_pid}, wrote uid_map {uid_map|q}, gid_map {gid_map|q}, setgroups {setgroups}, in {prelude_us} µs."},
		{Text: "It opened the workspace {workspace} beneath its configured root without following symlinks; runtime {runtime}."},
		{Text: "Real uid {ruid}, gid {rgid}; the namespace is owned by uid {owner_uid}, gid {owner_gid} (from {owner_file}); capabilities were effective for {caps_effective_us} µs in all."},
		{Text: "The prelude failed: {reason}."},
	}
}

// Network is the facts of the network step: the payload's network
// namespace has only loopback, up. When the prelude failed to make the
// namespace, the record carries Enter's facts instead.
type Network struct {
	Mode       string   `json:"mode,omitzero" audit:"required" doc:"the network mode: none or egress (both: only lo)"`
	NetnsInode uint64   `json:"netns_inode,omitzero" audit:"required" doc:"/proc/self/ns/net of the helper (made by the prelude's unshare(CLONE_NEWNET))"`
	Links      []string `json:"links,omitzero" audit:"required" doc:"every link, listed over netlink (RTM_GETLINK): must be exactly [\"lo\"]"`
	Addrs      []string `json:"addrs,omitzero" doc:"its addresses over netlink: loopback only"`
	Timing
	// *Enter is set only on a prelude failure at this step (see PreludeFailure).
	*Enter
}

// Step implements Facts.
func (*Network) Step() string { return StepNetwork }

// Sentences implements Facts.
func (n *Network) Sentences() []Sentence {
	return append([]Sentence{
		{Text: "In network namespace inode {netns_inode} (mode {mode}) the links are {links} with addresses {addrs}."},
	}, (*Enter)(nil).Sentences()...)
}

// Seccomp is the facts of the seccomp step: which profile the payload will
// run under, and that it was compiled.
type Seccomp struct {
	Profile         string   `json:"profile" audit:"required" doc:"the profile file (from the helper config, checked root-owned)"`
	ProfileSHA256   string   `json:"profile_sha256,omitzero" audit:"required" doc:"SHA-256 of the profile's bytes: the exec result's policy.profile_sha256"`
	BPFSource       string   `json:"bpf_source,omitzero" audit:"required" doc:"precompiled <cache> (the install-time cache bound to that SHA-256 and arch) or compiled at launch (<why>)"`
	SkippedSyscalls []string `json:"skipped_syscalls,omitzero" doc:"syscalls of the profile this libseccomp does not know (when compiled at launch)"`
	BPFInstructions int      `json:"bpf_instructions,omitzero" audit:"required" doc:"length of the cBPF program handed to bwrap in a sealed memfd"`
	BPFSHA256       string   `json:"bpf_sha256,omitzero" audit:"required" doc:"SHA-256 of that cBPF program"`
	AppliedBy       string   `json:"applied_by,omitzero" audit:"required" doc:"bwrap --seccomp, immediately before it execs the payload"`
	Timing
}

// Step implements Facts.
func (*Seccomp) Step() string { return StepSeccomp }

// Sentences implements Facts.
func (*Seccomp) Sentences() []Sentence {
	return []Sentence{
		{Text: "Payload profile {profile}, sha256 {profile_sha256}: {bpf_instructions} cBPF instructions (bpf sha256 {bpf_sha256}), {bpf_source}; applied by {applied_by}."},
		{Text: "Syscalls of the profile unknown to this kernel/libseccomp: {skipped_syscalls}."},
	}
}

// Drop is the facts of the drop step: the helper holds no capability and has
// no_new_privs before it execs bwrap. When the prelude's drop failed, the
// record carries Enter's facts instead.
type Drop struct {
	Rlimits        map[string]uint64 `json:"rlimits,omitzero" audit:"required" doc:"the rlimits set with setrlimit, hard values (RLIMIT_CORE always 0)"`
	ThreadsChecked int               `json:"threads_checked,omitzero" audit:"required" doc:"every thread of the helper read back with capget(2): none holds a capability"`
	CapInh         string            `json:"cap_inh,omitzero" audit:"required" doc:"the leader's inheritable set read back from /proc/self/status after the drop (hex)"`
	CapPrm         string            `json:"cap_prm,omitzero" audit:"required" doc:"the permitted set, read back likewise"`
	CapEff         string            `json:"cap_eff,omitzero" audit:"required" doc:"the effective set, read back likewise"`
	CapAmb         string            `json:"cap_amb,omitzero" audit:"required" doc:"the ambient set, read back likewise"`
	CapBnd         string            `json:"cap_bnd,omitzero" audit:"required" doc:"the bounding set, read back likewise"`
	NoNewPrivs     int               `json:"no_new_privs,omitzero" audit:"required" doc:"prctl(PR_GET_NO_NEW_PRIVS) after setting it: 1"`
	Timing
	// *Enter is set only on a prelude failure at this step (see PreludeFailure).
	*Enter
}

// Step implements Facts.
func (*Drop) Step() string { return StepDrop }

// Sentences implements Facts.
func (*Drop) Sentences() []Sentence {
	return append([]Sentence{
		{Text: "Read back from /proc/self/status after the drop: CapInh {cap_inh}, CapPrm {cap_prm}, CapEff {cap_eff}, CapAmb {cap_amb}, CapBnd {cap_bnd}; {threads_checked} threads checked with capget."},
		{Text: "no_new_privs reads back {no_new_privs}."},
		{Text: "Rlimits set: {rlimits}."},
	}, (*Enter)(nil).Sentences()...)
}

// Exec is the facts of the exec step: exactly what the helper is about to
// execve. Written immediately before execve(bwrap); a failed execve gives a
// second exec record with ok false.
type Exec struct {
	Argv              []string `json:"argv,omitzero" audit:"required" doc:"the exact argv, built by the helper from its config and the validated spec; options end with --"`
	BwrapEnv          []string `json:"bwrap_env,omitzero" audit:"required" doc:"bwrap's whole environment: the config's fixed base"`
	PayloadEnvNames   []string `json:"payload_env_names,omitzero" doc:"names of the payload's environment (base + request); values never"`
	MountsSHA256      string   `json:"mounts_sha256,omitzero" audit:"required" doc:"SHA-256 of what decides what the payload sees (binds, symlinks, devices, shim, /tmp size, writable mounts): the exec result's policy.mounts_sha256"`
	ProfileSHA256     string   `json:"profile_sha256,omitzero" audit:"required" doc:"as in seccomp: the exec result's policy.profile_sha256"`
	HelperVersion     string   `json:"helper_version,omitzero" audit:"required" doc:"as in enter: the exec result's policy.helper_version"`
	CodeSHA256        string   `json:"code_sha256,omitzero" audit:"required" doc:"SHA-256 of the code the helper put in the sandbox"`
	BwrapUID          int      `json:"bwrap_uid,omitzero" doc:"the uid bwrap is exec'd as (the namespace owner; the a-prelude branch writes it)"`
	BwrapGID          int      `json:"bwrap_gid,omitzero" doc:"the gid bwrap is exec'd as"`
	Reason            string   `json:"reason,omitzero" doc:"on a failure while waiting for the release: why (supervisor_gone)"`
	Environment       string   `json:"environment,omitzero" doc:"the environment bound into the sandbox (helper config), after its tree passed the registration check: the exec result's policy.environment.name"`
	EnvironmentDigest string   `json:"environment_digest,omitzero" doc:"its environment digest (over the tree's registered content digest and its variables): the exec result's policy.environment.digest"`
	EnvironmentError  string   `json:"environment_error,omitzero" doc:"on failure: why the environment was refused (unknown, or its tree changed after registration)"`
	Timing
}

// Step implements Facts.
func (*Exec) Step() string { return StepExec }

// Sentences implements Facts.
func (*Exec) Sentences() []Sentence {
	return []Sentence{
		{Text: "execve bubblewrap with the argv the helper built: {argv|args}"},
		{Text: "bwrap's environment {bwrap_env}; payload env names {payload_env_names}; mounts sha256 {mounts_sha256}; profile sha256 {profile_sha256}; helper {helper_version}; code sha256 {code_sha256}."},
		{Text: "bwrap runs as uid {bwrap_uid}, gid {bwrap_gid}."},
		{Text: "Failed because: {reason}."},
		{Text: "Environment {environment}, digest {environment_digest}, checked against its registered manifest."},
		{Text: "The environment was refused: {environment_error}."},
	}
}

// Attestation is what an exec result is held to, as the helper stated it
// immediately before it exec'd bwrap.
type Attestation struct {
	ProfileSHA256     string
	MountsSHA256      string
	HelperVersion     string
	Environment       string
	EnvironmentDigest string
}

// Attestation returns the policy attestation of the exec step.
func (e *Exec) Attestation() Attestation {
	return Attestation{ProfileSHA256: e.ProfileSHA256, MountsSHA256: e.MountsSHA256, HelperVersion: e.HelperVersion,
		Environment: e.Environment, EnvironmentDigest: e.EnvironmentDigest}
}

// PreludeFailure returns the Enter facts a network or drop record carries
// when the C prelude, not the Go step, failed there; nil otherwise.
func PreludeFailure(f Facts) *Enter {
	switch x := f.(type) {
	case *Network:
		return x.Enter
	case *Drop:
		return x.Enter
	}
	return nil
}
