/* The mptcp_pm generic-netlink family: per-subflow backup flags
 * (MPTCP_PM_CMD_SET_FLAGS), address announcements (MPTCP_PM_CMD_ANNOUNCE)
 * and the event group whose subscription makes a
 * userspace-PM server accept MP_JOINs. */
#ifndef MPVLAB_PM_GENL_H
#define MPVLAB_PM_GENL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct pm {
	struct mnl_socket *cmd; /* requests + acks */
	struct mnl_socket *ev; /* subscribed to mptcp_pm_events */
	uint16_t family;
	uint32_t ev_group;
	uint32_t seq;
	char err[256];
};

int pm_open(struct pm *pm);
void pm_close(struct pm *pm);
int pm_event_fd(const struct pm *pm);
/* Addresses in network order, ports in host order. Returns 0 or -errno
 * (pm->err then holds the kernel's extended ack message, if any). */
int pm_set_backup(struct pm *pm, uint32_t token, uint32_t laddr, uint16_t lport, uint32_t raddr,
		  uint16_t rport, bool backup);
/* Announce local address `addr` (network order) with address id `id` (1..255)
 * to the peer of connection `token` (MPTCP_PM_CMD_ANNOUNCE: an ADD_ADDR, the
 * duty the in-kernel PM's `signal` endpoints do). Returns 0 or -errno. */
int pm_announce(struct pm *pm, uint32_t token, uint32_t addr, uint8_t id);
/* Called for every event drained: its type (MPTCP_EVENT_*) and connection token. */
typedef void (*pm_event_cb)(void *ctx, uint8_t type, uint32_t token);
/* Drain pending events, one CSV line each to `log` (t relative to t0); `cb`
 * (may be NULL) is called after each is logged. */
int pm_drain_events(struct pm *pm, FILE *log, uint64_t t0_ns, pm_event_cb cb, void *ctx);

#endif
