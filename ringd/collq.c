/*
 * collq.c - a job's collectives on this host, in sequence order: the queue, the
 * active one (its first, which the ring runs), their numbers, and the aborts
 * another host sent for ones not started here yet.  The job's part
 * JOB_PART_COLLQ; coll.c runs what is queued here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"

struct collq {
	struct op *active;		/* the first of colls: the one the ring runs */
	struct opq colls;		/* collectives asked for here, in sequence order */
	int ncolls;			/* their number (at most COLL_QUEUE_MAX) */
	uint64_t next_seq;		/* sequence number of the next collective */
	uint64_t last_done_seq;		/* last one completed here */
	/* ops another host failed before they started here, by seq modulo
	 * JOB_ABORTS */
	struct job_abort {
		uint64_t seq;		/* 0: none */
		uint32_t gen;		/* the formation it belongs to */
		int code;
		char text[PROTO_TEXT_MAX + 1];
	} aborts[JOB_ABORTS];
};

static struct collq *
cq(const struct job *j)
{
	return job_part(j, JOB_PART_COLLQ);
}

static void *
collq_make(struct ringd *rd)
{
	struct collq *q = calloc(1, sizeof(*q));

	(void)rd;
	if (q != NULL) {
		TAILQ_INIT(&q->colls);
		q->next_seq = 1;
	}
	return q;
}

static bool
collq_idle(const void *part)
{
	const struct collq *q = part;

	return TAILQ_EMPTY(&q->colls);
}

const struct job_part collq_part = {
	.name = "collectives",
	.make = collq_make,
	.free = free,
	.idle = collq_idle,
};

struct op *
coll_active(const struct job *j)
{
	return cq(j)->active;
}

struct op *
coll_first(const struct job *j)
{
	return TAILQ_FIRST(&cq(j)->colls);
}

struct op *
coll_find(const struct job *j, uint64_t seq)
{
	struct op *op;

	OPQ_FOREACH(op, &cq(j)->colls)
		if (op_fp(op)->seq == seq)
			return op;
	return NULL;
}

int
coll_queued(const struct job *j)
{
	return cq(j)->ncolls;
}

uint64_t
coll_next_seq(const struct job *j)
{
	return cq(j)->next_seq;
}

uint64_t
coll_last_done(const struct job *j)
{
	return cq(j)->last_done_seq;
}

void
collq_push(struct job *j, struct op *op)
{
	struct collq *q = cq(j);
	uint64_t seq = q->next_seq++;
	struct job_abort *a = &q->aborts[seq % JOB_ABORTS];

	op_set_seq(op, seq);
	op_enqueue(op, &q->colls);
	q->ncolls++;
	if (a->seq == seq && a->gen == op_gen(op)) {
		/* another host failed it already: same answer here, and the ranks
		 * that call it now hear that they came after (the reason may say
		 * they never called it: they had not, then) */
		char text[PROTO_TEXT_MAX + 1];

		snprintf(text, sizeof(text),
			 "%.*s (it had failed on another host before "
			 "it was called here)",
			 PROTO_TEXT_MAX - 64, a->text);
		op_fail_early(op, a->code, text);
		a->seq = 0;
	}
}

struct op *
collq_activate(struct job *j)
{
	struct collq *q = cq(j);

	q->active = TAILQ_FIRST(&q->colls);
	return q->active;
}

void
collq_remove(struct job *j, struct op *op)
{
	struct collq *q = cq(j);

	if (q->active == op && op_status(op) == 0)
		q->last_done_seq = op_fp(op)->seq;
	op_dequeue(op);
	q->ncolls--;
	if (q->active == op)
		q->active = NULL;
}

void
collq_restart(struct job *j, uint32_t gen, bool later)
{
	struct collq *q = cq(j);
	int i;

	q->next_seq = 1;
	q->last_done_seq = 0;
	for (i = 0; i < JOB_ABORTS; i++)
		if (later ? !proto_gen_after(q->aborts[i].gen, gen) : q->aborts[i].gen != gen)
			q->aborts[i].seq = 0;
}

int
collq_noted_abort(const struct job *j, uint64_t seq, uint32_t gen, char *text, size_t cap)
{
	const struct job_abort *a = &cq(j)->aborts[seq % JOB_ABORTS];

	if (a->seq != seq || a->gen != gen)
		return 0;
	snprintf(text, cap, "%s", a->text);
	return a->code;
}

void
collq_note_abort(struct job *j, uint64_t seq, uint32_t gen, int code, const char *text)
{
	struct job_abort *a = &cq(j)->aborts[seq % JOB_ABORTS];

	a->seq = seq;
	a->gen = gen;
	a->code = code;
	snprintf(a->text, sizeof(a->text), "%s", text);
}
