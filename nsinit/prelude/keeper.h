#ifndef SANDBOXD_KEEPER_H
#define SANDBOXD_KEEPER_H

// The keeper's end of the life pipe, kept apart from prelude.c so that a
// test-only cgo package (prelude/keepertest) can exercise it without
// linking the privileged constructor.

#include <errno.h>
#include <time.h>
#include <unistd.h>

// The helper ends its launch by writing one byte to the life pipe and
// closing it; the keeper reads which end it was.
//
// SBX_LIFE_CLEAN: bwrap exited on its own and no live process of the
// namespace owner is left (the helper, a child subreaper from bwrap's fork
// on, checks what bwrap left to it): no scan.
//
// SBX_LIFE_SCAN: the helper is alive and bwrap is reaped or was never
// forked: scan and kill the namespace now.
//
// No byte at all: the helper died (SIGKILL, the OOM killer) at any point,
// bwrap's set-up included. Its files close before its threads have all
// gone, and bwrap's parent-death signal is sent, or not, only as the thread
// that forked it exits: a scan right at EOF could run before a bwrap that
// is about to join the namespace has joined it, and that bwrap's
// setns(CLONE_NEWUSER) then clears its parent-death signal (a change of
// credentials does: kernel/cred.c commit_creds) before the thread's exit
// would have sent it, leaving it an orphan of the owner's uid. So the
// keeper first waits for the helper to be gone (sbx_await_parent_gone):
// from then on every bwrap of this launch has either had its SIGKILL or is
// in the namespace, where the scan finds it.
#define SBX_LIFE_CLEAN 'c'
#define SBX_LIFE_SCAN 'k'

// SBX_KEEPER_WAIT_MS bounds the keeper's wait for a lost helper to be gone.
#define SBX_KEEPER_WAIT_MS 2000

enum sbx_life_end {
	SBX_LIFE_END_CLEAN = 0, // exactly SBX_LIFE_CLEAN, then EOF
	SBX_LIFE_END_SCAN = 1,  // exactly SBX_LIFE_SCAN, then EOF
	SBX_LIFE_END_LOST = 2,  // anything else: the helper died (or wrote garbage)
};

// sbx_await_life_end reads the life pipe until EOF (or an error) and says
// how it ended. Anything but one known byte is a lost helper: the keeper
// then waits for it to be gone before it scans, the safe reading.
static inline int sbx_await_life_end(int life) {
	int bytes = 0;
	char first = 0;
	for (;;) {
		char c;
		ssize_t n = read(life, &c, 1);
		if (n == 1) {
			if (bytes++ == 0) first = c;
			continue;
		}
		if (n < 0 && errno == EINTR) continue;
		if (n < 0 || bytes != 1) return SBX_LIFE_END_LOST;
		if (first == SBX_LIFE_CLEAN) return SBX_LIFE_END_CLEAN;
		if (first == SBX_LIFE_SCAN) return SBX_LIFE_END_SCAN;
		return SBX_LIFE_END_LOST;
	}
}

// sbx_await_parent_gone waits, up to limit_ms, until the calling process's
// parent is no longer parent (getppid changes when the parent's last
// thread has exited and its children are re-parented: by then each of its
// threads has sent its children's parent-death signals), and returns 1 if
// it saw it go. A pid reused by another process does not fool it: the
// caller stays re-parented away from it.
static inline int sbx_await_parent_gone(pid_t parent, int limit_ms) {
	struct timespec tick = {0, 1000 * 1000};
	for (int waited = 0; getppid() == parent; waited++) {
		if (waited >= limit_ms) return 0;
		nanosleep(&tick, NULL);
	}
	return 1;
}

#endif
