#ifndef SANDBOXD_OWNER_H
#define SANDBOXD_OWNER_H

// Strict parsing of the namespace-owner file, kept apart from prelude.c so
// that a test-only cgo package (prelude/ownertest) can exercise it without
// linking the privileged constructor.

#include <stddef.h>

// The owner file's largest accepted size: "4294967294:4294967294\n" is 22.
#define SBX_OWNER_MAX 32

// sbx_parse_id parses a decimal id from s[*i] up to the byte stop. No sign,
// no leading zero, no blank, at most 10 digits, below 2^32-1 ((uid_t)-1
// means "unchanged" to setresuid). Returns 0 on success.
static inline int sbx_parse_id(const char *s, size_t n, size_t *i, char stop, unsigned *out) {
	unsigned long long v = 0;
	size_t start = *i;
	while (*i < n && s[*i] >= '0' && s[*i] <= '9') {
		if (*i - start >= 10) return -1;
		v = v * 10 + (unsigned)(s[*i] - '0');
		(*i)++;
	}
	if (*i == start || *i >= n || s[*i] != stop) return -1;
	if (s[start] == '0' && *i - start > 1) return -1;
	if (v >= 0xffffffffULL) return -1;
	*out = (unsigned)v;
	(*i)++;
	return 0;
}

// sbx_parse_owner parses exactly "UID:GID\n" (decimal) and nothing else.
// Returns 0 on success, -1 on any deviation.
static inline int sbx_parse_owner(const char *s, size_t n, unsigned *uid, unsigned *gid) {
	size_t i = 0;
	if (n > SBX_OWNER_MAX) return -1;
	if (sbx_parse_id(s, n, &i, ':', uid) < 0) return -1;
	if (sbx_parse_id(s, n, &i, '\n', gid) < 0) return -1;
	return i == n ? 0 : -1;
}

// sbx_owner_ids_ok says whether the owner ids may own a sandbox's user
// namespace: never root (a namespace owned by root would be the host's), never the
// caller's (the point is that the caller does not own it), never the payload's
// inside id (bwrap skips its setuid/setgid when the inside id equals its own
// real id, and the payload would then run as the owner).
static inline int sbx_owner_ids_ok(unsigned ouid, unsigned ogid, unsigned ruid, unsigned rgid,
                                   unsigned euid, unsigned egid, unsigned payload) {
	if (ouid == 0 || ogid == 0) return 0;
	if (ouid == ruid || ouid == euid || ogid == rgid || ogid == egid) return 0;
	if (ouid == payload || ogid == payload) return 0;
	return 1;
}

#endif
