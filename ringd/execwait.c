/*
 * execwait.c - a job's first operations: an operation whose plan sends to a
 * host that is no ring neighbour is held at its start, before its first
 * header, until the direct link to that host is up, for at most
 * EXECWAIT_MAX_MS; then it goes round the ring as before (counted in
 * direct_wait_timeouts).  The executor fixes each op's links as it starts
 * (exec_via), so an op that started before its links were up sent all its
 * frames round the ring: a log-depth plan's step k sends 2^k vectors that
 * each cross 2^k links, and an 8-byte all-reduce on 4096 hosts put 44.7 MB on
 * one link.  Waiting costs a connection's set-up once (a few round trips),
 * never bytes, and every later op finds the links up.
 *
 * Why hold, and not choose a ring plan while the links are down: the plan
 * must be the same on every host, and each host knows only its own links, so
 * a plan chosen by them would differ between hosts.  Holding changes no
 * plan, only when a host sends its first frame, which no other host relies
 * on (they stash what comes early, flow.c).
 *
 * Which links to wait for: the lower rank of two hosts opens the direct link
 * that carries data between them (direct.c).  So as an op starts, every host
 * opens those to the hosts above it that it sends to or hears from in the
 * plan, and waits for its links to the hosts it sends to: one it opens
 * itself, or one the lower host opens because we send to it.  Any other (direct
 * links off, none to spare on the lower host) runs out its wait and goes
 * round, and later ops do not wait for that host again until a direct link to
 * it is up (rd.direct_vain): with more peers in a plan than max_direct_links
 * (the doubling on thousands of hosts), only the first op pays the wait.  A
 * link coming up wakes the executor (the ring's room event); the hold's timer
 * wakes it when the wait runs out.
 */
#include <stdlib.h>

#include "opring.h"
#include "../proto/log.h"

/* The longest an operation waits for its direct links: far above a
 * connection's set-up on a LAN (TCP, HELLO, TLS: a few round trips), far
 * below op_timeout_ms. */
#define EXECWAIT_MAX_MS 1000

static void
execwait_wake(void *arg)
{
	job_want_all(arg, ENGINE_WORK_PUMP);
}

/* Opens the direct links this host opens for the op: to the hosts above it
 * that it hears from (those it sends to are opened by link_toward below). */
static void
open_heard(struct ringd *rd, struct op *op)
{
	const struct plan *pl = &op_ring(op)->plan;
	int k;

	for (k = 0; k < pl->nhdr_from; k++) {
		int h = job_member(op_job(op), pl->hdr_from[k]);

		if (h > rd->rank)
			(void)link_toward(rd, h, true);
	}
}

/* Whether the op's frames to host h would go round the ring now, and a
 * direct link to it is on its way; open: open ours (the op's first look: a
 * link that failed since is not opened again, no storm of connections). */
static bool
link_coming(struct ringd *rd, int h, bool open)
{
	struct link *l = link_toward(rd, h, open), *d;

	if (l != NULL && l->peer == h) {
		if (rd->direct_vain != NULL)
			rd->direct_vain[h] = 0;
		return false; /* its own link is up */
	}
	if (rd->direct_links == NULL || rd->cfg.max_direct_links <= 0)
		return false; /* none: the simulation, or direct links off */
	if (rd->direct_vain != NULL && rd->direct_vain[h])
		return false; /* waited for in vain before */
	d = rd->direct_links[h];
	/* ours, connecting; or the lower one's, to come */
	if (rd->rank < h)
		return d != NULL && d->connector;
	return true;
}

/* The wait ran out: every host the op still waits for is not waited for
 * again until a link to it is up. */
static void
mark_vain(struct ringd *rd, struct op *op)
{
	const struct plan *pl = &op_ring(op)->plan;
	int k;

	if (rd->direct_vain == NULL && (rd->direct_vain = calloc((size_t)rd->world, 1)) == NULL)
		return;
	for (k = 0; k < pl->nhdr_to; k++) {
		int h = job_member(op_job(op), pl->hdr_to[k]);

		if (link_coming(rd, h, false))
			rd->direct_vain[h] = 1;
	}
}

bool
execwait_ready(struct ringd *rd, struct op *op)
{
	struct op_ring *ring = op_ring(op);
	uint64_t now = now_ms();
	int k, waiting = -1;

	if (ring->wait_until_ms == 0)
		open_heard(rd, op);
	for (k = 0; k < ring->plan.nhdr_to && waiting < 0; k++) {
		int h = job_member(op_job(op), ring->plan.hdr_to[k]);

		if (link_coming(rd, h, ring->wait_until_ms == 0))
			waiting = h;
	}
	if (ring->wait_until_ms == 0) {
		/* the hold's end, set once (also when no wait: open_heard ran) */
		ring->wait_until_ms = now + EXECWAIT_MAX_MS;
		if (waiting >= 0)
			rd->direct_waits++;
	}
	if (waiting < 0)
		return true;
	if (now >= ring->wait_until_ms) {
		rd->direct_wait_timeouts++;
		mark_vain(rd, op);
		log_warn("%s: the direct link to host %d is not up after %d ms: its frames go "
			 "round the ring",
			 proto_coll_name(op_fp(op)->coll), waiting, EXECWAIT_MAX_MS);
		return true;
	}
	if (ring->wait == NULL && (ring->wait = timer_new(rd, execwait_wake, rd)) == NULL)
		return true; /* no timer: go round rather than hang */
	timer_add(ring->wait, (uint32_t)(ring->wait_until_ms - now));
	return false;
}
