// The privileged prelude of sandboxd-nsinit. It runs as an ELF constructor,
// before the Go runtime starts any thread, because unshare/clone of a user
// namespace is refused (EINVAL) in a multithreaded process and because
// capabilities are per thread: dropping them here, while the process has one
// thread, drops them for every thread the Go runtime will ever start.
//
// This is the ONLY code in sandboxd that runs with a host capability. In
// order, and nothing else:
//
//   1. close every fd above the helper's fixed set (runc CVE-2024-21626);
//   2. unshare(CLONE_NEWNET)          uses CAP_SYS_ADMIN (always required);
//   3. bring "lo" up in it            uses CAP_NET_ADMIN;
//   4. clone(CLONE_NEWUSER) a holder  uses CAP_SYS_ADMIN only on hosts that
//                                     restrict unprivileged user namespaces;
//   5. drop every capability (effective, permitted, inheritable, ambient).
//
// Everything after step 5 -- writing the holder's uid/gid maps, opening its
// user namespace fd, and all of the Go code -- runs with no capability in the
// initial user namespace. The holder exists only so that this process can
// keep an fd to the new user namespace while itself staying outside it:
// bubblewrap joins that namespace with --userns FD, so no second (nested)
// user namespace is ever created, which hosts that restrict unprivileged
// user namespaces would refuse.
//
// Failures are recorded, never acted on here: the Go side reports them on
// the audit fd and exits with the step's status.

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "prelude.h"

struct sbx_prelude sbx_prelude_result = {.userns_fd = -1};

static void fail(const char *step, const char *what, int err) {
	struct sbx_prelude *r = &sbx_prelude_result;
	if (r->failed_step[0] != 0) return; // keep the first failure
	snprintf(r->failed_step, sizeof r->failed_step, "%s", step);
	snprintf(r->message, sizeof r->message, "%s", what);
	r->err = err;
}

static int write_file(const char *path, const char *data) {
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0) return -1;
	size_t n = strlen(data);
	ssize_t w = write(fd, data, n);
	int saved = errno;
	close(fd);
	errno = saved;
	return w == (ssize_t)n ? 0 : -1;
}

static int drop_all_caps(void) {
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct data[2];
	memset(data, 0, sizeof data);
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL) return -1;
	return (int)syscall(SYS_capset, &hdr, data);
}

static long long now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void lo_up(void) {
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0) { fail("network", "socket for loopback set-up", errno); return; }
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0) { fail("network", "read loopback flags", errno); close(s); return; }
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0) fail("network", "bring loopback up (needs CAP_NET_ADMIN)", errno);
	close(s);
}

static void sbx_prelude_steps(void);

__attribute__((constructor)) static void sbx_prelude(void) {
	sbx_prelude_result.started_ns = now_ns();
	sbx_prelude_steps();
	sbx_prelude_result.finished_ns = now_ns();
}

static void sbx_prelude_steps(void) {
	struct sbx_prelude *r = &sbx_prelude_result;
	r->euid = geteuid();
	r->egid = getegid();

	// Executing a file with capabilities clears the parent-death signal the
	// supervisor set: set it again, so that the helper -- and bwrap, which
	// it becomes -- dies with the supervisor (I6).
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);

	// 1. Only 0-2 (payload stdio) and the fixed helper fds survive.
	if (syscall(SYS_close_range, SBX_LAST_FD + 1, ~0U, 0) < 0) {
		for (int fd = SBX_LAST_FD + 1; fd < 4096; fd++) close(fd);
	}

	// A helper started by root would map the payload onto host root.
	if (r->euid == 0 || r->egid == 0 || getuid() == 0 || getgid() == 0) {
		fail("enter", "refusing to run as uid or gid 0: run the supervisor as its service user", EPERM);
		drop_all_caps();
		return;
	}

	// 2 and 3: a network namespace with nothing but loopback.
	if (unshare(CLONE_NEWNET) < 0) {
		fail("enter", "unshare(CLONE_NEWNET) needs CAP_SYS_ADMIN on the helper binary", errno);
		drop_all_caps();
		return;
	}
	lo_up();

	// 4. The user namespace, held by a child that only waits.
	int ready[2], release[2];
	if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(release, O_CLOEXEC) < 0) {
		fail("enter", "pipe", errno);
		drop_all_caps();
		return;
	}
	pid_t child = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
	if (child == 0) {
		// Holder. Dumpable, so that its /proc files belong to its uid and
		// the (now capability-less) parent may write its maps.
		char c = 'r';
		close(ready[0]);
		close(release[1]);
		prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
		if (write(ready[1], &c, 1) != 1) _exit(1);
		while (read(release[0], &c, 1) < 0 && errno == EINTR) {}
		_exit(0);
	}
	int clone_err = errno;

	// 5. From here on, no capability in the initial user namespace.
	if (drop_all_caps() < 0) fail("drop", "capset to the empty set", errno);
	r->caps_dropped = 1;

	if (child < 0) {
		fail("enter", clone_err == EPERM || clone_err == EACCES
		     ? "clone(CLONE_NEWUSER) refused: the host restricts user namespaces and the helper lacks CAP_SYS_ADMIN"
		     : "clone(CLONE_NEWUSER)", clone_err);
		return;
	}
	r->holder_pid = child;
	close(ready[1]);
	close(release[0]);
	char c;
	ssize_t got;
	while ((got = read(ready[0], &c, 1)) < 0 && errno == EINTR) {}
	close(ready[0]);
	if (got != 1) {
		fail("enter", "user namespace holder died before it was ready", EIO);
	} else {
		char path[64];
		snprintf(r->uid_map, sizeof r->uid_map, "%d %d 1\n", SBX_PAYLOAD_ID, r->euid);
		snprintf(r->gid_map, sizeof r->gid_map, "%d %d 1\n", SBX_PAYLOAD_ID, r->egid);
		snprintf(path, sizeof path, "/proc/%d/setgroups", child);
		if (write_file(path, "deny") < 0) fail("enter", "write setgroups deny", errno);
		snprintf(path, sizeof path, "/proc/%d/uid_map", child);
		if (write_file(path, r->uid_map) < 0) fail("enter", "write uid_map", errno);
		snprintf(path, sizeof path, "/proc/%d/gid_map", child);
		if (write_file(path, r->gid_map) < 0) fail("enter", "write gid_map", errno);
		snprintf(path, sizeof path, "/proc/%d/ns/user", child);
		// Not O_CLOEXEC: bubblewrap inherits it as --userns.
		r->userns_fd = open(path, O_RDONLY);
		if (r->userns_fd < 0) fail("enter", "open the user namespace fd", errno);
	}
	close(release[1]);
	while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {}
}
