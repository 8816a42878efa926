#ifndef SANDBOXD_PRELUDE_H
#define SANDBOXD_PRELUDE_H

// The highest fd the helper inherits on purpose (see nsinit/spec: 3 spec,
// 4 report, 5 bwrap status, 6 release). Keep in step with spec.FDRelease.
#define SBX_LAST_FD 6
// The payload's uid and gid inside the sandbox. Keep in step with nsinit.PayloadID.
#define SBX_PAYLOAD_ID 1000

struct sbx_prelude {
	int euid, egid;
	int holder_pid;
	int userns_fd;
	int caps_dropped;
	int err;
	long long started_ns, finished_ns; // CLOCK_MONOTONIC around the prelude
	char failed_step[16];
	char message[160];
	char uid_map[64];
	char gid_map[64];
};

extern struct sbx_prelude sbx_prelude_result;

#endif
