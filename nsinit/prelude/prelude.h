#ifndef SANDBOXD_PRELUDE_H
#define SANDBOXD_PRELUDE_H

// The highest fd the helper inherits on purpose (see nsinit/spec: 3 spec,
// 4 report, 5 bwrap status, 6 release). Keep in step with spec.FDRelease.
#define SBX_LAST_FD 6
#define SBX_FD_REPORT 4
#define SBX_FD_RELEASE 6
// The payload's uid and gid inside the sandbox. Keep in step with nsinit.PayloadID.
#define SBX_PAYLOAD_ID 1000
// The exit status of a prelude that could not verify its own capability
// drop. Keep in step with spec.ExitDrop.
#define SBX_EXIT_DROP 106
// The exit status of a failed enter step. Keep in step with spec.ExitEnter.
#define SBX_EXIT_ENTER 103

// The namespace-owner file: one line "UID:GID\n", root-owned. Its path is
// compiled in (CGO_CFLAGS from the Makefile), never taken from argv or env.
#ifndef SBX_OWNER_PATH
#define SBX_OWNER_PATH "/etc/sandboxd/nsinit.owner"
#endif

// Why the prelude failed. The Go side names each (nsinit.PreludeReason) and
// reports the name in the failing step's facts["reason"], so nothing ever
// matches on message text. Append only: the numbers are an interface.
enum sbx_reason {
	SBX_OK = 0,
	SBX_R_ROOT = 1,             // started as uid or gid 0
	SBX_R_OWNER_FILE = 2,       // owner file missing, not root-owned or malformed
	SBX_R_OWNER_IDS = 3,        // owner ids 0, the caller's, or the payload id
	SBX_R_SUPERVISOR_GONE = 4,  // the release pipe hung up: the supervisor died
	SBX_R_PRCTL = 5,            // a prctl (PDEATHSIG, DUMPABLE) failed
	SBX_R_CAPS = 6,             // raising a capability failed (missing file caps)
	SBX_R_GROUPS = 7,           // setgroups/setresgid failed
	SBX_R_CREDS = 8,            // setresuid failed
	SBX_R_NETNS = 9,            // unshare(CLONE_NEWNET) failed
	SBX_R_LOOPBACK = 10,        // bringing lo up failed
	SBX_R_FORK = 11,            // fork of the holder failed (RLIMIT_NPROC: EAGAIN)
	SBX_R_USERNS_REFUSED = 12,  // unshare(CLONE_NEWUSER) refused (EPERM/EACCES)
	SBX_R_USERNS_LIMIT = 13,    // user.max_user_namespaces reached (ENOSPC)
	SBX_R_USERNS = 14,          // another user namespace failure
	SBX_R_MAPS = 15,            // writing setgroups/uid_map/gid_map failed
	SBX_R_NSFD = 16,            // opening the namespace fd failed
	SBX_R_FDS = 17,             // marking or closing inherited fds failed
	SBX_R_RLIMIT = 18,          // setting RLIMIT_CORE to 0 failed
	SBX_R_KEEPER = 19,          // forking the keeper failed
};

struct sbx_prelude {
	int ruid, rgid;             // the caller: the supervisor's service uid/gid
	int euid, egid;             // as started (file caps never change them)
	int owner_uid, owner_gid;   // the namespace owner, from SBX_OWNER_PATH
	int holder_pid;
	int keeper_pid;             // kills the user namespace's processes when the helper is gone
	int userns_fd;
	int life_fd;                // the keeper's pipe: held, close-on-exec, until the helper exits
	int err;
	int reason;                 // enum sbx_reason
	long long started_ns, finished_ns; // CLOCK_MONOTONIC around the prelude
	long long caps_ns;          // total time any capability was effective
	char failed_step[16];
	char message[512];
	char uid_map[64];
	char gid_map[64];
};

extern struct sbx_prelude sbx_prelude_result;
extern const char sbx_owner_path[];

#endif
