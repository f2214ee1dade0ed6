/*
 * copy.c - the copy engines of the staging pipeline (see internal.h): the host
 * engine (synchronous memcpy, what ordinary host buffers outside the arena go
 * through), the CPU engine of the tests, and the staging slots that staged
 * engines keep across calls.  The CUDA engine lives in coll_cuda.c, built only
 * with CUDA.
 *
 * The slots of a staged engine are pinned (page-locked) once and kept, because
 * pinning costs about as much as copying the memory: doing it per call would
 * cost what the pipeline hides.  They grow to the largest call seen (at most
 * two pieces plus an all-gather's send part each), and are released by
 * ring_close or when a call needs larger ones.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- the host engine ---- */

static int
host_copy(struct lr_copier *cp, void *dst, const void *src, size_t n,
	  enum lr_copy_dir dir)
{
	memcpy(dst, src, n);
	return 0;
}

static int
host_nop_slot(struct lr_copier *cp, int slot)
{
	return 0;
}

static int
host_nop(struct lr_copier *cp)
{
	return 0;
}

static const struct lr_copier_ops host_ops = {
	.copy = host_copy, .mark = host_nop_slot, .wait = host_nop_slot, .drain = host_nop,
};

struct lr_copier lr_copier_host = { .ops = &host_ops, .staged = false };

/* ---- the CPU engine of the tests ---- */

struct lr_cpu_copy {
	void *dst;
	const void *src;
	size_t n;
};

static struct lr_copier_cpu *
cpu_of(struct lr_copier *cp)
{
	return (struct lr_copier_cpu *)(void *)cp;
}

/* Runs the queued copies up to (not including) index upto. */
static void
cpu_run(struct lr_copier_cpu *x, size_t upto)
{
	size_t i;

	for (i = 0; i < upto && i < x->nq; i++)
		memcpy(x->q[i].dst, x->q[i].src, x->q[i].n);
	if (upto >= x->nq) {
		x->nq = 0;
	} else {
		memmove(x->q, x->q + upto, (x->nq - upto) * sizeof(*x->q));
		x->nq -= upto;
	}
	for (i = 0; i < 2; i++)
		x->fence[i] = x->fence[i] > upto ? x->fence[i] - upto : 0;
}

static int
cpu_copy(struct lr_copier *cp, void *dst, const void *src, size_t n,
	 enum lr_copy_dir dir)
{
	struct lr_copier_cpu *x = cpu_of(cp);

	x->copies++;
	if (x->on_copy)
		x->on_copy(x->copies, x->arg);
	if (x->fail_copy && x->copies == x->fail_copy) {
		snprintf(cp->err, sizeof(cp->err), "copy %ld of %zu bytes %s failed (injected "
			 "by the test)", x->copies, n, dir == LR_COPY_IN ? "in" :
			 dir == LR_COPY_OUT ? "out" : "between buffers");
		return RING_EDEVICE;
	}
	if (!x->deferred) {
		memcpy(dst, src, n);
		return 0;
	}
	if (x->nq == x->capq) {
		size_t cap = x->capq ? 2 * x->capq : 64;
		struct lr_cpu_copy *q = realloc(x->q, cap * sizeof(*q));

		if (!q) {
			snprintf(cp->err, sizeof(cp->err), "out of memory queueing a copy");
			return RING_ENOMEM;
		}
		x->q = q;
		x->capq = cap;
	}
	x->q[x->nq++] = (struct lr_cpu_copy){ .dst = dst, .src = src, .n = n };
	return 0;
}

static int
cpu_mark(struct lr_copier *cp, int slot)
{
	cpu_of(cp)->fence[slot] = cpu_of(cp)->nq;
	return 0;
}

static int
cpu_wait(struct lr_copier *cp, int slot)
{
	struct lr_copier_cpu *x = cpu_of(cp);

	x->waits++;
	if (x->fail_wait && x->waits == x->fail_wait) {
		/* as an asynchronous CUDA error: the copies are over, badly */
		cpu_run(x, x->nq);
		snprintf(cp->err, sizeof(cp->err), "wait %ld for slot %d failed (injected by "
			 "the test)", x->waits, slot);
		return RING_EDEVICE;
	}
	cpu_run(x, x->fence[slot]);
	return 0;
}

static int
cpu_drain(struct lr_copier *cp)
{
	cpu_run(cpu_of(cp), cpu_of(cp)->nq);
	return 0;
}

static int
cpu_pin(struct lr_copier *cp, void *p, size_t n)
{
	cpu_of(cp)->pins++;
	return 0;
}

static const struct lr_copier_ops cpu_ops = {
	.copy = cpu_copy, .mark = cpu_mark, .wait = cpu_wait, .drain = cpu_drain,
	.pin = cpu_pin,
};

void
lr_copier_cpu_init(struct lr_copier_cpu *cp)
{
	memset(cp, 0, sizeof(*cp));
	cp->base.ops = &cpu_ops;
	cp->base.staged = true;
}

void
lr_copier_cpu_reset(struct lr_copier_cpu *cp)
{
	free(cp->q);
	cp->q = NULL;
	cp->nq = cp->capq = 0;
}

size_t
lr_copier_cpu_pending(const struct lr_copier_cpu *cp)
{
	return cp->nq;
}

/* ---- the kept staging slots ---- */

void
lr_stage_release(struct ring_comm *c)
{
	int i;

	for (i = 0; i < 2; i++) {
		if (!c->stage.buf[i])
			continue;
		if (c->stage.unpin)
			c->stage.unpin(c->stage.buf[i]);
		lr_arena_free(&c->arena, c->stage.buf[i]);
		c->stage.buf[i] = NULL;
	}
	c->stage.bytes = 0;
	c->stage.unpin = NULL;
	c->stage.owner = NULL;
}

int
lr_stage_get(struct ring_comm *c, struct lr_copier *cp, size_t bytes, int nslots,
	     uint8_t *out[2], const char *fn, char *err, size_t cap)
{
	size_t want = bytes;
	int i;

	/* Always two slots, grown at least twofold, so a run of calls of mixed
	 * sizes pins a handful of times, not once per call. */
	if (c->stage.bytes < bytes || (c->stage.buf[0] && c->stage.owner != cp->ops)) {
		if (c->stage.owner == cp->ops && want < 2 * c->stage.bytes)
			want = 2 * c->stage.bytes;
		lr_stage_release(c);
		for (i = 0; i < 2; i++) {
			c->stage.buf[i] = lr_arena_alloc(&c->arena, want);
			if (!c->stage.buf[i] && want > bytes)
				c->stage.buf[i] = lr_arena_alloc(&c->arena, want = bytes);
			if (!c->stage.buf[i]) {
				lr_stage_release(c);
				snprintf(err, cap, "%s: staging device buffers needs 2 arena "
					 "blocks of %zu bytes, but the largest free one is %zu of "
					 "%zu bytes (raise RING_ARENA_MB)", fn, bytes,
					 lr_arena_largest(&c->arena), lr_arena_usable(&c->arena));
				return RING_ENOMEM;
			}
			if (cp->ops->pin && cp->ops->pin(cp, c->stage.buf[i], want) == 0 &&
			    cp->ops->unpin)
				c->stage.unpin = cp->ops->unpin;
		}
		c->stage.bytes = want;
		c->stage.owner = cp->ops;
	}
	out[0] = c->stage.buf[0];
	out[1] = nslots == 2 ? c->stage.buf[1] : NULL;
	return 0;
}

/* The _cuda calls' engine, for the calls this thread makes inside them. */
static __thread struct lr_copier *lr_tls_copier;

void
lr_comm_set_copier(struct ring_comm *c, struct lr_copier *cp)
{
	c->copier = cp;
}

void
lr_thread_set_copier(struct lr_copier *cp)
{
	lr_tls_copier = cp;
}

struct lr_copier *
lr_copier_for(const struct ring_comm *c)
{
	if (lr_tls_copier)
		return lr_tls_copier;
	return c->copier ? c->copier : &lr_copier_host;
}
