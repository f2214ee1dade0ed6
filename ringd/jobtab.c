/*
 * jobtab.c - the daemon's table of jobs: found by id, made on first sight (from
 * a client's attach or a frame of the wire), forgotten when nothing refers to
 * them any more and max_jobs is reached.  Below the membership (job.c), the
 * point-to-point engine and the collectives, which all look jobs up here.
 */
#include <stdio.h>
#include <stdlib.h>

#include "coll.h"

struct job *
job_lookup(struct ringd *rd, uint32_t id)
{
	struct job *j;

	TAILQ_FOREACH(j, &rd->jobs, entry)
		if (j->id == id)
			return j;
	return NULL;
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

/* A job nothing refers to any more: no process here, no formation known, nothing
 * in flight or waiting. */
static bool
job_idle(const struct ringd *rd, const struct job *j)
{
	return j->nloc == 0 && j->world == 0 && TAILQ_EMPTY(&j->colls) && flow_stash_empty(j) &&
	       TAILQ_EMPTY(&j->sends) && TAILQ_EMPTY(&j->recvs) && TAILQ_EMPTY(&j->rts_in) &&
	       held_none(rd, j);
}

static void
job_free(struct ringd *rd, struct job *j)
{
	int h;

	TAILQ_REMOVE(&rd->jobs, j, entry);
	rd->njobs--;
	job_members_free(j);
	flow_free(j->flow);
	free(j->host_of);
	free(j->loc);
	for (h = 0; h < rd->world; h++)
		free(j->host[h].held);
	free(j->host);
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
		if (job_idle(rd, j))
			job_free(rd, j);
	}
}

int
job_table_busy(const struct ringd *rd, char *why, size_t len)
{
	const struct job *j;
	int n = 0;

	TAILQ_FOREACH(j, &rd->jobs, entry)
		if (!job_idle(rd, j) && n++ == 0)
			snprintf(why, len, "job %08x: %d process(es), world %d, %s%s%s%s", j->id,
				 j->nloc, j->world, TAILQ_EMPTY(&j->colls) ? "" : "collectives ",
				 flow_stash_empty(j) ? "" : "stash ",
				 TAILQ_EMPTY(&j->sends) && TAILQ_EMPTY(&j->recvs) ? "" : "p2p ",
				 held_none(rd, j) ? "" : "held joins");
	return n;
}

void
job_table_free(struct ringd *rd)
{
	while (!TAILQ_EMPTY(&rd->jobs))
		job_free(rd, TAILQ_FIRST(&rd->jobs));
}

struct job *
job_wire(struct ringd *rd, uint32_t id)
{
	struct job *j = job_lookup(rd, id);
	size_t hosts = (size_t)rd->world;

	if (j != NULL)
		return j;
	if (rd->njobs >= rd->cfg.max_jobs)
		job_gc(rd);
	if (rd->njobs >= rd->cfg.max_jobs)
		return NULL;
	if ((j = calloc(1, sizeof(*j))) == NULL)
		return NULL;
	j->flow = flow_new();
	j->host = calloc(hosts, sizeof(*j->host));
	if (j->flow == NULL || j->host == NULL) {
		flow_free(j->flow);
		free(j->host);
		free(j);
		return NULL;
	}
	j->id = id;
	j->next_seq = 1;
	j->pos = -1;
	j->next_host = j->prev_host = -1;
	TAILQ_INIT(&j->sends);
	TAILQ_INIT(&j->recvs);
	TAILQ_INIT(&j->colls);
	TAILQ_INIT(&j->rts_in);
	flow_reset(rd, j);
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

void
job_members_free(struct job *j)
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

