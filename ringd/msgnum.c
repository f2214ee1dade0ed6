/*
 * msgnum.c - the numbers of a job's messages between each pair of ranks, and
 * the messages one side gave up on.
 *
 * A send and a receive meet by their numbers: the nth send from rank s to rank
 * d (in one matching context) is message n of that pair, and so is the nth
 * receive at d from s.  Each host numbers the sends and receives of its own
 * ranks; the numbers start again with each formation.  A side that gives up
 * on message n (its send or receive timed out) leaves a *failure* where the
 * other side will come for it: that side's send, receive or RTS of message n
 * then fails at once with the reason, rather than meeting message n + 1 and
 * putting the pair one message out of step for good.  Both are p2p.c's; this
 * file keeps their tables, bounded by the ranks and the failures a job may
 * have (MSGNUM_FAILED_MAX).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "../proto/log.h"

/* Failures kept per job: the oldest goes first (its pair may then go out of
 * step, as before there were failures kept). */
#define MSGNUM_FAILED_MAX 256

/* One pair of ranks in one context, as numbered here. */
struct msgnum_pair {
	uint32_t src, dst, comm;
	uint64_t sent;   /* sends from src posted here */
	uint64_t posted; /* receives at dst posted here */
	bool used;       /* the slot holds a pair */
};

/* Message n of a pair, given up on by one side. */
struct msgnum_failed {
	uint32_t src, dst, comm;
	uint64_t n;
	int status;             /* RING_E* */
	char text[MSGNUM_TEXT]; /* why (the side's own message) */
	TAILQ_ENTRY(msgnum_failed) entry;
};

struct msgnum {
	struct msgnum_pair *pairs; /* open addressing, by pair_hash */
	uint32_t cap, npairs;      /* slots (a power of two, or 0), pairs */
	TAILQ_HEAD(, msgnum_failed) failed;
	int nfailed;
};

struct msgnum *
msgnum_make(void)
{
	struct msgnum *t = calloc(1, sizeof(*t));

	if (t != NULL)
		TAILQ_INIT(&t->failed);
	return t;
}

void
msgnum_reset(struct msgnum *t)
{
	struct msgnum_failed *f;

	free(t->pairs);
	t->pairs = NULL;
	t->cap = t->npairs = 0;
	while ((f = TAILQ_FIRST(&t->failed)) != NULL) {
		TAILQ_REMOVE(&t->failed, f, entry);
		free(f);
	}
	t->nfailed = 0;
}

void
msgnum_free(struct msgnum *t)
{
	if (t == NULL)
		return;
	msgnum_reset(t);
	free(t);
}

static uint32_t
pair_hash(const struct proto_rts *r)
{
	uint32_t h = r->src * 0x9e3779b1u ^ r->dst * 0x85ebca6bu ^ r->comm * 0xc2b2ae35u;

	return h ^ (h >> 15);
}

static bool
pair_is(const struct msgnum_pair *p, const struct proto_rts *r)
{
	return p->used && p->src == r->src && p->dst == r->dst && p->comm == r->comm;
}

/* The slot of r's pair, or of the free one where it would go. */
static struct msgnum_pair *
pair_slot(const struct msgnum *t, const struct proto_rts *r)
{
	uint32_t i = pair_hash(r) & (t->cap - 1);

	while (t->pairs[i].used && !pair_is(&t->pairs[i], r))
		i = (i + 1) & (t->cap - 1);
	return &t->pairs[i];
}

/* Twice the slots (at half full, so a probe always ends). */
static int
pairs_grow(struct msgnum *t)
{
	uint32_t cap = t->cap ? 2 * t->cap : 16, oldcap = t->cap, i;
	struct msgnum_pair *old = t->pairs, *n = calloc(cap, sizeof(*n));

	if (n == NULL)
		return -1;
	t->pairs = n;
	t->cap = cap;
	for (i = 0; i < oldcap; i++)
		if (old[i].used)
			*pair_slot(t, &(struct proto_rts){ .src = old[i].src,
							   .dst = old[i].dst,
							   .comm = old[i].comm }) = old[i];
	free(old);
	return 0;
}

static struct msgnum_pair *
pair_find(const struct msgnum *t, const struct proto_rts *r)
{
	struct msgnum_pair *p;

	if (t->cap == 0)
		return NULL;
	p = pair_slot(t, r);
	return p->used ? p : NULL;
}

uint64_t
msgnum_next(struct msgnum *t, const struct proto_rts *r, bool send)
{
	struct msgnum_pair *p = pair_find(t, r);

	if (p == NULL) {
		if (2 * (t->npairs + 1) > t->cap && pairs_grow(t) != 0)
			return 0;
		p = pair_slot(t, r);
		*p = (struct msgnum_pair){
			.src = r->src, .dst = r->dst, .comm = r->comm, .used = true
		};
		t->npairs++;
	}
	return send ? ++p->sent : ++p->posted;
}

uint64_t
msgnum_count(const struct msgnum *t, const struct proto_rts *r, bool send)
{
	const struct msgnum_pair *p = pair_find(t, r);

	if (p == NULL)
		return 0;
	return send ? p->sent : p->posted;
}

static bool
failed_is(const struct msgnum_failed *f, const struct proto_rts *r, uint64_t n)
{
	return f->n == n && f->src == r->src && f->dst == r->dst && f->comm == r->comm;
}

void
msgnum_fail(struct msgnum *t, const struct proto_rts *r, uint64_t n, int status, const char *text)
{
	struct msgnum_failed *f;

	TAILQ_FOREACH(f, &t->failed, entry)
		if (failed_is(f, r, n))
			return; /* the first reason stands */
	if (t->nfailed >= MSGNUM_FAILED_MAX) {
		f = TAILQ_FIRST(&t->failed);
		log_warn("message #%llu from rank %u to rank %u: its failure is forgotten "
			 "(%d failed messages are kept per job)",
			 (unsigned long long)f->n, f->src, f->dst, MSGNUM_FAILED_MAX);
		TAILQ_REMOVE(&t->failed, f, entry);
		t->nfailed--;
	} else if ((f = malloc(sizeof(*f))) == NULL) {
		return;
	}
	*f = (struct msgnum_failed){
		.src = r->src, .dst = r->dst, .comm = r->comm, .n = n, .status = status
	};
	snprintf(f->text, sizeof(f->text), "%s", text);
	TAILQ_INSERT_TAIL(&t->failed, f, entry);
	t->nfailed++;
}

int
msgnum_take(struct msgnum *t, const struct proto_rts *r, uint64_t n, char *text, size_t cap)
{
	struct msgnum_failed *f;
	int status;

	TAILQ_FOREACH(f, &t->failed, entry)
		if (failed_is(f, r, n))
			break;
	if (f == NULL)
		return 0;
	status = f->status;
	snprintf(text, cap, "%s", f->text);
	TAILQ_REMOVE(&t->failed, f, entry);
	t->nfailed--;
	free(f);
	return status;
}
