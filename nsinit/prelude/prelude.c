// The privileged prelude of sandboxd-nsinit. It runs as an ELF constructor,
// before the Go runtime starts any thread, because unshare(CLONE_NEWUSER)
// is refused (EINVAL) in a multithreaded process and because capabilities
// are per thread: dropping them here, while the process has one thread,
// drops them for every thread the Go runtime will ever start.
//
// This is the ONLY code in sandboxd that runs with a host capability. The
// helper's file capabilities are permitted only (cap_setgid, cap_setuid,
// cap_net_admin, cap_sys_admin +p): the effective set is empty at exec, and
// each capability is raised just around the one call that needs it
// (sbx_with_cap). Nothing that can block, and no fork/clone, ever runs with
// a capability effective (a clone with CAP_SYS_ADMIN effective is exempt
// from RLIMIT_NPROC; a close of an inherited SO_LINGER socket can block for
// as long as its sender likes). In order:
//
//   0. empty the effective set (a "+ep" install holds nothing effective);
//      RLIMIT_CORE 0, hard limit included, before any credential change
//      or PR_SET_DUMPABLE: nothing of the prelude -- the holder and the
//      keeper included -- ever writes a core, whatever the caller set;
//   1. arm PR_SET_PDEATHSIG; a hung-up release pipe (fd 6) means the
//      supervisor is gone: stop;
//   2. mark every fd above 6 close-on-exec (runc CVE-2024-21626);
//   3. refuse uid/gid 0; read the namespace owner from SBX_OWNER_PATH;
//   4. CAP_SETGID: setgroups(0, NULL), setresgid(caller, owner, owner);
//      CAP_SETUID: setresuid(caller, owner, owner);
//   5. CAP_SYS_ADMIN: unshare(CLONE_NEWNET);
//   6. CAP_NET_ADMIN: SIOCSIFFLAGS to bring "lo" up;
//   7. fork the holder (no capability), every blockable signal blocked for
//      good: it takes the owner's ids as its real ids too (no capability:
//      each is an id it already has), so that the service uid may not
//      signal it (a signal sent before, in that instant, stays pending); it unshares CLONE_NEWUSER
//      as the owner (raising CAP_SYS_ADMIN only if the host refuses
//      unprivileged user namespaces), forks the keeper (below) and waits;
//   8. write its setgroups ("deny"), uid_map (CAP_SETUID) and gid_map
//      (CAP_SETGID): inside 1000 -> the caller's uid/gid, so the payload's
//      files stay the supervisor's; open its ns/user fd; release it, a
//      child subreaper meanwhile so that the keeper becomes our child;
//   9. setresuid(caller, caller, owner): the Go part keeps the caller's
//      euid to open the workspace; it switches to the owner before exec;
//  10. drop every capability (ambient, then capset to empty) and verify it
//      with capget: on any doubt, _exit(SBX_EXIT_DROP) right here;
//  11. close every fd above 6, now that nothing is held;
//  12. re-arm PDEATHSIG (the kernel clears it on every credential change)
//      and look at the release pipe again.
//
// A failing step is recorded (failed_step, reason, message, errno) and the
// remaining steps skipped, but the drop (10) always runs, and the Go side
// checks the outcome before it parses anything.
//
// Why the keeper: a helper killed while bwrap sets up (SIGKILL: by the
// supervisor, the OOM killer, an operator) used to leave bwrap's sandbox
// child -- which arms its own parent-death signal only late -- orphaned
// and blocked for good as the owner, a uid the service uid may not signal.
// The keeper is a process of the sandbox's user namespace with every uid
// the owner's (the service uid may not signal it) and only CAP_KILL and
// CAP_SYS_PTRACE in that namespace. It waits for EOF on the "life" pipe,
// whose only write end the helper holds (close-on-exec) until it exits,
// however it exits; then it SIGKILLs every process of the namespace --
// bwrap, its set-up child, the sandbox's pid 1 and so the whole sandbox --
// and exits -- unless the helper wrote the one "clean end" byte first
// (keeper.h): bwrap exited on its own and no live process of the owner is
// left, so there is nothing to scan for. A pipe that ends with no byte at
// all is a helper that died: the keeper waits until it is gone before it
// scans, since a bwrap joining the namespace at that very moment is
// reached by neither the scan nor its parent-death signal otherwise. (A pid namespace for bwrap to join would be simpler, but
// bwrap's --pidns passes pids with SCM_CREDENTIALS, which fails while the
// owner is not mapped in the namespace, and mapping it is not wanted.)
//
// The service uid may stop this process (SIGSTOP) at any point of the
// prelude: its real uid is the caller's, as the supervisor must be able to
// kill it. A stopped prelude holds permitted capabilities but uses none
// (nothing runs), cannot be ptraced (its uids differ), and nothing
// privileged waits on it: the holder and the keeper, which the service uid
// may not signal, wait on pipes and exit when this process dies. How long
// it may stay stopped is bounded by the supervisor's launch deadline,
// which kills it; a supervisor that never does holds up only its own
// launch, charged to its own RLIMIT_NPROC.

#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/close_range.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "keeper.h"
#include "owner.h"
#include "prelude.h"

struct sbx_prelude sbx_prelude_result = {.userns_fd = -1, .life_fd = -1, .owner_uid = -1, .owner_gid = -1};
const char sbx_owner_path[] = SBX_OWNER_PATH;

#define SBX_NO_CAP (-1)

static long long now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void fail(const char *step, int reason, const char *what, int err) {
	struct sbx_prelude *r = &sbx_prelude_result;
	if (r->failed_step[0] != 0) return; // keep the first failure
	snprintf(r->failed_step, sizeof r->failed_step, "%s", step);
	snprintf(r->message, sizeof r->message, "%s", what);
	r->err = err;
	r->reason = reason;
}

static int failed(void) { return sbx_prelude_result.failed_step[0] != 0; }

// stop ends the process from the prelude, for failures after which the Go
// runtime cannot be trusted or cannot start: a drop that did not happen or
// cannot be verified (as bubblewrap dies on a failed capset), and a fork
// refused by RLIMIT_NPROC (the Go runtime's own threads would be refused
// too). It writes the one report line the supervisor expects (constant
// text: no escaping needed) and exits with the step's status.
static void stop(const char *step, const char *reason, const char *what, int err, const char *fix, int status) {
	char line[512];
	int n = snprintf(line, sizeof line,
	                 "{\"step\":\"%s\",\"ok\":false,\"error\":\"prelude: %s: %s (errno %d)\",\"fix\":\"%s\",\"facts\":{\"reason\":\"%s\"}}\n",
	                 step, what, strerror(err), err, fix, reason);
	if (n > 0 && n < (int)sizeof line && write(SBX_FD_REPORT, line, (size_t)n) < 0) {
		// nothing more to do: the exit status says it
	}
	_exit(status);
}

static void fatal(const char *what, int err) {
	stop("drop", "drop", what, err, "", SBX_EXIT_DROP);
}

// set_effective makes cap (or nothing, SBX_NO_CAP) the whole effective set,
// leaving permitted and inheritable as they are.
static int set_effective(int cap) {
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct data[2];
	memset(data, 0, sizeof data);
	if (syscall(SYS_capget, &hdr, data) < 0) return -1;
	data[0].effective = data[1].effective = 0;
	if (cap != SBX_NO_CAP) data[cap / 32].effective = 1u << (cap % 32);
	return (int)syscall(SYS_capset, &hdr, data);
}

static long long raised_at;

// raise_cap makes cap effective; lower_cap empties the effective set. A
// failure to lower is fatal: the caller would go on with a capability.
static int raise_cap(int cap) {
	if (set_effective(cap) < 0) return -1;
	raised_at = now_ns();
	return 0;
}

static void lower_cap(void) {
	int saved = errno;
	if (set_effective(SBX_NO_CAP) < 0) fatal("lower the effective capability set", errno);
	sbx_prelude_result.caps_ns += now_ns() - raised_at;
	errno = saved;
}

// drop_all clears ambient, then every set, and verifies with capget that
// nothing is left. Any doubt ends the process.
static void drop_all(void) {
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		fatal("clear the ambient capability set", errno);
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct data[2];
	memset(data, 0, sizeof data);
	if (syscall(SYS_capset, &hdr, data) < 0) fatal("capset to the empty set", errno);
	memset(data, 0xff, sizeof data);
	if (syscall(SYS_capget, &hdr, data) < 0) fatal("capget to verify the drop", errno);
	for (int i = 0; i < 2; i++) {
		if (data[i].effective || data[i].permitted || data[i].inheritable)
			fatal("capabilities remain after the drop", EPERM);
	}
	for (int cap = 0; cap <= CAP_LAST_CAP; cap++) {
		int set = prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, cap, 0, 0);
		if (set > 0) fatal("an ambient capability remains after the drop", EPERM);
		if (set < 0 && errno == EINVAL) break; // no ambient sets on this kernel
	}
}

// SBX_KEEP is how many fds above SBX_LAST_FD the prelude may hand on: the
// user namespace and the life pipe (and a spare -1).
#define SBX_KEEP 3

static int kept(int fd, const int keep[SBX_KEEP]) {
	for (int i = 0; i < SBX_KEEP; i++)
		if (keep[i] == fd) return 1;
	return 0;
}

// for_each_fd calls fn on every open fd above SBX_LAST_FD but keep,
// listing /proc/self/fd; without /proc, every number below RLIMIT_NOFILE's
// hard limit (never a fixed bound: an inherited fd can be any number below it).
static int for_each_fd(int (*fn)(int), const int keep[SBX_KEEP]) {
	DIR *d = opendir("/proc/self/fd");
	if (d != NULL) {
		int self = dirfd(d), rc = 0;
		struct dirent *e;
		while ((e = readdir(d)) != NULL) {
			char *end;
			long fd = strtol(e->d_name, &end, 10);
			if (*end != 0 || fd <= SBX_LAST_FD || fd == self || kept((int)fd, keep)) continue;
			if (fn((int)fd) < 0 && errno != EBADF) rc = -1;
		}
		closedir(d);
		return rc;
	}
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0) return -1;
	for (rlim_t fd = SBX_LAST_FD + 1; fd < rl.rlim_max && fd < (rlim_t)1 << 31; fd++)
		if (!kept((int)fd, keep)) fn((int)fd);
	return 0;
}

static int set_cloexec(int fd) { return fcntl(fd, F_SETFD, FD_CLOEXEC); }
static int close_one(int fd) { return close(fd); }

static int cloexec_fds(void) {
	static const int none[SBX_KEEP] = {-1, -1, -1};
	if (syscall(SYS_close_range, SBX_LAST_FD + 1, ~0U, CLOSE_RANGE_CLOEXEC) == 0) return 0;
	return for_each_fd(set_cloexec, none);
}

// close_fds closes every fd above SBX_LAST_FD except those in keep (-1 for
// none): the namespace fds bubblewrap inherits and the life pipe.
static int close_fds(const int keep[SBX_KEEP]) {
	int k[SBX_KEEP], n = 0;
	for (int i = 0; i < SBX_KEEP; i++)
		if (keep[i] > SBX_LAST_FD) k[n++] = keep[i];
	for (int i = 1; i < n; i++) // sort the few kept fds
		for (int j = i; j > 0 && k[j - 1] > k[j]; j--) { int t = k[j]; k[j] = k[j - 1]; k[j - 1] = t; }
	unsigned from = SBX_LAST_FD + 1;
	for (int i = 0; i < n; i++) {
		if ((unsigned)k[i] > from && syscall(SYS_close_range, from, (unsigned)k[i] - 1, 0) < 0)
			return for_each_fd(close_one, keep);
		from = (unsigned)k[i] + 1;
	}
	if (syscall(SYS_close_range, from, ~0U, 0) < 0) return for_each_fd(close_one, keep);
	return 0;
}

// supervisor_gone arms the parent-death signal and checks the release pipe:
// the supervisor keeps its write end open until it reaps the helper, so a
// hang-up without the release byte means it died, possibly before the
// signal was armed. Not a launch (no fd 6): nothing to check.
static int supervisor_gone(void) {
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0) {
		fail("enter", SBX_R_PRCTL, "prctl(PR_SET_PDEATHSIG)", errno);
		return 1;
	}
	struct pollfd p = {.fd = SBX_FD_RELEASE, .events = POLLIN};
	if (poll(&p, 1, 0) < 0) return 0;
	if ((p.revents & POLLHUP) && !(p.revents & POLLIN)) {
		fail("enter", SBX_R_SUPERVISOR_GONE, "the supervisor hung up the release pipe (fd 6): it is gone", EPIPE);
		return 1;
	}
	return 0;
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

// check_owner_path walks SBX_OWNER_PATH up to "/": every component must be
// root-owned, not a symlink and not writable by group or others (a sticky
// root-owned directory above the file is accepted, as config.CheckRootOwned
// does: others cannot rename a root-owned entry in it).
static int check_owner_path(void) {
	char p[sizeof sbx_owner_path];
	memcpy(p, sbx_owner_path, sizeof p);
	if (p[0] != '/') return -1;
	for (int leaf = 1;; leaf = 0) {
		struct stat st;
		if (lstat(p, &st) < 0) return -1;
		if (S_ISLNK(st.st_mode) || st.st_uid != 0) { errno = EPERM; return -1; }
		if ((st.st_mode & 022) && !(!leaf && S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX))) { errno = EPERM; return -1; }
		if (strcmp(p, "/") == 0) return 0;
		char *slash = strrchr(p, '/');
		if (slash == p) p[1] = 0; else *slash = 0;
	}
}

#define OWNER_FIX " (" SBX_OWNER_PATH "): run `make install`, then `sandboxctl doctor`"

// read_owner reads the namespace owner's "UID:GID\n" and checks the ids.
static void read_owner(void) {
	struct sbx_prelude *r = &sbx_prelude_result;
	if (r->ruid == 0 || r->euid == 0 || r->rgid == 0 || r->egid == 0) {
		fail("enter", SBX_R_ROOT, "refusing to run as uid or gid 0: run the supervisor as its service user", EPERM);
		return;
	}
	if (check_owner_path() < 0) {
		fail("enter", SBX_R_OWNER_FILE, "namespace owner file missing, or it or a directory above it is not root-owned or is writable by others" OWNER_FIX, errno);
		return;
	}
	char buf[SBX_OWNER_MAX + 1];
	int fd = open(sbx_owner_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022)) {
		fail("enter", SBX_R_OWNER_FILE, "namespace owner file is not a root-owned regular file writable only by root" OWNER_FIX, fd < 0 ? errno : EPERM);
		if (fd >= 0) close(fd);
		return;
	}
	ssize_t n = read(fd, buf, sizeof buf);
	close(fd);
	unsigned uid, gid;
	if (n < 0 || sbx_parse_owner(buf, (size_t)n, &uid, &gid) < 0) {
		fail("enter", SBX_R_OWNER_FILE, "namespace owner file is not one line UID:GID" OWNER_FIX, EINVAL);
		return;
	}
	if (!sbx_owner_ids_ok(uid, gid, (unsigned)r->ruid, (unsigned)r->rgid, (unsigned)r->euid, (unsigned)r->egid, SBX_PAYLOAD_ID)) {
		fail("enter", SBX_R_OWNER_IDS, "namespace owner ids are 0, the caller's own or the payload's (1000)" OWNER_FIX, EINVAL);
		return;
	}
	r->owner_uid = (int)uid;
	r->owner_gid = (int)gid;
}

// switch_creds drops the supplementary groups (bwrap cannot once setgroups
// is denied in the namespace) and makes the owner the effective and saved
// ids, the caller staying the real ones: RLIMIT_NPROC counts the caller's
// processes, the supervisor may still signal and move this process, but
// it may not ptrace it (the kernel wants all three uids to match).
static void switch_creds(void) {
	struct sbx_prelude *r = &sbx_prelude_result;
	if (raise_cap(CAP_SETGID) < 0) {
		fail("enter", SBX_R_CAPS, "raise CAP_SETGID (the helper's file capabilities are missing)", errno);
		return;
	}
	int rc = setgroups(0, NULL);
	int err = errno;
	if (rc == 0) {
		rc = setresgid((gid_t)r->rgid, (gid_t)r->owner_gid, (gid_t)r->owner_gid);
		err = errno;
	}
	lower_cap();
	if (rc < 0) {
		fail("enter", SBX_R_GROUPS, "setgroups(0)/setresgid to the namespace owner's gid", err);
		return;
	}
	if (raise_cap(CAP_SETUID) < 0) {
		fail("enter", SBX_R_CAPS, "raise CAP_SETUID (the helper's file capabilities are missing)", errno);
		return;
	}
	rc = setresuid((uid_t)r->ruid, (uid_t)r->owner_uid, (uid_t)r->owner_uid);
	err = errno;
	lower_cap();
	if (rc < 0) {
		fail("enter", SBX_R_CREDS, "setresuid to the namespace owner", err);
		return;
	}
	supervisor_gone(); // the credential change cleared PDEATHSIG
}

// make_netns makes the network namespace (CAP_SYS_ADMIN, always needed: a
// network namespace owned by the initial user namespace) and brings lo up
// in it (only SIOCSIFFLAGS needs CAP_NET_ADMIN).
static void make_netns(void) {
	if (raise_cap(CAP_SYS_ADMIN) < 0) {
		fail("enter", SBX_R_CAPS, "raise CAP_SYS_ADMIN (the helper's file capabilities are missing)", errno);
		return;
	}
	int rc = unshare(CLONE_NEWNET);
	int err = errno;
	lower_cap();
	if (rc < 0) {
		fail("enter", SBX_R_NETNS, "unshare(CLONE_NEWNET)", err);
		return;
	}
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
	if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0) {
		fail("network", SBX_R_LOOPBACK, "read loopback flags", errno);
		if (s >= 0) close(s);
		return;
	}
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (raise_cap(CAP_NET_ADMIN) < 0) {
		fail("network", SBX_R_CAPS, "raise CAP_NET_ADMIN (the helper's file capabilities are missing)", errno);
		close(s);
		return;
	}
	rc = ioctl(s, SIOCSIFFLAGS, &ifr);
	err = errno;
	lower_cap();
	close(s);
	if (rc < 0) fail("network", SBX_R_LOOPBACK, "bring loopback up (SIOCSIFFLAGS)", err);
}

// holder_ready is what the holder tells the prelude: 0, or the errno of
// the step that failed (its credentials, the user namespace, or the
// keeper's fork), and the keeper's pid.
struct holder_ready {
	int err;
	int keeper_failed; // err is the keeper's fork's
	int keeper;        // the keeper's pid
};

// kill_userns SIGKILLs, through a pidfd, every process whose user
// namespace is the caller's own, until none is left (bounded). The pidfd is
// opened before the namespace is looked at, so a pid reused in between is
// never signalled.
static void kill_userns(void) {
	struct stat self;
	if (stat("/proc/self/ns/user", &self) < 0) return;
	pid_t me = getpid();
	for (int round = 0; round < 200; round++) {
		int found = 0;
		DIR *d = opendir("/proc");
		if (d == NULL) return;
		struct dirent *e;
		while ((e = readdir(d)) != NULL) {
			char *end, path[64];
			long pid = strtol(e->d_name, &end, 10);
			if (*end != 0 || pid <= 1 || pid == me) continue;
			int pfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
			if (pfd < 0) continue;
			struct stat st;
			snprintf(path, sizeof path, "/proc/%ld/ns/user", pid);
			if (stat(path, &st) == 0 && st.st_ino == self.st_ino && st.st_dev == self.st_dev) {
				syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0);
				found = 1;
			}
			close(pfd);
		}
		closedir(d);
		if (!found) return;
		struct timespec ts = {0, 5 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
}

// keeper runs in the holder's child, in the new user namespace: it keeps
// CAP_KILL and CAP_SYS_PTRACE there (to signal the namespace's processes
// and read their ns links) and nothing else, no fd but the life pipe's
// read end, and at the end of the helper's launch (keeper.h) kills the
// namespace's processes and exits. helper is the helper's pid: a helper
// that died is waited for before the scan (keeper.h says why).
static void keeper(int life, pid_t helper) {
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct data[2];
	memset(data, 0, sizeof data);
	data[0].permitted = data[0].effective = (1u << CAP_KILL) | (1u << CAP_SYS_PTRACE);
	if (syscall(SYS_capset, &hdr, data) < 0) _exit(1);
	// Every fd but life, stdio and the supervisor's pipes included: the
	// supervisor reads the report pipe to EOF.
	if ((life > 0 && syscall(SYS_close_range, 0, (unsigned)life - 1, 0) < 0) ||
	    syscall(SYS_close_range, (unsigned)life + 1, ~0U, 0) < 0)
		_exit(1);
	switch (sbx_await_life_end(life)) {
	case SBX_LIFE_END_CLEAN:
		_exit(0); // nothing in the namespace: no scan
	case SBX_LIFE_END_LOST:
		// Bounded: a helper's exit takes well under a millisecond; past
		// the bound the scan runs anyway.
		sbx_await_parent_gone(helper, SBX_KEEPER_WAIT_MS);
		break;
	}
	kill_userns();
	_exit(0);
}

// make_keeper forks the keeper.
static int make_keeper(int life_r, int life_w, pid_t helper, int *pid) {
	pid_t k = fork();
	if (k < 0) return errno;
	if (k == 0) {
		close(life_w);
		keeper(life_r, helper);
	}
	*pid = (int)k;
	return 0;
}

// holder runs in the forked child: it takes the owner's ids as its real
// ids too, makes the user namespace, owned by its euid (the owner), forks
// the keeper in it, reports the outcome and waits to be
// released. It raises CAP_SYS_ADMIN only when the host refuses
// unprivileged user namespaces, and unshare is no fork: RLIMIT_NPROC was
// applied by the fork.
static void holder(int ready, int release, int life_r, int life_w, pid_t helper) {
	struct sbx_prelude *r = &sbx_prelude_result;
	struct holder_ready h = {0, 0, 0};
	// Every id the owner's, the real ones included: the kernel lets a
	// sender signal a process whose real or saved uid is its own, and the
	// caller's real uid was the holder's until here.
	if (setresgid((gid_t)r->owner_gid, (gid_t)r->owner_gid, (gid_t)r->owner_gid) < 0 ||
	    setresuid((uid_t)r->owner_uid, (uid_t)r->owner_uid, (uid_t)r->owner_uid) < 0)
		h.err = errno ? errno : EPERM;
	if (h.err == 0 && unshare(CLONE_NEWUSER) < 0) {
		h.err = errno;
		if ((h.err == EPERM || h.err == EACCES) && raise_cap(CAP_SYS_ADMIN) == 0) {
			h.err = unshare(CLONE_NEWUSER) < 0 ? errno : 0;
			if (h.err != 0) lower_cap();
		}
	}
	if (h.err == 0 && (h.err = make_keeper(life_r, life_w, helper, &h.keeper)) != 0) h.keeper_failed = 1;
	close(life_r);
	close(life_w);
	// Dumpable, so that its /proc files belong to its euid (the owner) and
	// the parent may open its maps without CAP_DAC_OVERRIDE. RLIMIT_CORE
	// is 0 since step 0: dumpable never means a core file.
	if (h.err == 0 && prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0) h.err = errno ? errno : EIO;
	if (write(ready, &h, sizeof h) != sizeof h || h.err != 0) _exit(1);
	char c;
	while (read(release, &c, 1) < 0 && errno == EINTR) {}
	_exit(0);
}

// write_map writes one /proc/<holder>/ file with cap (or none) effective
// around open and write: the kernel checks the opener's and the writer's.
static int write_map(pid_t child, const char *name, const char *data, int cap) {
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/%s", (int)child, name);
	if (cap != SBX_NO_CAP && raise_cap(cap) < 0) return -1;
	int rc = write_file(path, data);
	if (cap != SBX_NO_CAP) lower_cap();
	return rc;
}

static void map_holder(pid_t child) {
	struct sbx_prelude *r = &sbx_prelude_result;
	snprintf(r->uid_map, sizeof r->uid_map, "%d %d 1\n", SBX_PAYLOAD_ID, r->ruid);
	snprintf(r->gid_map, sizeof r->gid_map, "%d %d 1\n", SBX_PAYLOAD_ID, r->rgid);
	if (write_map(child, "setgroups", "deny", SBX_NO_CAP) < 0) {
		fail("enter", SBX_R_MAPS, "write setgroups deny", errno);
	} else if (write_map(child, "uid_map", r->uid_map, CAP_SETUID) < 0) {
		fail("enter", SBX_R_MAPS, "write uid_map (CAP_SETUID)", errno);
	} else if (write_map(child, "gid_map", r->gid_map, CAP_SETGID) < 0) {
		fail("enter", SBX_R_MAPS, "write gid_map (CAP_SETGID)", errno);
	} else {
		char path[64];
		snprintf(path, sizeof path, "/proc/%d/ns/user", (int)child);
		// Not O_CLOEXEC: bubblewrap inherits it as --userns.
		r->userns_fd = open(path, O_RDONLY);
		if (r->userns_fd < 0) fail("enter", SBX_R_NSFD, "open the user namespace fd", errno);
	}
}

static void userns_failed(int e) {
	switch (e) {
	case EPERM:
	case EACCES:
		fail("enter", SBX_R_USERNS_REFUSED, "unshare(CLONE_NEWUSER) refused even with CAP_SYS_ADMIN: the host restricts user namespaces", e);
		break;
	case ENOSPC:
		fail("enter", SBX_R_USERNS_LIMIT, "unshare(CLONE_NEWUSER): user.max_user_namespaces reached", e);
		break;
	default:
		fail("enter", SBX_R_USERNS, "unshare(CLONE_NEWUSER)", e);
	}
}

static void make_userns(void) {
	struct sbx_prelude *r = &sbx_prelude_result;
	int ready[2], release[2], life[2];
	if (pipe2(ready, O_CLOEXEC) < 0) { fail("enter", SBX_R_FORK, "pipe", errno); return; }
	if (pipe2(release, O_CLOEXEC) < 0) {
		fail("enter", SBX_R_FORK, "pipe", errno);
		close(ready[0]); close(ready[1]);
		return;
	}
	if (pipe2(life, O_CLOEXEC) < 0) {
		fail("enter", SBX_R_FORK, "pipe", errno);
		close(ready[0]); close(ready[1]); close(release[0]); close(release[1]);
		return;
	}
	// The holder (and the keeper after it) runs with every blockable signal
	// blocked, for good: until its first setresuid its real uid is still
	// the caller's, and a signal the service uid sends in that window stays
	// pending, never acted on (only SIGKILL and SIGSTOP cannot be blocked:
	// they end or pin the caller's own launch, nothing more).
	sigset_t all, old;
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, &old);
	pid_t helper = getpid();
	pid_t child = (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
	if (child == 0) {
		close(ready[0]);
		close(release[1]);
		holder(ready[1], release[0], life[0], life[1], helper);
	}
	int fork_err = errno;
	sigprocmask(SIG_SETMASK, &old, NULL);
	close(ready[1]);
	close(release[0]);
	close(life[0]);
	r->life_fd = life[1];
	if (child < 0) {
		fail("enter", SBX_R_FORK, "fork the user namespace holder", fork_err);
		close(ready[0]); close(release[1]);
		if (fork_err == EAGAIN) {
			drop_all();
			stop("enter", "fork", "fork the user namespace holder", fork_err,
			     "the service user's RLIMIT_NPROC is reached: raise it, or run fewer processes as that user", SBX_EXIT_ENTER);
		}
		return;
	}
	r->holder_pid = child;
	struct holder_ready h = {EIO, 0, 0};
	ssize_t got;
	while ((got = read(ready[0], &h, sizeof h)) < 0 && errno == EINTR) {}
	close(ready[0]);
	if (got != sizeof h) fail("enter", SBX_R_USERNS, "user namespace holder died before it was ready", EIO);
	else if (h.err != 0 && h.keeper_failed) fail("enter", SBX_R_KEEPER, "fork the keeper in the holder", h.err);
	else if (h.err != 0) userns_failed(h.err);
	else map_holder(child);
	r->keeper_pid = h.keeper;
	// A child subreaper while the holder exits, so that the keeper becomes
	// this process's child: the helper reaps it when it is done (a keeper
	// left to the supervisor, a subreaper too, would stay a zombie).
	int sub = prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
	close(release[1]);
	while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {}
	if (sub == 0) prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
}

static void sbx_prelude_steps(void);

__attribute__((constructor)) static void sbx_prelude(void) {
	sbx_prelude_result.started_ns = now_ns();
	sbx_prelude_steps();
	sbx_prelude_result.finished_ns = now_ns();
}

static void sbx_prelude_steps(void) {
	struct sbx_prelude *r = &sbx_prelude_result;
	r->ruid = (int)getuid();
	r->rgid = (int)getgid();
	r->euid = (int)geteuid();
	r->egid = (int)getegid();
	// Nothing effective until a step raises it, even if the file
	// capabilities were installed "+ep" rather than "+p".
	if (set_effective(SBX_NO_CAP) < 0) fatal("empty the effective capability set", errno);
	struct rlimit no_core = {0, 0};
	if (setrlimit(RLIMIT_CORE, &no_core) < 0) fail("enter", SBX_R_RLIMIT, "setrlimit(RLIMIT_CORE, 0)", errno);

	if (!supervisor_gone() && cloexec_fds() < 0)
		fail("enter", SBX_R_FDS, "mark inherited fds close-on-exec", errno);
	if (!failed()) read_owner();
	if (!failed()) switch_creds();
	if (!failed()) make_netns();
	if (!failed()) make_userns();
	if (!failed() && setresuid((uid_t)r->ruid, (uid_t)r->ruid, (uid_t)r->owner_uid) < 0)
		fail("enter", SBX_R_CREDS, "setresuid back to the caller's euid", errno);

	drop_all();
	const int keep[SBX_KEEP] = {r->userns_fd, r->life_fd, -1};
	if (close_fds(keep) < 0) fail("enter", SBX_R_FDS, "close inherited fds", errno);
	supervisor_gone();
}
