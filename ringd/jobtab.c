/*
 * jobtab.c - the job record and the daemon's table of jobs: found by id, made on
 * first sight (from a client's attach or a frame of the wire) with a part for
 * each room of the engine that keeps state of it, and forgotten once it is
 * over here: no process of it attached, no formation known, nothing of it in
 * flight.  What its parts may still hold then (frames of a formation that
 * will never form here, a message no receive will take) goes with it.  A
 * sweep from the loop forgets such a job JOB_LINGER_MS after it was first
 * found over, and at max_jobs a new job takes the place of one over at once;
 * so the table holds what `ringctl status` and the metrics count, and a
 * long-lived daemon serves any number of jobs one after another.  The bottom
 * of the engine: the rooms above read a job through the functions here, and
 * keep their own state of it in their part.
 */
#include <stdio.h>
#include <stdlib.h>

#include "jobrec.h"

/*
 * How long a job stays in the table after it was found over, and how often
 * the table looks.  The record remembers the job's last formation (frames of
 * it still on the way are dropped, not taken for the next) and why it could
 * not form (told to the processes of a failed start that come late); a few
 * seconds cover both, and a job that comes back within them finds it.
 */
#define JOB_LINGER_MS 5000
#define JOB_SWEEP_MS 1000

/* The table's own state beside rd->jobs: the sweep's timer. */
struct jobtab {
	struct timer *sweep; /* forgets the jobs that are over */
	bool armed;          /* ... and is due */
};

void *
job_part(const struct job *j, int which)
{
	return j->part[which];
}

struct job *
job_lookup(struct ringd *rd, uint32_t id)
{
	struct job *j;

	TAILQ_FOREACH(j, &rd->jobs, entry)
		if (j->id == id)
			return j;
	return NULL;
}

struct job *
job_first(const struct ringd *rd)
{
	return TAILQ_FIRST(&rd->jobs);
}

struct job *
job_next(const struct job *j)
{
	return TAILQ_NEXT(j, entry);
}

void
job_rotate(struct ringd *rd)
{
	struct job *first = TAILQ_FIRST(&rd->jobs);

	if (first != NULL && TAILQ_NEXT(first, entry) != NULL) {
		TAILQ_REMOVE(&rd->jobs, first, entry);
		TAILQ_INSERT_TAIL(&rd->jobs, first, entry);
	}
}

static bool
held_none(const struct ringd *rd, const struct job *j)
{
	int h;

	for (h = 0; h < rd->world; h++)
		if (j->host[h].held != NULL)
			return false;
	return true;
}

/* The first part of the job with something in flight (-1: none). */
static int
part_busy(const struct ringd *rd, const struct job *j)
{
	int k;

	for (k = 0; k < JOB_NPARTS; k++)
		if (rd->eng->parts[k]->idle != NULL && !rd->eng->parts[k]->idle(j->part[k]))
			return k;
	return -1;
}

/* A job that is over here: no process, no formation known, no JOIN held for
 * the next, nothing in flight.  What waits in its parts can never be taken:
 * frames and messages come only to a host whose processes claimed their ranks
 * in the formation they belong to, which makes the formation known here (world)
 * until it has dissolved. */
static bool
job_idle(const struct ringd *rd, const struct job *j)
{
	return j->nloc == 0 && j->world == 0 && part_busy(rd, j) < 0 && held_none(rd, j);
}

void
job_want(struct ringd *rd, struct job *j, unsigned what)
{
	j->work |= what;
	if (!j->working) {
		j->working = true;
		TAILQ_INSERT_TAIL(&rd->work, j, work_entry);
	}
}

void
job_want_all(struct ringd *rd, unsigned what)
{
	rd->work_all |= what;
}

struct job *
job_work_next(struct ringd *rd, unsigned *what)
{
	struct job *j = TAILQ_FIRST(&rd->work);

	if (j == NULL)
		return NULL;
	TAILQ_REMOVE(&rd->work, j, work_entry);
	j->working = false;
	*what = j->work;
	j->work = 0;
	return j;
}

bool
job_take_all(struct ringd *rd, unsigned what)
{
	if (!(rd->work_all & what))
		return false;
	rd->work_all &= ~what;
	return true;
}

bool
job_work_pending(const struct ringd *rd)
{
	return !TAILQ_EMPTY(&rd->work) || rd->work_all != 0;
}

static void
job_free(struct ringd *rd, struct job *j)
{
	int h, k;

	if (j->working)
		TAILQ_REMOVE(&rd->work, j, work_entry);
	if (j->entry.tqe_prev != NULL) {
		TAILQ_REMOVE(&rd->jobs, j, entry);
		rd->njobs--;
	}
	job_members_free(j);
	for (k = 0; k < JOB_NPARTS; k++)
		if (j->part[k] != NULL)
			rd->eng->parts[k]->free(j->part[k]);
	free(j->host_of);
	free(j->loc);
	free(j->grow_offer);
	if (j->host != NULL)
		for (h = 0; h < rd->world; h++)
			free(j->host[h].held);
	free(j->host);
	free(j);
}

/* Forgets the jobs that are over (linger: those over for JOB_LINGER_MS);
 * whether one over is left for later.  Never called with a job on the stack:
 * from the loop (the sweep), or before a job is made. */
static bool
job_gc(struct ringd *rd, bool linger)
{
	uint64_t now = now_ms();
	struct job *j, *nx;
	bool left = false;

	for (j = TAILQ_FIRST(&rd->jobs); j != NULL; j = nx) {
		nx = TAILQ_NEXT(j, entry);
		if (!job_idle(rd, j)) {
			j->over = false;
			continue;
		}
		if (!j->over) {
			j->over = true;
			j->over_ms = now;
		}
		if (!linger || now - j->over_ms >= JOB_LINGER_MS)
			job_free(rd, j);
		else
			left = true;
	}
	return left;
}

static void
job_sweep_cb(void *arg)
{
	struct ringd *rd = arg;

	rd->jobtab->armed = false;
	if (job_gc(rd, true))
		job_table_note(rd, NULL);
}

void
job_table_note(struct ringd *rd, struct job *j)
{
	struct jobtab *t = rd->jobtab;

	if (j != NULL)
		j->over = false; /* over from now on, if it is */
	if (t == NULL) {
		if ((t = calloc(1, sizeof(*t))) == NULL)
			return;
		if ((t->sweep = timer_new(rd, job_sweep_cb, rd)) == NULL) {
			free(t);
			return;
		}
		rd->jobtab = t;
	}
	if (!t->armed) {
		t->armed = true;
		timer_add(t->sweep, JOB_SWEEP_MS);
	}
}

int
job_table_busy(const struct ringd *rd, char *why, size_t len)
{
	const struct job *j;
	int n = 0, k;

	TAILQ_FOREACH(j, &rd->jobs, entry)
		if (!job_idle(rd, j) && n++ == 0) {
			k = part_busy(rd, j);
			snprintf(why, len, "job %08x: %d process(es), world %d, %s%s%s", j->id,
				 j->nloc, j->world, k >= 0 ? rd->eng->parts[k]->name : "",
				 k >= 0 ? " " : "", held_none(rd, j) ? "" : "held joins");
		}
	return n;
}

void
job_table_free(struct ringd *rd)
{
	while (!TAILQ_EMPTY(&rd->jobs))
		job_free(rd, TAILQ_FIRST(&rd->jobs));
	if (rd->jobtab != NULL) {
		timer_free(rd->jobtab->sweep);
		free(rd->jobtab);
		rd->jobtab = NULL;
	}
}

int
job_table_count(const struct ringd *rd)
{
	return rd->njobs;
}

struct job *
job_wire(struct ringd *rd, uint32_t id)
{
	struct job *j = job_lookup(rd, id);
	int k;

	if (j != NULL)
		return j;
	if (rd->njobs >= rd->cfg.max_jobs)
		(void)job_gc(rd, false); /* room for this one now */
	if (rd->njobs >= rd->cfg.max_jobs)
		return NULL;
	if ((j = calloc(1, sizeof(*j))) == NULL)
		return NULL;
	j->id = id;
	j->pos = -1;
	j->next_host = j->prev_host = -1;
	j->host = calloc((size_t)rd->world, sizeof(*j->host));
	for (k = 0; j->host != NULL && k < rd->world; k++)
		j->host[k].pos = -1;
	for (k = 0; k < JOB_NPARTS && j->host != NULL; k++)
		if ((j->part[k] = rd->eng->parts[k]->make(rd)) == NULL)
			break;
	if (j->host == NULL || k < JOB_NPARTS) {
		job_free(rd, j);
		return NULL;
	}
	TAILQ_INSERT_TAIL(&rd->jobs, j, entry);
	rd->njobs++;
	job_table_note(rd, j); /* a frame's job may be over at once (dropped) */
	return j;
}

int
job_host_of(const struct job *j, int rank)
{
	if (rank < 0 || rank >= j->world || j->host_of == NULL)
		return -1;
	return j->host_of[rank];
}

void
job_members_free(struct job *j)
{
	int i;

	for (i = 0; i < j->nhosts && j->hosts != NULL; i++)
		j->host[j->hosts[i]].pos = -1;
	for (i = 0; i < j->nhosts && j->hranks != NULL; i++)
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

uint32_t
job_id(const struct job *j)
{
	return j->id;
}

const char *
job_name(const struct job *j)
{
	return j->name;
}

uint32_t
job_gen(const struct job *j)
{
	return j->fgen;
}

bool
job_ready(const struct job *j)
{
	return j->ready;
}

bool
job_formed(const struct job *j)
{
	return j->formed;
}

bool
job_broken(const struct job *j)
{
	return j->broken;
}

const char *
job_broke_why(const struct job *j)
{
	return j->broken ? j->broke_why : "";
}

const char *
job_error(const struct job *j)
{
	return j->error;
}

int
job_world(const struct job *j)
{
	return j->world;
}

int
job_nplaced(const struct job *j)
{
	return j->nplaced;
}

int
job_nhosts(const struct job *j)
{
	return j->nhosts;
}

int
job_member(const struct job *j, int i)
{
	return j->hosts[i];
}

int
job_member_nranks(const struct job *j, int i)
{
	return j->nhranks[i];
}

int
job_host_pos(const struct job *j, int h)
{
	return h >= 0 && j->host != NULL ? j->host[h].pos : -1;
}

int
job_pos(const struct job *j)
{
	return j->pos;
}

int
job_next_host(const struct job *j)
{
	return j->next_host;
}

int
job_prev_host(const struct job *j)
{
	return j->prev_host;
}

void
job_plan_hosts(const struct job *j, struct plan_hosts *h)
{
	*h = (struct plan_hosts){ .pos = j->pos,
				  .nhosts = j->nhosts,
				  .hosts = j->hosts,
				  .hranks = j->hranks,
				  .nhranks = j->nhranks };
}

void
job_plan_cost(const struct job *j, struct plan_cost *c)
{
	uint32_t hop = 0, mbps = 0;
	int i;

	for (i = 0; i < j->nhosts; i++) {
		const struct job_host *h = &j->host[j->hosts[i]];

		if (h->hop_us > hop)
			hop = h->hop_us;
		if (h->link_mbps > 0 && (mbps == 0 || h->link_mbps < mbps))
			mbps = h->link_mbps;
	}
	c->hop_us = hop;
	c->byte_us = 8.0 / (mbps > 0 ? mbps : 10000);	/* Mbit/s: bits per us */
}

const struct job_host *
job_host(const struct job *j, int h)
{
	return &j->host[h];
}

int
job_local_size(const struct job *j)
{
	return j->local_size;
}

int
job_nloc(const struct job *j)
{
	return j->nloc;
}

struct job_proc *
job_proc(const struct job *j, int lr)
{
	return &j->loc[lr];
}

void
job_proc_done(struct job *j, uint32_t gen, int i, const struct client *s, uint64_t seq)
{
	if (gen == j->fgen && i < j->local_size && j->loc[i].sess == s)
		j->loc[i].done = seq;
}

uint64_t
job_stale(const struct job *j)
{
	return j->stale_frames;
}

void
job_stale_add(struct job *j)
{
	j->stale_frames++;
}

/* One line about the job's membership here, for the simulation's reports:
 * world, placed ranks, processes, the formation's state (the generation we
 * confirmed) and each host's claim and confirmation. */
void
job_describe(const struct ringd *rd, const struct job *j, char *buf, size_t len)
{
	size_t off;
	int h;

	off = (size_t)snprintf(buf, len,
			       "job %s: world %d placed %d loc %d/%d member %d "
			       "fgen %u gen_max %u confirmed %u%s%s%s%s%s claims (/c confirmed "
			       "gen:claim)",
			       j->name, j->world, j->nplaced, j->nloc, j->local_size, j->nmember,
			       j->fgen, j->gen_max, j->confirmed ? j->confirm_gen : 0,
			       j->joined ? " joined" : "", j->formed ? " formed" : "",
			       j->ready ? " ready" : "", j->broken ? " broken" : "",
			       j->error[0] ? " error" : "");
	for (h = 0; h < rd->world && off < len; h++)
		off += (size_t)snprintf(
		    buf + off, len - off, " %u%s%s/c%u:%u", j->host[h].claim_gen,
		    j->host[h].held ? "(held)" : "",
		    j->host[h].gone ? (j->host[h].gone == HOST_GONE ? "(gone)" : "(leaving)") : "",
		    j->host[h].conf_gen, j->host[h].conf_claim);
}
