// sandboxd-exec: the first program bubblewrap runs inside the finished
// sandbox, after bwrap has applied the payload's seccomp filter. It is not
// privileged and holds nothing the payload does not already have.
//
//   sandboxd-exec ENVFILE PROGRAM [ARG...]
//
// It exists for two reasons:
//   - the request's environment must reach the payload only, never bwrap
//     (whose reaper, pid 1 of the sandbox, shows its own environment in
//     /proc/1/environ) nor the helper: the helper writes base + request env
//     into ENVFILE (a read-only bind of a memfd), and this program execs the
//     payload with exactly that environment;
//   - bwrap leaves fds it was given (the --userns fd among them) open in the
//     sandbox: everything but 0, 1 and 2 is closed here (runc CVE-2024-21626).
//
// Exit status 127 means the payload could not be started; the supervisor
// sees the reason on stderr.

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_ENV_BYTES (4 << 20)
#define MAX_ENV_VARS 1024

static char envbuf[MAX_ENV_BYTES + 1];
static char *envp[MAX_ENV_VARS + 1];

static void die(const char *what) {
	fprintf(stderr, "sandboxd-exec: %s: %s\n", what, strerror(errno));
	_exit(127);
}

int main(int argc, char **argv) {
	if (argc < 3) {
		fprintf(stderr, "usage: sandboxd-exec ENVFILE PROGRAM [ARG...]\n");
		return 127;
	}
	int fd = open(argv[1], O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) die("open environment file");
	size_t len = 0;
	for (;;) {
		ssize_t n = read(fd, envbuf + len, MAX_ENV_BYTES - len);
		if (n < 0 && errno == EINTR) continue;
		if (n < 0) die("read environment file");
		if (n == 0) break;
		len += (size_t)n;
		if (len == MAX_ENV_BYTES) { errno = E2BIG; die("environment file"); }
	}
	close(fd);

	// NUL-separated NAME=value entries.
	size_t count = 0;
	for (size_t i = 0; i < len;) {
		if (count == MAX_ENV_VARS) { errno = E2BIG; die("environment entries"); }
		envp[count++] = envbuf + i;
		i += strlen(envbuf + i) + 1;
	}
	envp[count] = NULL;

	if (syscall(SYS_close_range, 3, ~0U, 0) < 0) {
		for (int i = 3; i < 65536; i++) close(i);
	}
	execve(argv[2], argv + 2, envp);
	die(argv[2]);
	return 127;
}
