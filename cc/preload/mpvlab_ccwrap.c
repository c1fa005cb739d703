/*
 * LD_PRELOAD shim: set the congestion control on every listening TCP/MPTCP socket of an unmodified
 * server (Apache), from the environment variable MPVLAB_CC.
 *
 * Why: a route's `congctl` reaches the first subflow of an MPTCP connection but not the subflows
 * joined later — the kernel syncs joined subflows to the MPTCP socket's own congestion control
 * (msk->ca_name), which is the namespace default unless TCP_CONGESTION was set on the socket.
 * Setting it on the listener makes every accepted connection (cloned from the listener) and every
 * subflow joined to it use MPVLAB_CC. Chained after mptcpize's libmptcpwrap.
 *
 * MPVLAB_SNDBUF (optional, bytes, passed to setsockopt(SO_SNDBUF) as is — the kernel doubles it):
 * bounds the send buffer of every accepted connection and of each of its subflows (the MPTCP
 * socket syncs a locked sndbuf to its subflows), so a scheduler's per-subflow decisions take
 * effect within milliseconds instead of after an autotuned queue drains (schedulers/README.md).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*listen_fn)(int, int);

static int set_sndbuf(int fd)
{
	const char *v = getenv("MPVLAB_SNDBUF");
	char *end = NULL;
	long n;

	if (!v || !*v)
		return 0;
	n = strtol(v, &end, 10);
	if (*end || n <= 0 || n > INT_MAX) {
		fprintf(stderr, "mpvlab-ccwrap: MPVLAB_SNDBUF=%s is not a positive byte count\n", v);
		errno = EINVAL;
		return -1;
	}
	int val = (int)n;
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &val, sizeof(val)) != 0) {
		int err = errno;
		fprintf(stderr, "mpvlab-ccwrap: setting SO_SNDBUF=%d on listener fd %d failed: %s\n", val, fd,
			strerror(err));
		errno = err;
		return -1;
	}
	return 0;
}

int listen(int fd, int backlog)
{
	static listen_fn real_listen;
	const char *cc = getenv("MPVLAB_CC");
	int type = 0;
	socklen_t len = sizeof(type);

	if (!real_listen)
		real_listen = (listen_fn)dlsym(RTLD_NEXT, "listen");
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0)
		type = 0;
	if (cc && *cc && type == SOCK_STREAM) {
		if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, (socklen_t)strlen(cc)) != 0) {
			int err = errno;
			fprintf(stderr, "mpvlab-ccwrap: setting TCP_CONGESTION=%s on listener fd %d failed: %s\n",
				cc, fd, strerror(err));
			errno = err;
			return -1; /* refuse to run with the wrong congestion control */
		}
	}
	if (type == SOCK_STREAM)
		if (set_sndbuf(fd) != 0)
			return -1; /* refuse to run with an unbounded queue when a bound was asked for */
	return real_listen(fd, backlog);
}
