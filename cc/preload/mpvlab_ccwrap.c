/*
 * LD_PRELOAD shim: set the congestion control on every listening TCP/MPTCP socket of an unmodified
 * server (Apache), from the environment variable MPVLAB_CC.
 *
 * Why: a route's `congctl` reaches the first subflow of an MPTCP connection but not the subflows
 * joined later — the kernel syncs joined subflows to the MPTCP socket's own congestion control
 * (msk->ca_name), which is the namespace default unless TCP_CONGESTION was set on the socket.
 * Setting it on the listener makes every accepted connection (cloned from the listener) and every
 * subflow joined to it use MPVLAB_CC. Chained after mptcpize's libmptcpwrap.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*listen_fn)(int, int);

int listen(int fd, int backlog)
{
	static listen_fn real_listen;
	const char *cc = getenv("MPVLAB_CC");
	int type = 0;
	socklen_t len = sizeof(type);

	if (!real_listen)
		real_listen = (listen_fn)dlsym(RTLD_NEXT, "listen");
	if (cc && *cc && getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_STREAM) {
		if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, (socklen_t)strlen(cc)) != 0) {
			int err = errno;
			fprintf(stderr, "mpvlab-ccwrap: setting TCP_CONGESTION=%s on listener fd %d failed: %s\n",
				cc, fd, strerror(err));
			errno = err;
			return -1; /* refuse to run with the wrong congestion control */
		}
	}
	return real_listen(fd, backlog);
}
