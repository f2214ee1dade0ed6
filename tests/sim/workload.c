/*
 * workload.c - the simulated processes: they attach to their daemon's engine
 * as the front (ringd/sess.c) would, run their job's script one operation at
 * a time, check every result, and start over in a new formation when an
 * operation of theirs failed for a reason the schedule gave it (a cut link,
 * a stalled rank).  A failure without such a reason, a wrong result, a
 * second reply or a reply to a process that left is a finding.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "workload.h"
#include "../../proto/dtype.h"

#define SEND_OFF 4096
#define RECV_OFF (SIM_ARENA / 2)
#define THINK_MS 20			/* a process's pause between operations, at most */

void
sim_fail(struct sim_report *r, const char *fmt, ...)
{
	va_list ap;

	if (r->failures++ > 0)
		return;
	va_start(ap, fmt);
	vsnprintf(r->first, sizeof(r->first), fmt, ap);
	va_end(ap);
}

static struct sim_world *cur;		/* the client callbacks' world */

static struct sim_proc *
proc_of(struct client *c)
{
	return (struct sim_proc *)c;	/* c is the first member */
}

/* Rank r's element i of step s: small integers, exact in float32 sums. */
static int32_t
value(int r, int s, uint64_t i)
{
	return (int32_t)((r + 1) * 3 + (int)((s * 7 + i) % 41)) - 20;
}

static int32_t
combine(int redop, int32_t a, int32_t b)
{
	switch (redop) {
	case RING_MAX:
		return a > b ? a : b;
	case RING_MIN:
		return a < b ? a : b;
	default:
		return a + b;
	}
}

static void
put(uint8_t *base, int dtype, uint64_t i, int32_t v)
{
	if (dtype == RING_FLOAT32)
		((float *)base)[i] = (float)v;
	else
		((int32_t *)base)[i] = v;
}

static int32_t
get(const uint8_t *base, int dtype, uint64_t i)
{
	if (dtype == RING_FLOAT32)
		return (int32_t)((const float *)base)[i];
	return ((const int32_t *)base)[i];
}

/* The reduction over every rank of element i of step s. */
static int32_t
reduced(const struct sim_job *j, const struct sim_step *st, int s, uint64_t i)
{
	int32_t acc = value(0, s, i);
	int r;

	for (r = 1; r < j->world; r++)
		acc = combine(st->redop, acc, value(r, s, i));
	return acc;
}

/* What element i of the receive buffer of rank `rank` must hold after step s;
 * the number of elements to check in n. */
static int32_t
expected(const struct sim_job *j, int s, int rank, uint64_t i)
{
	const struct sim_step *st = &j->step[s];

	switch (st->coll) {
	case PROTO_COLL_ALLREDUCE:
		return reduced(j, st, s, i);
	case PROTO_COLL_ALLGATHER:
		return value((int)(i / st->count), s, i % st->count);
	case PROTO_COLL_REDUCE_SCATTER:
		return reduced(j, st, s, (uint64_t)rank * st->count + i);
	case PROTO_COLL_BROADCAST:
		return value(st->root, s, i);
	default:			/* recv */
		return value(st->src, s, i);
	}
}

/* The operation p runs at its step: a point-to-point step is a send for its
 * source, a recv for its destination, and nothing for the other ranks (0). */
static int
proc_coll(const struct sim_proc *p)
{
	const struct sim_step *st = &p->job->step[p->step];

	if (st->src < 0)
		return st->coll;
	return p->rank == st->src ? PROTO_COLL_SEND : p->rank == st->dst ? PROTO_COLL_RECV : 0;
}

static uint64_t
recv_elems(const struct sim_job *j, const struct sim_step *st, int coll)
{
	if (coll == PROTO_COLL_ALLGATHER)
		return st->count * (uint64_t)j->world;
	if (coll == PROTO_COLL_BARRIER || coll == PROTO_COLL_SEND)
		return 0;
	return st->count;
}

/* Whether a failure of p's op has a reason the schedule gave: a link was cut
 * (every job forms again after that), a rank of its job stalled past the
 * bound, or its formation had failed already. */
static bool
excused(const struct sim_world *w, const struct sim_proc *p)
{
	return p->inc < p->job->inc || p->job->inc_failed || w->cuts > p->cuts_at ||
	       p->broken_at_attach || p->job->stalls > p->stalls_at;
}

static const char *
coll_name(int coll)
{
	return proto_coll_name(coll);
}

/* The answer to p's op: right, or failed for a reason it was given.  An op
 * a rank aborted fails on every rank, but for a broadcast: a host that had
 * the root's data before the abort reached it may be done (its result then
 * right); the rank that aborted gets RING_EABORTED. */
static void
check_result(struct sim_world *w, struct sim_proc *p, int status, const char *text)
{
	struct sim_job *j = p->job;
	const struct sim_step *st = &j->step[p->step];
	uint64_t i, n = recv_elems(j, st, proc_coll(p));
	bool ok_fail = status == RING_EPEER || status == RING_ETIMEDOUT || status == RING_EABORTED;

	if (st->abort_rank >= 0 && status == RING_EABORTED)
		return;			/* what an abort must give every rank */
	/* every rank must hear of it, at once; but in a broadcast a host that had
	 * the root's data before the news reached it may be done (its result is
	 * checked), the root too, whatever count it asked for */
	if (st->mismatch_rank >= 0 && !(status == 0 && st->coll == PROTO_COLL_BROADCAST &&
					(p->rank != st->mismatch_rank || p->rank == st->root))) {
		if (status != RING_EMISMATCH && status != RING_EABORTED &&
		    !(status != 0 && excused(w, p)))
			sim_fail(w->rep,
				 "job %s step %d (%s) rank %d: %d (%s) though rank %d asked for "
				 "another count",
				 j->name, p->step, coll_name(proc_coll(p)), p->rank, status,
				 status ? text : "done", st->mismatch_rank);
		if (status != RING_EMISMATCH && status != RING_EABORTED && status != 0)
			j->inc_failed = true;
		return;
	}
	/* No excuse for a formation made of a claim already withdrawn: a host
	 * forms only once every host of the formation has confirmed its claims
	 * (ringd/jobform.c), so a rank that quit, or one that is away, fails no
	 * operation of a formation it is not in. */
	if (status != 0) {
		if (!excused(w, p) || !ok_fail)
			sim_fail(w->rep,
				 "job %s step %d (%s) rank %d: failed with %d without a "
				 "fault to excuse it: %s",
				 j->name, p->step, coll_name(proc_coll(p)), p->rank, status, text);
		j->inc_failed = true;
		return;
	}
	if (st->abort_rank >= 0 &&
	    (st->coll != PROTO_COLL_BROADCAST || p->rank == st->abort_rank)) {
		sim_fail(w->rep,
			 "job %s step %d (%s, root %d) rank %d: succeeded though rank %d "
			 "aborted it",
			 j->name, p->step, coll_name(proc_coll(p)), st->root, p->rank,
			 st->abort_rank);
		return;
	}
	for (i = 0; i < n; i++) {
		int32_t got = get(p->recv, st->dtype, i);
		int32_t want = expected(j, p->step, p->rank, i);

		if (got != want) {
			sim_fail(w->rep,
				 "job %s step %d (%s, %llu elements) rank %d: element %llu "
				 "is %d, not %d",
				 j->name, p->step, coll_name(proc_coll(p)),
				 (unsigned long long)st->count, p->rank, (unsigned long long)i, got,
				 want);
			return;
		}
	}
}

static void
ev_done(struct client *c, uint64_t reqid, int status, const char *text)
{
	struct sim_proc *p = proc_of(c);
	struct sim_world *w = cur;

	if (p->leaving)
		return;			/* as the front drops a closing session's replies */
	if (p->left || !p->attached) {
		sim_fail(w->rep, "rank %d of job %s got a reply after it left", p->rank,
			 p->job->name);
		return;
	}
	if (!p->busy || reqid != p->reqid || ++p->replies > 1) {
		sim_fail(w->rep,
			 "rank %d of job %s: reply to request %llu it did not wait for "
			 "(%d: %s)",
			 p->rank, p->job->name, (unsigned long long)reqid, status, text);
		return;
	}
	check_result(w, p, status, text);
	p->busy = false;
	p->step++;
	p->wake_at = sim_now_ms() + sim_below(w->rng, THINK_MS + 1);
}

static void
ev_welcome(struct client *c)
{
	struct sim_proc *p = proc_of(c);

	if (p->leaving)
		return;
	if (cur->verbose)
		fprintf(stderr, "  t=%llu job %s rank %d (host %d): welcome\n",
			(unsigned long long)sim_now_ms(), p->job->name, p->rank, p->host);
	if (p->left || !p->attached)
		sim_fail(cur->rep, "rank %d of job %s welcomed after it left", p->rank,
			 p->job->name);
	p->welcomed = true;
}

static void
ev_refuse(struct client *c, int code, const char *text)
{
	struct sim_proc *p = proc_of(c);

	if (p->leaving)
		return;
	if (!excused(cur, p))
		sim_fail(cur->rep, "rank %d of job %s refused (%d) without a fault: %s", p->rank,
			 p->job->name, code, text);
	p->refused = true;
	p->job->inc_failed = true;
}

static const struct client_events sim_client_events = {
	.done = ev_done,
	.welcome = ev_welcome,
	.refuse = ev_refuse,
};

static struct ringd *
rd_of(const struct sim_world *w, const struct sim_proc *p)
{
	return &w->net->h[p->host].rd;
}

/* A cut link is not up again yet, or some host has yet to see the ring whole
 * again (its notice of the break may still be on the way to others). */
static bool
ring_healing(const struct sim_world *w)
{
	int h;

	if (w->healing > 0)
		return true;
	for (h = 0; h < w->net->world; h++)
		if (w->cuts > 0 && w->net->h[h].rd.state != RING_READY)
			return true;
	return false;
}

static void
proc_attach(struct sim_world *w, struct sim_proc *p)
{
	struct sim_job *j = p->job;
	char err[PROTO_TEXT_MAX + 1];
	int rc;

	memset(&p->c, 0, sizeof(p->c));
	p->c.ev = &sim_client_events;
	p->c.pid = 1000 + (int)(p - w->proc);
	p->c.arena = p->arena;
	arena_ref(p->arena);
	p->inc = j->inc;
	p->cuts_at = w->cuts;
	p->broken_at_attach = ring_healing(w);
	p->stalls_at = j->stalls;
	p->left = p->refused = false;
	p->attached = true;		/* the engine may welcome it inside job_attach */
	p->welcomed = p->finished = p->busy = false;
	p->step = 0;
	rc = job_attach(rd_of(w, p), &p->c, j->name, p->lr, p->lsize, p->rank, j->world, err,
			sizeof(err));
	if (rc != 0) {
		arena_unref(p->arena);
		p->left = true;
		p->attached = false;
		p->wake_at = sim_now_ms() + 20 + sim_below(w->rng, 200);
		if (w->verbose)
			fprintf(stderr, "  t=%llu job %s rank %d: attach refused: %s\n",
				(unsigned long long)sim_now_ms(), j->name, p->rank, err);
		return;
	}
}

static void
proc_leave(struct sim_world *w, struct sim_proc *p)
{
	struct ringd *rd = rd_of(w, p);

	if (w->verbose)
		fprintf(stderr, "  t=%llu job %s rank %d (host %d): leaves%s\n",
			(unsigned long long)sim_now_ms(), p->job->name, p->rank, p->host,
			p->busy ? " with an op in flight" : "");
	p->leaving = true;
	p->attached = p->welcomed = p->busy = false;
	coll_sess_gone(rd, &p->c);
	if (p->c.job != NULL)
		job_detach(rd, &p->c, p->c.job);
	arena_unref(p->arena);
	p->leaving = false;
	p->left = true;
	p->finished = false;
}

/* Fills p's buffers for step s and asks the engine for it. */
static void
proc_post(struct sim_world *w, struct sim_proc *p)
{
	struct sim_job *j = p->job;
	const struct sim_step *st = &j->step[p->step];
	uint8_t *send = p->mem + SEND_OFF, *recv = p->mem + RECV_OFF;
	uint64_t i, nsend = st->count;
	struct proto_op m;
	char err[PROTO_TEXT_MAX + 1] = "";
	int rc, coll = proc_coll(p);

	if (coll == PROTO_COLL_REDUCE_SCATTER)
		nsend = st->count * (uint64_t)j->world;
	for (i = 0; i < nsend; i++)
		put(send, st->dtype, i, value(p->rank, p->step, i));
	memset(recv, 0x5a, recv_elems(j, st, coll) * 4 + 4);
	memset(&m, 0, sizeof(m));
	m.reqid = ++p->reqid;
	m.coll = (uint8_t)coll;
	m.dtype = (uint8_t)st->dtype;
	m.redop = (uint8_t)st->redop;
	m.count = st->count;
	m.peer = -1;
	if (coll == PROTO_COLL_BROADCAST) {
		m.peer = st->root;
		if (p->rank == st->root)
			memcpy(recv, send, st->count * 4);
		send = recv;
	} else if (coll == PROTO_COLL_REDUCE_SCATTER && j->rs_inplace) {
		recv = send + (uint64_t)p->rank * st->count * 4;
	} else if (coll == PROTO_COLL_SEND || coll == PROTO_COLL_RECV) {
		m.peer = coll == PROTO_COLL_SEND ? st->dst : st->src;
		m.ndim = 1;
		m.shape[0] = st->count;
	}
	if (st->abort_rank == p->rank)
		m.flags |= PROTO_OP_F_ABORT;
	if (st->mismatch_rank == p->rank)
		m.count++;
	p->recv = recv;
	p->busy = true;
	p->replies = 0;
	if (w->verbose)
		fprintf(stderr, "  t=%llu job %s rank %d (host %d): step %d %s\n",
			(unsigned long long)sim_now_ms(), j->name, p->rank, p->host, p->step,
			coll_name(coll));
	rc = coll_submit(rd_of(w, p), &p->c, p->c.job, &m, send, recv, err, sizeof(err));
	if (rc != 0 && p->busy && !p->left) {
		/* the front answers a refused request at once, as a DONE */
		p->replies = 0;
		ev_done(&p->c, m.reqid, rc, err);
	}
}

/* Every process of the job is through its script in the same formation. */
static bool
all_finished(const struct sim_job *j)
{
	int i;

	for (i = 0; i < j->nproc; i++)
		if (!j->proc[i]->finished || j->proc[i]->inc != j->inc)
			return false;
	return true;
}

bool
sim_proc_ready(const struct sim_proc *p)
{
	const struct sim_job *j = p->job;

	if (p->gone || p->busy || sim_now_ms() < p->wake_at)
		return false;
	if (!p->attached || p->refused || p->inc < j->inc || j->inc_failed)
		return true;
	if (p->finished)
		return j->complete;
	return p->welcomed;
}

/* The formation p is in failed: it leaves, and comes back for the next. */
static void
proc_restart(struct sim_world *w, struct sim_proc *p)
{
	struct sim_job *j = p->job;

	if (p->inc == j->inc) {
		j->inc++;
		j->inc_failed = false;
	}
	if (p->attached || p->refused)
		proc_leave(w, p);
	p->wake_at = sim_now_ms() + sim_below(w->rng, 300);
}

void
sim_proc_act(struct sim_world *w, struct sim_proc *p)
{
	struct sim_job *j = p->job;
	const struct sim_step *st;

	cur = w;
	if (p->attached && (p->refused || p->inc < j->inc || j->inc_failed)) {
		proc_restart(w, p);
		return;
	}
	if (!p->attached) {
		proc_attach(w, p);
		return;
	}
	if (p->finished) {		/* the job is complete: it leaves for good */
		proc_leave(w, p);
		p->gone = true;
		return;
	}
	while (p->step < j->nsteps && proc_coll(p) == 0)
		p->step++;
	if (p->step == j->nsteps) {
		p->finished = true;
		j->complete = all_finished(j);
		return;
	}
	st = &j->step[p->step];
	if (st->stall_rank == p->rank && p->inc == 0 && !p->stalled) {
		/* it calls this one only after the others' bound has passed */
		p->stalled = true;
		j->stalls++;
		p->wake_at = sim_now_ms() + w->net->h[0].rd.cfg.op_timeout_ms + 500;
		return;
	}
	proc_post(w, p);
	if (w->faults && p->busy && j->world > 1 && sim_below(w->rng, 100) < 2) {
		/* it quits with the op in flight (a crash), and comes back: the
		 * others' ops fail, and the job forms again while frames of the
		 * old formation may still be on the way */
		j->stalls++;
		j->inc_failed = true;
		proc_restart(w, p);
	}
}

static void
make_step(struct sim_world *w, struct sim_job *j, struct sim_step *st, bool faults)
{
	static const int colls[] = { PROTO_COLL_ALLREDUCE, PROTO_COLL_ALLREDUCE,
				     PROTO_COLL_ALLGATHER, PROTO_COLL_REDUCE_SCATTER,
				     PROTO_COLL_BROADCAST, PROTO_COLL_BARRIER,
				     PROTO_COLL_SEND };
	static const int redops[] = { RING_SUM, RING_MAX, RING_MIN };
	static const uint64_t sizes[] = { 64, 2048, 16384 };
	struct sim_rng *r = w->rng;

	memset(st, 0, sizeof(*st));
	st->coll = colls[sim_below(r, sizeof(colls) / sizeof(colls[0]))];
	st->dtype = sim_below(r, 2) ? RING_INT32 : RING_FLOAT32;
	st->redop = redops[sim_below(r, 3)];
	st->count = 1 + sim_below(r, (uint32_t)sizes[sim_below(r, 3)]);
	st->root = (int)sim_below(r, (uint32_t)j->world);
	st->src = st->dst = st->abort_rank = st->stall_rank = st->mismatch_rank = -1;
	if (st->coll == PROTO_COLL_SEND) {
		if (j->world < 2) {
			st->coll = PROTO_COLL_ALLREDUCE;
		} else {
			st->src = (int)sim_below(r, (uint32_t)j->world);
			st->dst =
			    (st->src + 1 + (int)sim_below(r, (uint32_t)j->world - 1)) % j->world;
			return;
		}
	}
	if (sim_below(r, 100) < 6)
		st->abort_rank = (int)sim_below(r, (uint32_t)j->world);
	else if (faults && j->world > 1 && sim_below(r, 100) < 4)
		st->stall_rank = (int)sim_below(r, (uint32_t)j->world);
	/* drawn from a stream of their own, so that the seeds kept before them
	 * (tests/sim/seeds) still make the schedules they failed */
	if (st->abort_rank < 0 && j->world > 1 && sim_below(w->rng2, 100) < 4 &&
	    (st->coll == PROTO_COLL_ALLREDUCE || st->coll == PROTO_COLL_BROADCAST))
		st->mismatch_rank = (int)sim_below(w->rng2, (uint32_t)j->world);
}

/* Job k on some of the hosts, one or two processes on each, ranks in host
 * order or shuffled. */
static void
make_job(struct sim_world *w, int k, int nhosts, bool faults)
{
	struct sim_job *j = &w->job[k];
	struct sim_rng *r = w->rng;
	int hosts[SIM_HOSTS_MAX], nh = 0, order[SIM_RANKS_MAX], i, h, s;

	memset(j, 0, sizeof(*j));
	snprintf(j->name, sizeof(j->name), "sim-job-%d", k);
	for (h = 0; h < nhosts; h++)
		if (sim_below(r, 3) != 0)
			hosts[nh++] = h;
	if (nh == 0)
		hosts[nh++] = (int)sim_below(r, (uint32_t)nhosts);
	for (i = 0; i < nh; i++) {
		int lsize = 1 + (int)sim_below(r, 2), l;

		if (lsize > SIM_RANKS_MAX - j->nproc)
			lsize = SIM_RANKS_MAX - j->nproc;
		for (l = 0; l < lsize; l++) {
			struct sim_proc *p = &w->proc[w->nprocs++];

			memset(p, 0, sizeof(*p));
			p->job = j;
			p->host = hosts[i];
			p->lr = l;
			p->lsize = lsize;
			j->proc[j->nproc++] = p;
		}
		if (lsize > 1)
			j->rs_inplace = true;
	}
	j->world = j->nproc;
	if (sim_below(r, 2))
		j->rs_inplace = true;
	for (i = 0; i < j->world; i++)
		order[i] = i;
	if (sim_below(r, 2))
		for (i = j->world - 1; i > 0; i--) {
			int t = (int)sim_below(r, (uint32_t)i + 1), x = order[i];

			order[i] = order[t];
			order[t] = x;
		}
	for (i = 0; i < j->world; i++)
		j->proc[i]->rank = order[i];
	j->nsteps = 3 + (int)sim_below(r, 10);
	for (s = 0; s < j->nsteps; s++)
		make_step(w, j, &j->step[s], faults);
}

void
sim_world_make(struct sim_world *w, int nhosts, bool faults)
{
	int k, i;

	cur = w;
	w->faults = faults;
	w->njobs = 1 + (int)sim_below(w->rng, SIM_JOBS_MAX);
	w->nprocs = 0;
	for (k = 0; k < w->njobs; k++)
		make_job(w, k, nhosts, faults);
	for (i = 0; i < w->nprocs; i++) {
		struct sim_proc *p = &w->proc[i];

		p->mem = mmap(NULL, SIM_ARENA, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			      -1, 0);
		if (p->mem == MAP_FAILED || (p->arena = arena_new(p->mem, SIM_ARENA)) == NULL)
			abort();
		p->left = true;
		p->wake_at = sim_below(w->rng, 50);
	}
}

bool
sim_world_done(const struct sim_world *w)
{
	int i;

	for (i = 0; i < w->nprocs; i++)
		if (!w->proc[i].gone)
			return false;
	return true;
}

void
sim_world_end(struct sim_world *w)
{
	int i;

	cur = w;
	for (i = 0; i < w->nprocs; i++) {
		struct sim_proc *p = &w->proc[i];

		if (p->attached)
			proc_leave(w, p);
		if (p->arena->refs != 1)
			sim_fail(w->rep,
				 "the engine still holds %d reference(s) into the memory "
				 "of rank %d of job %s",
				 p->arena->refs - 1, p->rank, p->job->name);
		else
			arena_unref(p->arena);	/* unmaps it */
		p->arena = NULL;
	}
	for (i = 0; i < w->njobs; i++)
		if (!w->job[i].complete)
			sim_fail(w->rep, "job %s never ran its script through (incarnation %d)",
				 w->job[i].name, w->job[i].inc);
}
