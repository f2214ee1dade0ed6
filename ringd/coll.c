/*
 * coll.c - the collectives: gathering the local processes' requests for each
 * one, then choosing and making its plan (plan.c) and starting it in the
 * executor (exec.c).  Failures are fail.c's, the operation's life op.c's, the
 * local combine local.c's, the queue of collectives collq.c's.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/buffer.h>

#include "opring.h"
#include "../proto/dtype.h"
#include "../proto/log.h"

/* Whether the op takes the log2 n plan `log` where it has one, over the ring's
 * `ring` for `bytes`: RING_ALGO asks (every rank the same: it is in the
 * fingerprint), else latency_doubling (the same on every host: the
 * handshake), whose auto asks the cost model with the job's inputs (the same
 * on every host: its members' claims). */
static bool
takes_log(const struct op *op, enum plan_shape log, enum plan_shape ring, uint64_t bytes)
{
	const struct job *j = op_job(op);
	struct plan_cost c;

	if (op_fp(op)->algo != PROTO_ALGO_AUTO)
		return op_fp(op)->algo == PROTO_ALGO_RD;
	if (op_rd(op)->cfg.latency_doubling != CONFIG_LOG_AUTO)
		return op_rd(op)->cfg.latency_doubling == CONFIG_LOG_YES;
	job_plan_cost(j, &c);
	return plan_model_us(&c, log, job_nhosts(j), bytes) <
	       plan_model_us(&c, ring, job_nhosts(j), bytes);
}

/* Whether an all-reduce above the latency path and halving-doubling takes
 * the two-level plan: RING_ALGO=2l asks for it (wherever the hosts form
 * groups), else the cost model under latency_doubling = auto. */
static bool
takes_2l(const struct op *op, uint64_t bytes)
{
	const struct job *j = op_job(op);
	struct plan_cost c;

	if (!plan_2l_ok(job_nhosts(j)) || op_fp(op)->algo == PROTO_ALGO_RING ||
	    op_fp(op)->algo == PROTO_ALGO_RD)
		return false;
	if (op_fp(op)->algo == PROTO_ALGO_2L)
		return true;
	if (op_rd(op)->cfg.latency_doubling != CONFIG_LOG_AUTO)
		return false;
	job_plan_cost(j, &c);
	return plan_2l_better(&c, job_nhosts(j), bytes);
}

/* The plan of a collective of the job's hosts, by its kind.  -1: out of memory. */
static int
op_plan(struct op *op, const struct job *j, uint8_t *send, uint8_t *recv, bool inplace,
	uint64_t count)
{
	struct op_ring *ring = op_ring(op);
	const struct contrib *L = op_contrib(op, op_leader(op));
	struct plan *pl = &ring->plan;
	struct plan_hosts h;
	uint64_t bytes = count * op_esz(op);

	job_plan_hosts(j, &h);
	pl->esz = op_esz(op);
	pl->avg = op_redop(op) == RING_AVG;
	if (ring->tiny && job_nhosts(j) > 2 &&
	    takes_log(op, PLAN_DOUBLING_GATHER, PLAN_RING_GATHER, bytes))
		return plan_tiny_log(pl, job_pos(j), job_nhosts(j), send, recv, count);
	if (ring->tiny)
		return plan_tiny(pl, job_pos(j), job_nhosts(j), send, recv, count);
	switch (op_fp(op)->coll) {
	case PROTO_COLL_ALLREDUCE:
		if (ring->twolevel)
			return plan_allreduce_2l(pl, job_pos(j), job_nhosts(j), send, recv,
						 L->count);
		if (ring->rhd)
			return plan_rhd(pl, job_pos(j), job_nhosts(j), send, recv, L->count);
		return plan_allreduce(pl, job_pos(j), job_nhosts(j), send, recv, L->count);
	case PROTO_COLL_ALLGATHER:
		if (plan_gather_rd_ok(op_esz(op), job_nhosts(j), L->count, job_world(j)) &&
		    takes_log(op, PLAN_GATHER_RD, PLAN_GATHER_RING,
			      L->count * op_esz(op) * (uint64_t)job_world(j)))
			return plan_allgather_rd(pl, &h, recv, L->count, L->stride);
		return plan_allgather(pl, &h, recv, L->count, L->stride);
	case PROTO_COLL_REDUCE_SCATTER:
		if (ring->rhd)
			return plan_reduce_scatter_rh(pl, &h, send, recv, L->count, L->stride,
						      inplace || op_ncontrib(op) > 1);
		return plan_reduce_scatter(pl, &h, send, recv, L->count, L->stride,
					   inplace || op_ncontrib(op) > 1);
	case PROTO_COLL_BROADCAST:
		if (plan_tree_ok(op_esz(op), job_nhosts(j), L->count) &&
		    takes_log(op, PLAN_TREE, PLAN_CHAIN, bytes))
			return plan_bcast_tree(pl, &h, recv, L->count,
					       job_host_of(j, op_fp(op)->root));
		return plan_broadcast(pl, &h, recv, L->count, job_host_of(j, op_fp(op)->root));
	default:
		return -1;
	}
}

/* The contribution whose buffers the ring uses: the root's for a broadcast,
 * else the first. */
static int
op_pick_leader(const struct op *op)
{
	int i;

	if (op_fp(op)->coll == PROTO_COLL_BROADCAST)
		for (i = 0; i < op_ncontrib(op); i++)
			if (op_contrib(op, i)->rank == op_fp(op)->root)
				return i;
	return 0;
}

/* Reduce-scatter with several local processes runs in place: each one's
 * result is its own block of its send buffer. */
static bool
op_rs_in_place(const struct op *op)
{
	int i;

	for (i = 0; i < op_ncontrib(op); i++) {
		const struct contrib *c = op_contrib(op, i);

		if (c->recv != c->send + (uint64_t)c->rank * c->stride * op_esz(op))
			return false;
	}
	return true;
}

/* The op's segment: the cost model's for its plan's pipeline. */
static uint32_t
op_segment(struct op *op, const struct job *j)
{
	struct op_ring *ring = op_ring(op);
	struct plan_cost c;
	int coll = op_fp(op)->coll == PROTO_COLL_BARRIER ? PROTO_COLL_ALLREDUCE : op_fp(op)->coll;

	job_plan_cost(j, &c);
	return plan_segment(&ring->plan, &c, plan_hops(&ring->plan, coll, job_nhosts(j)),
			    op_rd(op)->cfg.segment_bytes);
}

/* Everyone on this host has asked: combine locally, plan, go. */
static void
op_start(struct ringd *rd, struct op *op)
{
	struct op_ring *ring = op_ring(op);
	struct job *j = op_job(op);
	int coll = op_fp(op)->coll, i;
	uint8_t *send, *recv;
	uint64_t count;
	bool inplace;

	op_start_with(op, op_pick_leader(op));
	if (coll == PROTO_COLL_REDUCE_SCATTER && op_ncontrib(op) > 1 && !op_rs_in_place(op)) {
		op_finish(rd, op, RING_EINVAL,
			  "reduce-scatter with several processes per host "
			  "must run in place (libring does this)");
		return;
	}
	count = op_contrib(op, op_leader(op))->count;
	if (coll == PROTO_COLL_BARRIER) {
		op_set_esz(op, 1);
		count = 0;	/* a barrier is an empty all-reduce */
	}
	if (job_nhosts(j) == 1 && coll == PROTO_COLL_ALLREDUCE && op_ncontrib(op) > 1) {
		local_allreduce_only(op);
		exec_check_done(rd, op); /* a plan of no step */
		return;
	}
	ring->tiny = plan_tiny_ok(coll, op_esz(op), job_nhosts(j), count);
	/* compression runs on the ring's plan, which halving-doubling would
	 * take over for medium sizes; the tiny plan stays uncompressed */
	ring->rhd = coll == PROTO_COLL_ALLREDUCE && !ring->tiny &&
		    op_fp(op)->wire == PROTO_WIRE_F32 &&
		    plan_rhd_ok(op_esz(op), job_nhosts(j), count) &&
		    takes_log(op, PLAN_RHD, PLAN_RING, count * op_esz(op));
	ring->twolevel = coll == PROTO_COLL_ALLREDUCE && !ring->tiny && !ring->rhd &&
			 op_fp(op)->wire == PROTO_WIRE_F32 && takes_2l(op, count * op_esz(op));
	ring->rhd |= ring->twolevel;
	if (coll == PROTO_COLL_REDUCE_SCATTER && op_fp(op)->wire == PROTO_WIRE_F32 &&
	    plan_rs_rh_ok(op_esz(op), job_nhosts(j), count, job_world(j)))
		ring->rhd = takes_log(op, PLAN_RS_RH, PLAN_RS_RING,
				      count * op_esz(op) * (uint64_t)job_world(j));
	local_gather(op, &send, &recv, &inplace);
	if (coll == PROTO_COLL_REDUCE_SCATTER && !inplace && op_ncontrib(op) == 1)
		for (i = 0; i < job_nhosts(j); i++)
			if (job_member_nranks(j, i) > 1) {
				op_finish(rd, op, RING_EINVAL,
					  "reduce-scatter must run in place in "
					  "job %s, which has several ranks on a host (libring does "
					  "this)",
					  job_name(j));
				return;
			}
	if (job_nhosts(j) == 1) {
		local_only(op, send, recv, inplace);
		exec_check_done(rd, op);	/* a plan of no step */
		return;
	}
	if (op_plan(op, j, send, recv, inplace, count) != 0) {
		op_finish(rd, op, RING_ENOMEM, "out of memory planning the operation");
		return;
	}
	ring->seg = op_segment(op, j);
	if (op_fp(op)->wire != PROTO_WIRE_F32 && !ring->tiny && !ring->rhd) {
		ring->wire_buf = malloc(ring->seg / 2);
		if (ring->wire_buf == NULL) {
			op_finish(rd, op, RING_ENOMEM, "out of memory planning the operation");
			return;
		}
		ring->wire = op_fp(op)->wire;
	}
	exec_tx(rd, op);
	flow_drain(rd, j);
	if (coll_active(j) == op)
		exec_check_done(rd, op);
}

/* Whether the job can run an operation now; 0, or RING_E* with why in err. */
static int
job_runnable(struct ringd *rd, struct job *j, char *err, size_t errlen)
{
	if (!job_ready(j)) {
		if (rd->ring_error[0] != '\0') {
			snprintf(err, errlen,
				 "job %s cannot run: %s (shrink to the survivors, "
				 "or reopen once the ring is whole)",
				 job_name(j), rd->ring_error);
			return RING_EPEER;
		}
		if (job_broken(j)) {
			/* the ring healed since: the formation is over all the same */
			snprintf(err, errlen,
				 "job %s must form again (reopen, or shrink to the "
				 "survivors): its formation ended when %s",
				 job_name(j), job_broke_why(j));
			return RING_EPEER;
		}
		snprintf(err, errlen, "job %s is not formed: %s", job_name(j),
			 job_error(j)[0] ? job_error(j) : "a rank left it");
		return RING_EABORTED;
	}
	if (job_nhosts(j) > 1 && rd->state != RING_READY && !job_on_own_links(rd, j)) {
		snprintf(err, errlen, "the ring is degraded: %s", rd->ring_error[0] ?
			 rd->ring_error : "a link is down");
		return RING_EPEER;
	}
	return 0;
}

/*
 * Point-to-point needs its two ranks only: it goes on while a formation that
 * ran loses processes that are done (a rank at the end of a pipeline may close
 * while the others still exchange), though not once the ring broke under it,
 * and not with a host whose processes have all left.
 */
static int
job_p2p_runnable(struct ringd *rd, struct job *j, const struct proto_op *m, char *err,
		 size_t errlen)
{
	int h;

	if (job_ready(j) || !job_formed(j) || job_broken(j) || rd->ring_error[0] != '\0' ||
	    (job_nhosts(j) > 1 && rd->state != RING_READY))
		return job_runnable(rd, j, err, errlen);
	h = job_host_of(j, m->peer);
	if (h < 0 || job_host(j, h)->gone == HOST_GONE) {
		snprintf(err, errlen, "%s rank %d: it left job %s",
			 m->coll == PROTO_COLL_SEND ? "send to" : "recv from", m->peer,
			 job_name(j));
		return RING_EABORTED;
	}
	return 0;
}

/* Whether a process of the job left before calling the next collective. */
static int
job_left_early(struct ringd *rd, struct job *j, char *err, size_t errlen)
{
	int h, rc;

	for (h = 0; h < rd->world; h++) {
		const struct job_host *jh = job_host(j, h);

		if (jh->gone && (uint32_t)coll_next_seq(j) > (uint32_t)jh->gone_seq) {
			/* a host that left for a break of the ring told why first
			 * (fail.c's abort_next_straight): that reason */
			rc = collq_noted_abort(j, coll_next_seq(j), job_gen(j), err, errlen);
			if (rc != 0)
				return rc;
			snprintf(err, errlen,
				 "job %s is broken: a process on host %d left after "
				 "#%llu (reopen the communicator on every rank)",
				 job_name(j), h, (unsigned long long)jh->gone_seq);
			return RING_EABORTED;
		}
	}
	return 0;
}

/* The first local process asks for the next collective: its op, numbered. */
static struct op *
coll_open(struct ringd *rd, struct client *s, struct job *j, const struct proto_op *m)
{
	struct op *op =
	    op_new(rd, j, m, job_local_size(j), m->timeout_ms ? m->timeout_ms : s->timeout_ms);

	if (op == NULL)
		return NULL;
	collq_push(j, op);
	coll_advance(rd, j);
	return op;
}

/* The first collective runs under its bound from the time it is first (the
 * others wait their turn unbounded, since their turn is bounded), and starts
 * once every local process has asked for it. */
void
coll_advance(struct ringd *rd, struct job *j)
{
	struct op *op = collq_activate(j);

	if (op == NULL || op_started(op) || op_finished(op))
		return;
	op_arm(rd, op);
	if (op_njoined(op) == op_ncontrib(op) && job_ready(j))
		op_start(rd, op);
}

/* A later local process's request must be the same collective as the first's;
 * one that gave up on it (a failure local to it) fails it for everyone.
 * True when the op failed here. */
static bool
coll_join_check(struct ringd *rd, struct op *op, const struct contrib *c,
		const struct proto_op *m)
{
	struct proto_fp fp = *op_fp(op);
	const struct contrib *f = NULL;
	char a[160], b[160];
	int i;

	proto_fp_of_op(&fp, m);
	fp.seq = op_fp(op)->seq;
	for (i = 0; i < op_ncontrib(op) && f == NULL; i++)
		if (op_contrib(op, i)->in && op_contrib(op, i) != c)
			f = op_contrib(op, i);
	/* an all-gather's processes may place their results apart (one in the
	 * arena, one staged): local_scatter copies each by its own stride */
	if (f != NULL && (!proto_fp_equal(&fp, op_fp(op)) || f->count != c->count ||
			  (f->stride != c->stride && fp.coll != PROTO_COLL_ALLGATHER))) {
		op_finish(rd, op, RING_EMISMATCH,
			  "ranks on this host called different "
			  "collectives: rank %d called %s, rank %d called %s",
			  f->rank, proto_fp_format(op_fp(op), a, sizeof(a)), c->rank,
			  proto_fp_format(&fp, b, sizeof(b)));
		return true;
	}
	if (m->flags & PROTO_OP_F_ABORT) {
		op_finish(rd, op, RING_EABORTED, "rank %d (host %d) gave up on %s: a failure "
			  "local to that rank (its own error says which, e.g. a CUDA copy)",
			  c->rank, rd->rank, proto_fp_format(&fp, a, sizeof(a)));
		return true;
	}
	return false;
}

int
coll_submit(struct ringd *rd, struct client *s, struct job *j, const struct proto_op *m,
	    uint8_t *send, uint8_t *recv, char *err, size_t errlen)
{
	int lr = s->local_rank, rc;
	struct contrib *c;
	struct op *op;

	if (COLL_IS_P2P(m->coll)) {
		if ((rc = job_p2p_runnable(rd, j, m, err, errlen)) != 0)
			return rc;
		return p2p_post(rd, s, j, m, send, recv, err, errlen);
	}
	if ((rc = job_runnable(rd, j, err, errlen)) != 0)
		return rc;
	/* a process's collectives are the job's in the order it asks for them */
	if ((op = coll_find(j, job_proc(j, lr)->entered + 1)) == NULL) {
		if ((rc = job_left_early(rd, j, err, errlen)) != 0)
			return rc;
		if (coll_queued(j) >= COLL_QUEUE_MAX) {
			snprintf(err, errlen,
				 "job %s has %d collectives in flight on this host "
				 "(at most %d): wait for some",
				 job_name(j), coll_queued(j), COLL_QUEUE_MAX);
			return RING_EINVAL;
		}
		if ((op = coll_open(rd, s, j, m)) == NULL) {
			snprintf(err, errlen, "out of memory");
			return RING_ENOMEM;
		}
	} else if (op_started(op) || lr >= op_ncontrib(op) || op_contrib(op, lr)->in) {
		snprintf(err, errlen, "a collective of job %s is already in flight", job_name(j));
		return RING_EINVAL;
	}
	c = op_contrib(op, lr);
	*c = (struct contrib){ .sess = s, .reqid = m->reqid, .arena = s->arena, .send = send,
			       .recv = recv, .count = m->count,
			       .stride = m->stride ? m->stride : m->count,
			       .rank = s->rank, .in = true };
	arena_ref(c->arena);
	job_proc(j, lr)->entered = op_fp(op)->seq;
	if (!op_finished(op) && coll_join_check(rd, op, c, m))
		return 0;
	if (op_finished(op)) {
		/* it failed before this process came: it gets the same answer */
		op_complete(rd, op);
		return 0;
	}
	if (op == coll_active(j))
		coll_advance(rd, j);
	return 0;
}

/* A collective's part of a process that is going away, if it has one:
 * its contribution, or the slot of a process of the op's formation that has not
 * asked yet.  A process that came for a later formation has none. */
static struct contrib *
op_contrib_of(struct op *op, struct client *s)
{
	struct job *j = op_job(op);
	int lr = s->local_rank;
	struct contrib *c;

	if (lr < 0 || lr >= op_ncontrib(op))
		return NULL;
	c = op_contrib(op, lr);
	if (c->sess == s)
		return c;
	if (!c->in && op_gen(op) == job_gen(j) && lr < job_local_size(j) &&
	    job_proc(j, lr)->sess == s && job_proc(j, lr)->member)
		return c;
	return NULL;
}

void
coll_sess_gone(struct ringd *rd, struct client *s)
{
	struct job *j = s->job;
	struct contrib *c;
	struct op *op;

	if (j == NULL)
		return;
	/* every collective it asked for or was still to ask for (ops end in the
	 * turn, so the list stays as it is while it is walked) */
	for (op = coll_first(j); op != NULL; op = op_next(op)) {
		if ((c = op_contrib_of(op, s)) == NULL)
			continue;
		c->sess = NULL;
		if (!c->in) {	/* it will never ask now */
			c->in = true;
			c->replied = true;
		}
		if (!op_finished(op))
			op_finish(rd, op, RING_EABORTED, "rank %d (a process on host %d) went "
				  "away", s->rank, rd->rank);
		else
			op_complete(rd, op);	/* it may have been the last one */
	}
	p2p_sess_gone(rd, j, s);
}

/* An operation of j is over and answered (in the turn): off its list and
 * freed; the turn then starts the next collective, takes its early frames,
 * or finds the formation over once its processes have left. */
static void
coll_op_over(struct ringd *rd, struct op *op)
{
	struct job *j = op_job(op);
	bool coll = !COLL_IS_P2P(op_fp(op)->coll);

	if (coll)
		collq_remove(j, op);
	else
		p2p_op_over(op);
	op_free(op);
	job_want(rd, j, (coll ? JOB_WORK_ADVANCE : 0) | JOB_WORK_DRAIN | JOB_WORK_SETTLE);
}

void
coll_work(struct ringd *rd, struct job *j, unsigned what)
{
	struct op *op;

	if (what & JOB_WORK_ADVANCE)
		coll_advance(rd, j);
	if (what & JOB_WORK_PUMP) {
		if ((op = coll_active(j)) != NULL && !op_finished(op)) {
			exec_tx(rd, op);
			exec_check_done(rd, op);
		}
		p2p_pump(rd, j);
	}
	if (what & JOB_WORK_DRAIN)
		flow_drain_now(rd, j);
	/* last: the job may be forgotten once it is over */
	if (what & JOB_WORK_SETTLE)
		job_settle(rd, j);
}

static const struct engine_hooks coll_hooks = {
	.rx_frame = exec_rx_frame,
	.op_over = coll_op_over,
	.parts = {
		[JOB_PART_FLOW] = &flow_part,
		[JOB_PART_COLLQ] = &collq_part,
		[JOB_PART_P2P] = &p2p_part,
		[JOB_PART_REC] = &rec_part,
	},
};

void
coll_init(struct ringd *rd)
{
	TAILQ_INIT(&rd->jobs);
	TAILQ_INIT(&rd->work);
	TAILQ_INIT(&rd->done);
	rd->njobs = 0;
	rd->eng = &coll_hooks;
}
