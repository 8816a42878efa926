// sandboxd-relay: the in-sandbox end of egress. It listens on
// 127.0.0.1:PORT (the sandbox's own loopback; the sandbox has no other
// interface) and relays each connection, byte for byte, to the Unix
// socket SOCKET, which the supervisor's allowlist proxy serves from the
// host. It decides nothing: every byte it forwards is untrusted input to
// the proxy (invariant I12), and the payload, which runs as the same uid,
// could replace it or talk to SOCKET itself.
//
//   sandboxd-relay SOCKET PORT READYFD
//
// It writes one byte on READYFD once it listens, so that the shim starts
// the payload only after the proxy variables point at a live port. It runs
// under the payload's seccomp filter and needs nothing beyond it: socket
// (AF_INET, AF_UNIX), bind, listen, accept4, connect, poll, shutdown, fork.

#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static void die(const char *what) {
	fprintf(stderr, "sandboxd-relay: %s: %s\n", what, strerror(errno));
	_exit(1);
}

static int write_all(int fd, const char *b, ssize_t n) {
	while (n > 0) {
		ssize_t k = write(fd, b, (size_t)n);
		if (k < 0 && errno == EINTR) continue;
		if (k <= 0) return -1;
		b += k;
		n -= k;
	}
	return 0;
}

// pump relays both directions until both are closed, passing half-closes on.
static void pump(int a, int b) {
	char buf[32768];
	struct pollfd p[2] = {{.fd = a, .events = POLLIN}, {.fd = b, .events = POLLIN}};
	int open_dirs = 2;
	while (open_dirs > 0) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR) continue;
			return;
		}
		for (int i = 0; i < 2; i++) {
			if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
			int dst = i == 0 ? b : a;
			ssize_t n = read(p[i].fd, buf, sizeof buf);
			if (n < 0 && errno == EINTR) continue;
			if (n <= 0 || write_all(dst, buf, n) < 0) {
				if (n < 0) return;
				shutdown(dst, SHUT_WR);
				p[i].fd = -1;
				open_dirs--;
			}
		}
	}
}

static int dial_proxy(const char *path) {
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof sa.sun_path) { errno = ENAMETOOLONG; return -1; }
	strcpy(sa.sun_path, path);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0) return -1;
	if (connect(s, (struct sockaddr *)&sa, sizeof sa) < 0) { close(s); return -1; }
	return s;
}

int main(int argc, char **argv) {
	if (argc != 4) {
		fprintf(stderr, "usage: sandboxd-relay SOCKET PORT READYFD\n");
		return 2;
	}
	int port = atoi(argv[2]), ready = atoi(argv[3]);
	if (port < 1 || port > 65535 || ready < 3) { errno = EINVAL; die("arguments"); }
	// Children are reaped by the kernel; a dead peer is an EPIPE, not a signal.
	signal(SIGCHLD, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);

	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (l < 0) die("socket");
	int one = 1;
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
	                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (bind(l, (struct sockaddr *)&sa, sizeof sa) < 0) die("bind 127.0.0.1");
	if (listen(l, 64) < 0) die("listen");
	if (write_all(ready, "R", 1) < 0) die("ready");
	close(ready);

	for (;;) {
		int c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED) continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOMEM) { usleep(10000); continue; }
			die("accept");
		}
		pid_t pid = fork();
		if (pid == 0) {
			close(l);
			int u = dial_proxy(argv[1]);
			if (u < 0) {
				static const char body[] = "sandboxd relay: the egress proxy is not reachable\n";
				char msg[256];
				int n = snprintf(msg, sizeof msg, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
				                 sizeof body - 1, body);
				write_all(c, msg, n);
				_exit(1);
			}
			pump(c, u);
			_exit(0);
		}
		close(c); // on a failed fork too: the client sees a closed connection
	}
}
