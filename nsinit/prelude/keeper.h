#ifndef SANDBOXD_KEEPER_H
#define SANDBOXD_KEEPER_H

// The keeper's end of the life pipe, kept apart from prelude.c so that a
// test-only cgo package (prelude/keepertest) can exercise it without
// linking the privileged constructor.

#include <errno.h>
#include <unistd.h>

// SBX_LIFE_CLEAN is the one byte the helper writes to the life pipe before
// it closes it when its launch ended cleanly: bwrap exited on its own and
// no live process of the namespace owner is left (the helper, a child
// subreaper from bwrap's fork on, checks what bwrap left to it).
#define SBX_LIFE_CLEAN 'c'

// sbx_await_life_end reads the life pipe until EOF (or an error) and
// returns 1 when it carried exactly SBX_LIFE_CLEAN, 0 for every other
// ending -- a helper killed, a helper that ended before or around bwrap,
// any other byte -- after which the keeper scans and kills the namespace.
static inline int sbx_await_life_end(int life) {
	int clean = 0, bytes = 0;
	for (;;) {
		char c;
		ssize_t n = read(life, &c, 1);
		if (n == 1) {
			bytes++;
			clean = bytes == 1 && c == SBX_LIFE_CLEAN;
			continue;
		}
		if (n == 0) return clean;
		if (errno != EINTR) return 0;
	}
}

#endif
