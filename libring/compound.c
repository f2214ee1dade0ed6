/*
 * compound.c - compound requests (internal.h's struct lr_compound): an
 * operation that runs as requests of its own, its parts, issued in stages
 * (exchange.c's all-to-all: the fingerprint's barrier, then the sends and
 * receives; sendrecv: one stage of two).  The compound has no plan and never
 * joins the engine's active list; it moves as its parts complete (each part's
 * on_done, which the engine in req.c calls), and is complete once the last
 * has.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Every part of the compound is complete: so is it. */
static void
compound_finish(struct ring_request *r)
{
	struct lr_compound *x = r->cpd;

	r->status = x->status;
	if (x->status == 0)
		r->err[0] = '\0';
	else if (r->err[0] == '\0')	/* failed before any part could say why */
		lr_req_err(r, "%s: %s", r->fn, ring_strerror(x->status));
	r->state = LR_REQ_DONE;
	if (r->freed)
		lr_req_release(r);
}

/* The running stage is over: the next one is issued, or failed unissued after
 * a failure; after the last the compound is complete. */
static void
compound_next(struct ring_request *r)
{
	struct lr_compound *x = r->cpd;
	struct ring_request *p;
	size_t i;
	int s;

	for (s = x->stage + 1; s < LR_STAGES; s++) {
		x->stage = s;
		if (x->status == 0 && x->npart[s] > 0) {
			x->pending = x->npart[s];
			for (i = 0; i < x->npart[s]; i++)
				if (x->part[s][i] != NULL)
					lr_req_activate(x->part[s][i], 0, NULL);
			return;
		}
		for (i = 0; i < x->npart[s]; i++) {
			p = x->part[s][i];
			p->parent = NULL;
			p->on_done = NULL;
			lr_req_complete_member(p, x->status, r->err);
		}
	}
	compound_finish(r);
}

/* A part completed (its on_done): the compound moves on when its stage is
 * over. */
static void
compound_part_done_cb(struct ring_request *part)
{
	struct ring_request *r = part->parent;
	struct lr_compound *x = r->cpd;
	size_t i;

	part->parent = NULL;
	part->on_done = NULL;
	/* it frees itself now (freed): the compound must not look at it again,
	 * as ring_wait does while the stage's other parts still run */
	for (i = 0; i < x->npart[x->stage]; i++)
		if (x->part[x->stage][i] == part)
			x->part[x->stage][i] = NULL;
	if (part->status && !x->status) {
		x->status = part->status;
		lr_req_err(r, "%s: %s", r->fn, part->err);
	}
	if (--x->pending == 0)
		compound_next(r);
}

struct ring_request *
lr_req_compound(struct ring_comm *c, const char *fn, struct lr_compound *cpd)
{
	struct ring_request *r = lr_req_alloc(c, fn), *p;
	size_t i;
	int s;

	if (!r) {
		/* the parts go on and are freed when they end; nobody waits */
		for (s = 0; s < LR_STAGES; s++)
			for (i = 0; i < cpd->npart[s]; i++) {
				p = cpd->part[s][i];
				if (p->state == LR_REQ_DONE)
					lr_req_release(p);
				else if (p->state == LR_REQ_GROUPED && s > 0)
					lr_req_complete_member(p, RING_ENOMEM, "out of memory");
				else
					p->freed = true;
			}
		free(cpd->part[0]);
		free(cpd->part[1]);
		free(cpd);
		return NULL;
	}
	r->cpd = cpd;
	r->state = LR_REQ_COMPOUND;
	cpd->stage = 0;
	cpd->pending = 0;
	for (s = 0; s < LR_STAGES; s++)
		for (i = 0; i < cpd->npart[s]; i++) {
			p = cpd->part[s][i];
			p->freed = true;
			if (p->state == LR_REQ_DONE) {	/* ended within its issue */
				if (p->status && !cpd->status) {
					cpd->status = p->status;
					lr_req_err(r, "%s: %s", fn, p->err);
				}
				lr_req_release(p);
				cpd->part[s][i] = NULL;
				continue;
			}
			p->parent = r;
			p->on_done = compound_part_done_cb;
			if (s == 0)
				cpd->pending++;
		}
	if (cpd->pending == 0)
		compound_next(r);
	return r;
}
