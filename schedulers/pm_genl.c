/* mptcp_pm generic netlink via libmnl (see pm_genl.h). */
#include "pm_genl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/genetlink.h>
#include <linux/mptcp.h>
#include <linux/netlink.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct fam_ctx {
	uint16_t id;
	uint32_t group;
};

static int grp_cb(const struct nlattr *attr, void *data)
{
	struct fam_ctx *f = data;
	const struct nlattr *a;
	const char *name = NULL;
	uint32_t id = 0;

	mnl_attr_for_each_nested(a, attr) {
		if (mnl_attr_get_type(a) == CTRL_ATTR_MCAST_GRP_NAME)
			name = mnl_attr_get_str(a);
		else if (mnl_attr_get_type(a) == CTRL_ATTR_MCAST_GRP_ID)
			id = mnl_attr_get_u32(a);
	}
	if (name && !strcmp(name, MPTCP_PM_EV_GRP_NAME))
		f->group = id;
	return MNL_CB_OK;
}

static int fam_attr_cb(const struct nlattr *attr, void *data)
{
	struct fam_ctx *f = data;

	if (mnl_attr_get_type(attr) == CTRL_ATTR_FAMILY_ID)
		f->id = mnl_attr_get_u16(attr);
	else if (mnl_attr_get_type(attr) == CTRL_ATTR_MCAST_GROUPS) {
		const struct nlattr *g;

		mnl_attr_for_each_nested(g, attr)
			grp_cb(g, f);
	}
	return MNL_CB_OK;
}

static int fam_cb(const struct nlmsghdr *nlh, void *data)
{
	return mnl_attr_parse(nlh, sizeof(struct genlmsghdr), fam_attr_cb, data);
}

/* Receive until the ack of `seq`; returns 0 or -errno, extack text in pm->err. */
static int wait_ack(struct pm *pm, struct mnl_socket *s, uint32_t seq, mnl_cb_t cb, void *data)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	int ret;

	for (;;) {
		ret = (int)mnl_socket_recvfrom(s, buf, sizeof(buf));
		if (ret < 0)
			return -errno;
		/* error messages: pull the extended ack text out for the log */
		{
			struct nlmsghdr *nlh = (struct nlmsghdr *)buf;

			if (nlh->nlmsg_type == NLMSG_ERROR) {
				struct nlmsgerr *e = mnl_nlmsg_get_payload(nlh);

				if (e->error) {
					const struct nlattr *attr;
					size_t off = sizeof(*e);

					pm->err[0] = 0;
					if (!(nlh->nlmsg_flags & NLM_F_CAPPED))
						off += e->msg.nlmsg_len - sizeof(struct nlmsghdr);
					if (nlh->nlmsg_flags & NLM_F_ACK_TLVS) {
						mnl_attr_for_each_payload((const struct nlattr *)((char *)e + off),
									  nlh->nlmsg_len - sizeof(*nlh) - off) {
							if (mnl_attr_get_type(attr) == NLMSGERR_ATTR_MSG)
								snprintf(pm->err, sizeof(pm->err), "%s",
									 mnl_attr_get_str(attr));
						}
					}
					return e->error;
				}
			}
		}
		ret = mnl_cb_run(buf, (size_t)ret, seq, mnl_socket_get_portid(s), cb, data);
		if (ret <= MNL_CB_STOP)
			return ret < 0 ? -errno : 0;
	}
}

int pm_open(struct pm *pm)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct fam_ctx f = {0};
	struct nlmsghdr *nlh;
	struct genlmsghdr *g;
	int one = 1, ret;

	memset(pm, 0, sizeof(*pm));
	pm->seq = (uint32_t)time(NULL);
	pm->cmd = mnl_socket_open(NETLINK_GENERIC);
	pm->ev = mnl_socket_open(NETLINK_GENERIC);
	if (!pm->cmd || !pm->ev || mnl_socket_bind(pm->cmd, 0, MNL_SOCKET_AUTOPID) < 0 ||
	    mnl_socket_bind(pm->ev, 0, MNL_SOCKET_AUTOPID) < 0) {
		snprintf(pm->err, sizeof(pm->err), "generic netlink socket: %s", strerror(errno));
		return -1;
	}
	mnl_socket_setsockopt(pm->cmd, NETLINK_EXT_ACK, &one, sizeof(one));
	nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = GENL_ID_CTRL;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	nlh->nlmsg_seq = ++pm->seq;
	g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
	g->cmd = CTRL_CMD_GETFAMILY;
	g->version = 1;
	mnl_attr_put_strz(nlh, CTRL_ATTR_FAMILY_NAME, MPTCP_PM_NAME);
	if (mnl_socket_sendto(pm->cmd, nlh, nlh->nlmsg_len) < 0)
		return -1;
	ret = wait_ack(pm, pm->cmd, nlh->nlmsg_seq, fam_cb, &f);
	if (ret < 0 || !f.id || !f.group) {
		snprintf(pm->err, sizeof(pm->err),
			 "generic netlink family %s / group %s not found (%s): kernel without MPTCP path manager netlink",
			 MPTCP_PM_NAME, MPTCP_PM_EV_GRP_NAME, strerror(-ret));
		return -1;
	}
	pm->family = f.id;
	pm->ev_group = f.group;
	if (mnl_socket_setsockopt(pm->ev, NETLINK_ADD_MEMBERSHIP, &pm->ev_group, sizeof(pm->ev_group)) < 0) {
		snprintf(pm->err, sizeof(pm->err), "joining %s: %s", MPTCP_PM_EV_GRP_NAME, strerror(errno));
		return -1;
	}
	return 0;
}

void pm_close(struct pm *pm)
{
	if (pm->cmd)
		mnl_socket_close(pm->cmd);
	if (pm->ev)
		mnl_socket_close(pm->ev);
	pm->cmd = pm->ev = NULL;
}

int pm_event_fd(const struct pm *pm)
{
	return mnl_socket_get_fd(pm->ev);
}

static void put_addr(struct nlmsghdr *nlh, uint16_t type, uint32_t addr, uint16_t port, uint32_t flags,
		     bool with_flags)
{
	struct nlattr *n = mnl_attr_nest_start(nlh, type);

	mnl_attr_put_u16(nlh, MPTCP_PM_ADDR_ATTR_FAMILY, AF_INET);
	mnl_attr_put_u32(nlh, MPTCP_PM_ADDR_ATTR_ADDR4, addr);
	mnl_attr_put_u16(nlh, MPTCP_PM_ADDR_ATTR_PORT, port);
	if (with_flags)
		mnl_attr_put_u32(nlh, MPTCP_PM_ADDR_ATTR_FLAGS, flags);
	mnl_attr_nest_end(nlh, n);
}

/* Start a mptcp_pm request `cmd` for connection `token` in buf. */
static struct nlmsghdr *put_request(struct pm *pm, char *buf, uint8_t cmd, uint32_t token)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct genlmsghdr *g;

	nlh->nlmsg_type = pm->family;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	nlh->nlmsg_seq = ++pm->seq;
	g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
	g->cmd = cmd;
	g->version = MPTCP_PM_VER;
	mnl_attr_put_u32(nlh, MPTCP_PM_ATTR_TOKEN, token);
	return nlh;
}

/* Send the request and wait for its ack: 0 or -errno (extack text in pm->err). */
static int transact(struct pm *pm, struct nlmsghdr *nlh)
{
	pm->err[0] = 0;
	if (mnl_socket_sendto(pm->cmd, nlh, nlh->nlmsg_len) < 0)
		return -errno;
	return wait_ack(pm, pm->cmd, nlh->nlmsg_seq, NULL, NULL);
}

int pm_set_backup(struct pm *pm, uint32_t token, uint32_t laddr, uint16_t lport, uint32_t raddr,
		  uint16_t rport, bool backup)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = put_request(pm, buf, MPTCP_PM_CMD_SET_FLAGS, token);

	put_addr(nlh, MPTCP_PM_ATTR_ADDR, laddr, lport, backup ? MPTCP_PM_ADDR_FLAG_BACKUP : 0, true);
	put_addr(nlh, MPTCP_PM_ATTR_ADDR_REMOTE, raddr, rport, 0, false);
	return transact(pm, nlh);
}

int pm_announce(struct pm *pm, uint32_t token, uint32_t addr, uint8_t id)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = put_request(pm, buf, MPTCP_PM_CMD_ANNOUNCE, token);
	struct nlattr *n;

	/* the userspace PM wants a non-zero id and the `signal` flag (newer kernels refuse others) */
	n = mnl_attr_nest_start(nlh, MPTCP_PM_ATTR_ADDR);
	mnl_attr_put_u16(nlh, MPTCP_PM_ADDR_ATTR_FAMILY, AF_INET);
	mnl_attr_put_u8(nlh, MPTCP_PM_ADDR_ATTR_ID, id);
	mnl_attr_put_u32(nlh, MPTCP_PM_ADDR_ATTR_ADDR4, addr);
	mnl_attr_put_u32(nlh, MPTCP_PM_ADDR_ATTR_FLAGS, MPTCP_PM_ADDR_FLAG_SIGNAL);
	mnl_attr_nest_end(nlh, n);
	return transact(pm, nlh);
}

struct ev_ctx {
	FILE *log;
	uint64_t t0;
	uint32_t token; /* of the event being parsed */
	pm_event_cb cb;
	void *cb_ctx;
};

static int ev_attr_cb(const struct nlattr *a, void *data)
{
	struct ev_ctx *c = data;
	FILE *log = c->log;
	char ip[INET_ADDRSTRLEN];
	uint32_t v4;

	switch (mnl_attr_get_type(a)) {
	case MPTCP_ATTR_TOKEN:
		c->token = mnl_attr_get_u32(a);
		fprintf(log, " token=%08x", c->token);
		break;
	case MPTCP_ATTR_SADDR4:
	case MPTCP_ATTR_DADDR4:
		v4 = mnl_attr_get_u32(a);
		inet_ntop(AF_INET, &v4, ip, sizeof(ip));
		fprintf(log, " %s=%s", mnl_attr_get_type(a) == MPTCP_ATTR_SADDR4 ? "saddr" : "daddr", ip);
		break;
	case MPTCP_ATTR_SPORT:
	case MPTCP_ATTR_DPORT:
		fprintf(log, " %s=%u", mnl_attr_get_type(a) == MPTCP_ATTR_SPORT ? "sport" : "dport",
			ntohs(mnl_attr_get_u16(a)));
		break;
	case MPTCP_ATTR_BACKUP:
		fprintf(log, " backup=%u", mnl_attr_get_u8(a));
		break;
	case MPTCP_ATTR_ERROR:
		fprintf(log, " error=%u", mnl_attr_get_u8(a));
		break;
	default:
		break;
	}
	return MNL_CB_OK;
}

static int ev_cb(const struct nlmsghdr *nlh, void *data)
{
	struct ev_ctx *c = data;
	struct genlmsghdr *g = mnl_nlmsg_get_payload(nlh);

	fprintf(c->log, "%.6f,%u,", (double)(mono_ns() - c->t0) / 1e9, g->cmd);
	c->token = 0;
	mnl_attr_parse(nlh, sizeof(*g), ev_attr_cb, c);
	fputc('\n', c->log);
	if (c->cb)
		c->cb(c->cb_ctx, g->cmd, c->token);
	return MNL_CB_OK;
}

int pm_drain_events(struct pm *pm, FILE *log, uint64_t t0_ns, pm_event_cb cb, void *ctx)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct ev_ctx c = {log, t0_ns, 0, cb, ctx};
	int n = 0;

	for (;;) {
		ssize_t r = recv(mnl_socket_get_fd(pm->ev), buf, sizeof(buf), MSG_DONTWAIT);

		if (r <= 0)
			break;
		mnl_cb_run(buf, (size_t)r, 0, 0, ev_cb, &c);
		n++;
	}
	return n;
}
