// sandboxd-exec: the first program bubblewrap runs inside the finished
// sandbox, after bwrap has applied the payload's seccomp filter. It is not
// privileged and holds nothing the payload does not already have.
//
//   sandboxd-exec [--egress] ENVFILE PROGRAM [ARG...]
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
// With --egress (the helper passes it for network "egress" only), it first
// starts /run/sandboxd/relay, detached (double fork: the payload never sees
// it as a child), and waits until the relay listens, so the proxy variables
// the helper put in ENVFILE point at a live port when the payload starts.
// The relay gets no environment and no fd but its ready pipe.
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
#include <sys/wait.h>
#include <unistd.h>

// Keep in step with nsinit/config (SandboxRelay, SandboxEgress, EgressSocket, EgressRelayPort).
#define RELAY_PATH "/run/sandboxd/relay"
#define RELAY_SOCKET "/run/sandboxd/egress/proxy.sock"
#define RELAY_PORT "3128"

#define MAX_ENV_BYTES (4 << 20)
#define MAX_ENV_VARS 1024

static char envbuf[MAX_ENV_BYTES + 1];
static char *envp[MAX_ENV_VARS + 1];

static void die(const char *what) {
	fprintf(stderr, "sandboxd-exec: %s: %s\n", what, strerror(errno));
	_exit(127);
}

static void close_from(unsigned int from, unsigned int to) {
	if (from > to) return;
	if (syscall(SYS_close_range, from, to, 0) < 0) {
		for (unsigned int i = from; i <= to && i < 65536; i++) close((int)i);
	}
}

// start_relay forks the relay (detached) and waits for its ready byte.
static void start_relay(void) {
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) die("egress relay pipe");
	pid_t a = fork();
	if (a < 0) die("fork egress relay");
	if (a == 0) {
		pid_t b = fork();
		if (b != 0) _exit(b < 0 ? 1 : 0);
		int w = p[1];
		if (fcntl(w, F_SETFD, 0) < 0) _exit(127);
		close_from(3, (unsigned int)w - 1);
		close_from((unsigned int)w + 1, ~0U);
		char fdstr[16];
		snprintf(fdstr, sizeof fdstr, "%d", w);
		char *av[] = {RELAY_PATH, RELAY_SOCKET, RELAY_PORT, fdstr, NULL};
		char *ev[] = {NULL};
		execve(RELAY_PATH, av, ev);
		_exit(127);
	}
	close(p[1]);
	int st;
	while (waitpid(a, &st, 0) < 0 && errno == EINTR) {}
	char c;
	ssize_t n;
	while ((n = read(p[0], &c, 1)) < 0 && errno == EINTR) {}
	if (n != 1) {
		errno = ECONNREFUSED;
		die("egress relay did not start");
	}
	close(p[0]);
}

int main(int argc, char **argv) {
	int egress = argc > 1 && strcmp(argv[1], "--egress") == 0;
	if (egress) {
		argc--;
		argv++;
	}
	if (argc < 3) {
		fprintf(stderr, "usage: sandboxd-exec [--egress] ENVFILE PROGRAM [ARG...]\n");
		return 127;
	}
	if (egress) start_relay();
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

	close_from(3, ~0U);
	execve(argv[2], argv + 2, envp);
	die(argv[2]);
	return 127;
}
