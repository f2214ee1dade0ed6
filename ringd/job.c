/*
 * job.c - jobs and their membership.
 *
 * A job is a named group of ranks spread over some of the ring's hosts.  Each
 * daemon knows its own processes of the job; when all of them have attached it
 * sends a JOIN frame (its host and their global ranks) once round the ring, and
 * every daemon records it.  The job is ready on a host when every rank of the
 * world has a host: then every daemon computes the same member list in ring order,
 * and this host's processes get their WELCOME.  Conflicting claims (a rank on two
 * hosts, two world sizes) make the job fail to form, with the reason sent to the
 * processes.  When a host's processes leave, a LEAVE frame takes its ranks back,
 * so the same job name can form again later.
 *
 * Daemons without processes of a job take no part: they pass its frames on.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/buffer.h>

#include "coll.h"
#include "sess.h"
#include "../proto/log.h"

struct job *
job_lookup(struct ringd *rd, uint32_t id)
{
	struct job *j;

	TAILQ_FOREACH(j, &rd->jobs, entry)
		if (j->id == id)
			return j;
	return NULL;
}

static void members_free(struct job *j);

/* A job nothing refers to any more: no process here, no formation known, nothing
 * in flight or waiting. */
static bool
job_idle(const struct job *j)
{
	return j->nloc == 0 && j->world == 0 && j->active == NULL &&
	       evbuffer_get_length(j->stash) == 0 && TAILQ_EMPTY(&j->sends) &&
	       TAILQ_EMPTY(&j->recvs) && TAILQ_EMPTY(&j->rts_in);
}

static void
job_free(struct ringd *rd, struct job *j)
{
	TAILQ_REMOVE(&rd->jobs, j, entry);
	rd->njobs--;
	members_free(j);
	evbuffer_free(j->stash);
	free(j->host_of);
	free(j->loc);
	free(j->loc_rank);
	free(j->loc_entered);
	free(j->loc_done);
	free(j->gone);
	free(j->gone_seq);
	free(j);
}

/* At max_jobs: forget the jobs that are over, so a long-lived daemon serves any
 * number of jobs one after another. */
static void
job_gc(struct ringd *rd)
{
	struct job *j, *nx;

	for (j = TAILQ_FIRST(&rd->jobs); j != NULL; j = nx) {
		nx = TAILQ_NEXT(j, entry);
		if (job_idle(j))
			job_free(rd, j);
	}
}

struct job *
job_wire(struct ringd *rd, uint32_t id)
{
	struct job *j = job_lookup(rd, id);

	if (j != NULL)
		return j;
	if (rd->njobs >= rd->cfg.max_jobs)
		job_gc(rd);
	if (rd->njobs >= rd->cfg.max_jobs)
		return NULL;
	if ((j = calloc(1, sizeof(*j))) == NULL)
		return NULL;
	if ((j->stash = evbuffer_new()) == NULL) {
		free(j);
		return NULL;
	}
	j->id = id;
	j->next_seq = 1;
	j->pos = -1;
	j->gone_seq = calloc((size_t)rd->world, sizeof(uint64_t));
	if ((j->gone = calloc((size_t)rd->world, 1)) == NULL || j->gone_seq == NULL) {
		evbuffer_free(j->stash);
		free(j);
		return NULL;
	}
	j->next_host = j->prev_host = -1;
	TAILQ_INIT(&j->sends);
	TAILQ_INIT(&j->recvs);
	TAILQ_INIT(&j->rts_in);
	job_reset_flow(rd, j);
	TAILQ_INSERT_TAIL(&rd->jobs, j, entry);
	rd->njobs++;
	return j;
}

int
job_host_of(const struct job *j, int rank)
{
	if (rank < 0 || rank >= j->world || j->host_of == NULL)
		return -1;
	return j->host_of[rank];
}

static void
members_free(struct job *j)
{
	int i;

	for (i = 0; i < j->nhosts; i++)
		free(j->hranks[i]);
	free(j->hranks);
	free(j->nhranks);
	free(j->hosts);
	j->hranks = NULL;
	j->nhranks = NULL;
	j->hosts = NULL;
	j->nhosts = 0;
	j->pos = -1;
	j->next_host = j->prev_host = -1;
}

static int
set_world(struct job *j, int world)
{
	int i;

	free(j->host_of);
	j->host_of = malloc((size_t)world * sizeof(int));
	if (j->host_of == NULL) {
		j->world = 0;
		return -1;
	}
	for (i = 0; i < world; i++)
		j->host_of[i] = -1;
	j->world = world;
	j->nplaced = 0;
	return 0;
}

/* How long a job that failed to form refuses newcomers with the same reason, so
 * every process of the failed start hears it, not just the first to notice. */
#define FORM_ERROR_MS	3000

static void
circulate_abort(struct ringd *rd, struct job *j)
{
	uint8_t buf[PROTO_TEXT_MAX + 16];
	struct proto_frame f = { .type = PROTO_F_ABORT, .job = j->id, .epoch = rd->epoch,
				 .route = PROTO_ROUTE(rd->rank, rd->rank), .seq = 0 };
	int n = proto_encode_reason(buf, sizeof(buf), RING_EINVAL, j->error);

	if (n <= 0 || rd->world < 2 || rd->next == NULL || rd->next->state != LINK_UP)
		return;
	f.length = (uint32_t)n;
	link_send(rd->next, &f, buf);
}

/* The job cannot form: tell this host's processes why, and (when we found out
 * here) every other host, so none of them waits for its timeout. */
static void
job_fail_form(struct ringd *rd, struct job *j, bool tell, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void
job_fail_form(struct ringd *rd, struct job *j, bool tell, const char *fmt, ...)
{
	va_list ap;
	int i;

	if (j->error[0] == '\0') {
		va_start(ap, fmt);
		vsnprintf(j->error, sizeof(j->error), fmt, ap);
		va_end(ap);
		j->error_ms = now_ms();
		log_warn("job %s cannot form: %s", j->name, j->error);
		if (tell)
			circulate_abort(rd, j);
	}
	for (i = 0; i < j->local_size; i++)
		if (j->loc[i] != NULL)
			sess_refuse(j->loc[i], RING_EINVAL, j->error);
}

/* Every rank has a host: agree on the member list and go. */
static void
job_check_ready(struct ringd *rd, struct job *j)
{
	int h, r, i, n = 0;

	if (j->ready || j->world == 0 || j->nplaced < j->world || j->error[0] != '\0')
		return;
	if (j->local_size == 0 || j->nloc < j->local_size)
		return;
	members_free(j);
	j->hosts = calloc((size_t)rd->world, sizeof(int));
	j->hranks = calloc((size_t)rd->world, sizeof(int *));
	j->nhranks = calloc((size_t)rd->world, sizeof(int));
	if (j->hosts == NULL || j->hranks == NULL || j->nhranks == NULL) {
		job_fail_form(rd, j, true, "out of memory");
		return;
	}
	for (h = 0; h < rd->world; h++) {
		int k = 0;

		for (r = 0; r < j->world; r++)
			k += j->host_of[r] == h;
		if (k == 0)
			continue;
		j->hranks[n] = malloc((size_t)k * sizeof(int));
		if (j->hranks[n] == NULL) {
			job_fail_form(rd, j, true, "out of memory");
			return;
		}
		for (r = 0, i = 0; r < j->world; r++)
			if (j->host_of[r] == h)
				j->hranks[n][i++] = r;
		j->nhranks[n] = k;
		j->hosts[n] = h;
		if (h == rd->rank)
			j->pos = n;
		n++;
	}
	j->nhosts = n;
	j->next_host = j->hosts[(j->pos + 1) % n];
	j->prev_host = j->hosts[(j->pos + n - 1) % n];
	j->ready = true;
	job_reset_flow(rd, j);
	j->next_seq = 1;
	j->last_done_seq = 0;
	j->abort_seq = 0;	/* failures of an earlier formation are not ours */
	log_info("job %s ready: %d ranks on %d host%s, %d here (ranks %d..)", j->name, j->world,
		 n, n == 1 ? "" : "s", j->local_size, j->loc_rank[0]);
	for (i = 0; i < j->local_size; i++)
		sess_welcome(j->loc[i]);
	job_drain_stash(rd, j);
}

static void
send_membership(struct ringd *rd, struct job *j, uint16_t type, uint64_t last)
{
	static struct proto_join m;
	static uint8_t buf[96 + 4 * PROTO_JOIN_MAX];
	struct proto_frame f = { .type = type, .job = j->id, .epoch = rd->epoch,
				 .route = PROTO_ROUTE(rd->rank, rd->rank) };
	int i, n;

	if (rd->world < 2)
		return;
	memset(&m, 0, sizeof(m));
	snprintf(m.job, sizeof(m.job), "%s", j->name);
	m.world = (uint32_t)j->world;
	m.host = (uint32_t)rd->rank;
	/* JOIN: the formation count; LEAVE: the last sequence number the leaving
	 * process called, so the others can tell an op it finished from one it
	 * never will */
	m.gen = type == PROTO_F_LEAVE ? (uint32_t)last : j->gen;
	if (type == PROTO_F_JOIN) {
		m.nranks = (uint32_t)j->local_size;
		for (i = 0; i < j->local_size; i++)
			m.ranks[i] = (uint32_t)j->loc_rank[i];
	}
	n = proto_encode_join(buf, sizeof(buf), &m);
	if (n <= 0 || rd->next == NULL || rd->next->state != LINK_UP) {
		/* re-sent when the ring forms (job_ring_up) */
		return;
	}
	f.length = (uint32_t)n;
	link_send(rd->next, &f, buf);
}

/* Ranks of host h go back to unknown; the job must form again. */
static void
unplace_host(struct job *j, int h)
{
	int r;

	for (r = 0; r < j->world; r++)
		if (j->host_of[r] == h) {
			j->host_of[r] = -1;
			j->nplaced--;
		}
	j->gone[h] = 0;
	j->ready = false;
}

/* Every host's processes have left: forget the formation, so the same name can
 * form again from scratch. */
static void
job_maybe_reset(struct ringd *rd, struct job *j)
{
	int h;

	if (j->nloc > 0 || j->active != NULL)
		return;
	for (h = 0; h < rd->world; h++) {
		int r;

		for (r = 0; r < j->world; r++)
			if (j->host_of[r] == h && !j->gone[h])
				return;
	}
	for (h = 0; h < rd->world; h++)
		if (j->gone[h])
			unplace_host(j, h);
	j->world = 0;
	j->nplaced = 0;
	members_free(j);
	j->rx_consumed += evbuffer_get_length(j->stash);
	evbuffer_drain(j->stash, evbuffer_get_length(j->stash));
	j->next_seq = 1;
	j->last_done_seq = 0;
	j->abort_seq = 0;
}

int
job_attach(struct ringd *rd, struct sess *s, const char *name, int lr, int lsize, int rank,
	   int world, char *err, size_t errlen)
{
	uint32_t id = proto_job_id(name);
	struct job *j = job_lookup(rd, id);
	bool given_world;
	int i;

	if (j != NULL && j->name[0] != '\0' && strcmp(j->name, name) != 0) {
		snprintf(err, errlen, "job name '%s' collides with job '%s' (id %08x)",
			 name, j->name, id);
		return RING_EINVAL;
	}
	if (j == NULL && (j = job_wire(rd, id)) == NULL) {
		snprintf(err, errlen, "too many jobs on this daemon (max_jobs = %d)",
			 rd->cfg.max_jobs);
		return RING_EPERM;
	}
	snprintf(j->name, sizeof(j->name), "%s", name);
	if (j->error[0] != '\0') {
		if (now_ms() - j->error_ms < FORM_ERROR_MS || j->nloc > 0) {
			snprintf(err, errlen, "job %s cannot form: %s", name, j->error);
			return RING_EINVAL;
		}
		j->error[0] = '\0';	/* an old failure: this is a new start */
	}
	if (j->gone[rd->rank])
		unplace_host(j, rd->rank);	/* a new formation of the same job */
	if (lsize < 1 || lsize > PROTO_JOIN_MAX || lr < 0 || lr >= lsize) {
		snprintf(err, errlen, "local rank %d of %d is out of range (1..%d processes "
			 "per host)", lr, lsize, PROTO_JOIN_MAX);
		return RING_EINVAL;
	}
	given_world = world >= 0;
	if (world < 0)
		world = rd->world * lsize;
	if (rank < 0)
		rank = rd->rank * lsize + lr;
	if (world > PROTO_MAX_RANKS || rank >= world) {
		snprintf(err, errlen, "rank %d does not fit world size %d", rank, world);
		return RING_EINVAL;
	}
	if (j->nloc > 0 && j->local_size != lsize) {
		snprintf(err, errlen, "job %s: this process says %d processes on this host, "
			 "an earlier one said %d", name, lsize, j->local_size);
		return RING_EINVAL;
	}
	if (j->world != 0 && j->world != world) {
		snprintf(err, errlen, "job %s: world size %d disagrees with %d known here%s",
			 name, world, j->world, given_world ? "" : " (with unequal processes "
			 "per host, give the launcher's RANK and WORLD_SIZE)");
		job_fail_form(rd, j, true, "%s", err);
		return RING_EINVAL;
	}
	if (j->world == 0 && set_world(j, world) != 0) {
		snprintf(err, errlen, "out of memory");
		return RING_ENOMEM;
	}
	if (j->nloc == 0) {
		free(j->loc);
		free(j->loc_rank);
		free(j->loc_entered);
		free(j->loc_done);
		j->loc = calloc((size_t)lsize, sizeof(*j->loc));
		j->loc_rank = calloc((size_t)lsize, sizeof(int));
		j->loc_entered = calloc((size_t)lsize, sizeof(uint64_t));
		j->loc_done = calloc((size_t)lsize, sizeof(uint64_t));
		if (j->loc == NULL || j->loc_rank == NULL || j->loc_entered == NULL ||
		    j->loc_done == NULL) {
			snprintf(err, errlen, "out of memory");
			return RING_ENOMEM;
		}
		j->local_size = lsize;
	}
	if (j->loc[lr] != NULL) {
		snprintf(err, errlen, "job %s: local rank %d (rank %d) is already attached by pid "
			 "%d; this process asked for rank %d (give each process its own "
			 "LOCAL_RANK)", name, lr, j->loc_rank[lr], sess_pid(j->loc[lr]), rank);
		return RING_EINVAL;
	}
	for (i = 0; i < j->local_size; i++)
		if (j->loc[i] != NULL && j->loc_rank[i] == rank) {
			snprintf(err, errlen, "job %s: rank %d is already attached here as local "
				 "rank %d", name, rank, i);
			return RING_EINVAL;
		}
	if (j->host_of[rank] != -1 && j->host_of[rank] != rd->rank && !j->gone[j->host_of[rank]]) {
		snprintf(err, errlen, "job %s: rank %d is already attached on host %d", name,
			 rank, j->host_of[rank]);
		job_fail_form(rd, j, true, "%s", err);
		return RING_EINVAL;
	}
	j->loc[lr] = s;
	j->loc_rank[lr] = rank;
	j->nloc++;
	sess_set_job(s, j, rank, world, lr, lsize);
	if (j->nloc < j->local_size)
		return 0;
	/* the whole local group is here: claim our ranks and tell the ring */
	for (i = 0; i < j->local_size; i++) {
		if (j->host_of[j->loc_rank[i]] == -1)
			j->nplaced++;
		j->host_of[j->loc_rank[i]] = rd->rank;
	}
	j->gen++;
	j->joined = true;
	send_membership(rd, j, PROTO_F_JOIN, 0);
	job_check_ready(rd, j);
	return 0;
}

void
job_detach(struct ringd *rd, struct sess *s, struct job *j)
{
	uint64_t last = 0;
	int i;

	for (i = 0; i < j->local_size; i++)
		if (j->loc[i] == s) {
			j->loc[i] = NULL;
			j->nloc--;
			last = j->loc_entered[i];
		}
	if (j->joined) {
		/* Every host hears that a process of ours left and when: operations it
		 * never called fail at once everywhere instead of timing out. */
		send_membership(rd, j, PROTO_F_LEAVE, last);
	}
	if (j->nloc == 0) {
		if (j->joined) {
			j->joined = false;
			j->gone[rd->rank] = 1;
			j->gone_seq[rd->rank] = last;
		}
		j->local_size = 0;
		job_maybe_reset(rd, j);
	} else if (j->joined) {
		/* part of this host's group left: the job cannot go on as it was */
		j->ready = false;
	}
}

void
job_break(struct ringd *rd, struct job *j)
{
	int r;

	if (j->world == 0 || j->host_of == NULL)
		return;
	for (r = 0; r < j->world; r++)
		if (j->host_of[r] != -1 && j->host_of[r] != rd->rank) {
			j->host_of[r] = -1;
			j->nplaced--;
		}
	memset(j->gone, 0, (size_t)rd->world);
	j->ready = false;
	j->rx_consumed += evbuffer_get_length(j->stash);
	evbuffer_drain(j->stash, evbuffer_get_length(j->stash));
	if (j->nloc == 0 && j->active == NULL) {
		j->world = 0;
		j->nplaced = 0;
	}
}

/* The ring (re)formed: announce what we hold, in case a JOIN could not go. */
void
job_ring_up(struct ringd *rd)
{
	struct job *j;

	TAILQ_FOREACH(j, &rd->jobs, entry)
		if (j->joined)
			send_membership(rd, j, PROTO_F_JOIN, 0);
}

/* A job-level ABORT going round: some host found the job cannot form. */
static int
job_rx_abort(struct ringd *rd, struct link *l, const struct proto_frame *f, const uint8_t *pl)
{
	int origin = PROTO_ROUTE_SRC(f->route);
	char text[PROTO_TEXT_MAX + 1];
	int32_t code;
	struct job *j;

	if (l->dir != LINK_PREV || origin >= rd->world ||
	    proto_decode_reason(pl, f->length, &code, text, sizeof(text)) != 0) {
		snprintf(l->last_error, sizeof(l->last_error), "malformed abort frame");
		return RX_ERROR;
	}
	if (origin == rd->rank)
		return RX_DONE;
	if ((rd->rank + 1) % rd->world != origin && rd->next != NULL)
		link_send(rd->next, f, pl);
	if ((j = job_wire(rd, f->job)) != NULL)
		job_fail_form(rd, j, false, "%s", text);
	return RX_DONE;
}

int
job_rx(struct ringd *rd, struct link *l, const struct proto_frame *f, const uint8_t *pl)
{
	static struct proto_join m;
	int origin = PROTO_ROUTE_SRC(f->route), r;
	struct job *j;

	if (f->type == PROTO_F_ABORT)
		return job_rx_abort(rd, l, f, pl);

	if (l->dir != LINK_PREV || origin >= rd->world || proto_decode_join(pl, f->length, &m) != 0 ||
	    (int)m.host != origin || proto_job_id(m.job) != f->job) {
		snprintf(l->last_error, sizeof(l->last_error), "malformed %s frame",
			 proto_frame_type_name(f->type));
		return RX_ERROR;
	}
	if (origin == rd->rank)
		return RX_DONE;	/* it went all the way round */
	if ((rd->rank + 1) % rd->world != origin && rd->next != NULL)
		link_send(rd->next, f, pl);
	if ((j = job_wire(rd, f->job)) == NULL)
		return RX_DONE;	/* past max_jobs: we can only pass it on */
	if (j->name[0] == '\0')
		snprintf(j->name, sizeof(j->name), "%s", m.job);
	if (f->type == PROTO_F_LEAVE) {
		/* A host that left may just have finished its part (a broadcast root,
		 * the first to complete): the others go on with what it called; an op
		 * it never called fails now. */
		struct op *op = j->active;

		j->gone[origin] = 1;
		j->gone_seq[origin] = m.gen;
		if (op != NULL && !op->finished && op->fp.coll != PROTO_COLL_SEND &&
		    (uint32_t)op->fp.seq > m.gen) {
			char fp[160];

			op->from_wire = true;
			op_finish(rd, op, RING_EABORTED, "%s cannot complete: a process of this "
				  "job on host %d left after #%u", proto_fp_format(&op->fp, fp,
				  sizeof(fp)), origin, m.gen);
		}
		job_maybe_reset(rd, j);
		return RX_DONE;
	}
	if (j->gone[origin])
		unplace_host(j, origin);	/* it is back: a new formation */
	if (j->world == 0 && set_world(j, (int)m.world) != 0)
		return RX_DONE;
	if ((int)m.world != j->world) {
		job_fail_form(rd, j, true, "host %d says world size %u, host %d says %d (with "
			      "unequal processes per host, give the launcher's RANK and "
			      "WORLD_SIZE)", origin, m.world, rd->rank, j->world);
		return RX_DONE;
	}
	for (r = 0; r < (int)m.nranks; r++) {
		int rank = (int)m.ranks[r];

		if (j->host_of[rank] == -1) {
			j->host_of[rank] = origin;
			j->nplaced++;
		} else if (j->host_of[rank] != origin) {
			job_fail_form(rd, j, true, "rank %d is claimed by host %d and host %d",
				      rank, j->host_of[rank], origin);
			return RX_DONE;
		}
	}
	job_check_ready(rd, j);
	return RX_DONE;
}
