/*
 * group.c - ring_group_start and ring_group_end, with NCCL's meaning.  Between
 * the outermost start and its end, every operation (blocking or not) is
 * recorded as a request that is not issued (LR_REQ_GROUPED; coll.c's
 * lr_coll_issue records it here); a blocking call returns 0 at once.  At the
 * outermost end the group is issued in call order, all of it before anything
 * is waited for, so its sends and receives are in flight together and never
 * deadlock, whatever their order.
 *
 * Packing.  The fixed cost of an operation (a ring pass, the client's round
 * trip) dwarfs a small all-reduce, so the all-reduces of a group that are at
 * most LR_PACK_MAX_BYTES and share a dtype and an op are packed: their
 * operands are copied into one arena buffer, one all-reduce (the "pack") runs
 * in place on it at the position of its first member, and its result is
 * scattered back to the members when it completes.  Elementwise reductions do
 * not care where an element sits, so every member gets the bits it would have
 * got alone.  The pack's fingerprint count is the group's composition
 * (PROTO_FP_GROUP: how many all-reduces and a hash of their counts), so ranks
 * that packed different all-reduces to the same total get RING_EMISMATCH
 * naming both groups.
 *
 * Failure.  A call of the group that fails its checks returns its error and
 * poisons the group: at the end every collective of the group still goes out,
 * in its place, but with PROTO_OP_F_ABORT (and the failed call's place is
 * filled by an aborting barrier), so every rank's collectives of the group fail
 * at once, naming this rank, and the sequence stays aligned; this rank's own
 * requests fail with the cause.  Sends and receives of a poisoned group are not
 * issued; their peers' matching operations fail by the op timeout, as with a
 * rank that never calls.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "../proto/dtype.h"

int
lr_group_record(struct ring_comm *c, struct ring_request *r)
{
	struct lr_group *g = &c->group;
	struct ring_request **ent;
	size_t cap;

	if (g->n == g->cap) {
		cap = g->cap ? 2 * g->cap : 64;
		ent = realloc(g->ent, cap * sizeof(*ent));
		if (!ent)
			return lr_fail(c, RING_ENOMEM, "%s: out of memory recording the "
				       "operation in its group", r->fn);
		g->ent = ent;
		g->cap = cap;
	}
	g->ent[g->n++] = r;
	return 0;
}

void
lr_group_poison(struct ring_comm *c, int rc, int coll, int dtype, int redop, int root,
		size_t count)
{
	struct lr_group *g = &c->group;
	int base = proto_coll_base(coll), api = coll > PROTO_COLL_MAX ? coll : 0;
	struct ring_request *r;
	struct lr_plan pl;

	if (g->rc == 0) {
		g->rc = rc;
		snprintf(g->err, sizeof(g->err), "an operation of the group failed on this "
			 "rank: %.*s", (int)sizeof(g->err) - 64, c->err);
	}
	if (coll == PROTO_COLL_SEND || coll == PROTO_COLL_RECV)
		return;
	/*
	 * Fill the failed collective's place in the sequence with an aborting one
	 * as like it as its arguments allow: the same kind, dtype, op, root and
	 * count where they are valid, so that it packs (or not) as the other
	 * ranks' call does.  Its buffers are NULL: it aborts before any copy.
	 */
	if (dtype < 0 || dtype >= RING_DTYPE_COUNT || proto_dtype_size(dtype) == 0)
		dtype = RING_UINT8;
	if (redop < 0 || redop >= RING_OP_COUNT)
		redop = 0;
	if (root < 0 || root >= c->size)
		root = 0;	/* ringd answers a bad root at once, out of sequence */
	if (count > ((size_t)1 << 40) / proto_dtype_size(dtype) || base == PROTO_COLL_BARRIER)
		count = 0;
	lr_plan_init(&pl, c, &lr_copier_host, base, dtype, redop,
		     proto_coll_rooted(coll) ? root : -1, count);
	pl.tmpl.api = (uint8_t)api;
	r = lr_req_new_held(c, "ring_group_end", &pl);
	if (!r)
		return;
	r->group_blocking = true;
	if (lr_group_record(c, r) != 0)
		lr_req_release(r);
}

void
lr_group_free(struct ring_comm *c)
{
	free(c->group.ent);
	memset(&c->group, 0, sizeof(c->group));
}

/* ---- packing ---- */

static bool
group_packable(const struct ring_request *r)
{
	const struct lr_plan *pl = &r->pl;

	return pl->tmpl.coll == PROTO_COLL_ALLREDUCE && pl->tmpl.api == 0 &&
	       pl->cp == &lr_copier_host &&
	       pl->count > 0 && pl->count * pl->es <= LR_PACK_MAX_BYTES;
}

/* FNV-1a over the members' counts: the group's composition. */
static uint64_t
group_fp_count(struct ring_request **m, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull, v;
	size_t i;
	int b;

	for (i = 0; i < n; i++) {
		v = m[i]->pl.count;
		for (b = 0; b < 8; b++) {
			h ^= (v >> (8 * b)) & 0xff;
			h *= 0x100000001b3ull;
		}
	}
	return PROTO_FP_GROUP | ((uint64_t)n << 48) | PROTO_FP_GROUP_HASH(h);
}

/* A pack completed (its on_done, which the engine in req.c calls): its
 * members get their results, or its failure. */
static void
group_pack_done_cb(struct ring_request *pack)
{
	struct ring_comm *c = pack->c;
	struct ring_request *m;
	size_t i;

	for (i = 0; i < pack->nmembers; i++) {
		m = pack->members[i];
		if (pack->status == 0 && m->pl.recv)
			memcpy(m->pl.recv, pack->pack_buf + m->pack_off, m->pl.count * m->pl.es);
		lr_req_complete_member(m, pack->status, pack->err);
	}
	lr_arena_free(&c->arena, pack->pack_buf);
	free(pack->members);
	pack->pack_buf = NULL;
	pack->members = NULL;
	pack->nmembers = 0;
}

/*
 * Packs ent[first] with the later packable entries of its dtype and op not yet
 * taken (taken[] marks them).  Returns the pack, held back, or NULL when there
 * is nothing to pack (a lone all-reduce) or no arena room (the members then
 * run on their own).
 */
static struct ring_request *
group_pack(struct ring_comm *c, struct ring_request **ent, size_t n, size_t first,
	   bool *taken)
{
	const struct lr_plan *p0 = &ent[first]->pl;
	struct ring_request **m, *pack;
	struct lr_plan pl;
	size_t i, nm = 0, bytes = 0, count = 0, off;
	uint8_t *buf;

	m = malloc(LR_PACK_MAX_OPS * sizeof(*m));
	if (!m)
		return NULL;
	for (i = first; i < n && nm < LR_PACK_MAX_OPS; i++) {
		const struct lr_plan *p = &ent[i]->pl;

		if (taken[i] || !group_packable(ent[i]) || p->tmpl.dtype != p0->tmpl.dtype ||
		    p->tmpl.redop != p0->tmpl.redop || p->tmpl.flags != p0->tmpl.flags)
			continue;
		taken[i] = true;	/* undone below when nothing is packed */
		m[nm++] = ent[i];
		bytes += p->count * p->es;
		count += p->count;
	}
	if (nm < 2 || !(buf = lr_arena_alloc(&c->arena, bytes)))
		goto none;
	for (i = 0, off = 0; i < nm; i++) {
		size_t b = m[i]->pl.count * m[i]->pl.es;

		if (m[i]->pl.send)	/* NULL: a failed call's place (poisoned) */
			memcpy(buf + off, m[i]->pl.send, b);
		m[i]->pack_off = off;
		off += b;
	}
	lr_plan_init(&pl, c, &lr_copier_host, PROTO_COLL_ALLREDUCE, p0->tmpl.dtype,
		     p0->tmpl.redop, -1, count);
	pl.tmpl.flags = p0->tmpl.flags; /* the wire format they share */
	pl.send = buf;
	pl.recv = buf;
	pl.fp_count = group_fp_count(m, nm);
	pack = lr_req_new_held(c, "ring_group_end", &pl);
	if (!pack) {
		lr_arena_free(&c->arena, buf);
		goto none;
	}
	pack->freed = true;	/* nobody waits for it: its members are waited for */
	pack->members = m;
	pack->nmembers = nm;
	pack->pack_buf = buf;
	pack->on_done = group_pack_done_cb;
	for (i = 0; i < nm; i++) {
		m[i]->state = LR_REQ_PACKED;
		m[i]->pack = pack;
	}
	return pack;
none:
	for (i = first, off = 0; i < n && off < nm; i++)
		if (ent[i] == m[off]) {
			taken[i] = false;
			off++;
		}
	free(m);
	return NULL;
}

/* ---- issue ---- */

/* Issues the n recorded requests in call order, packs at their first
 * member's place; a poisoned group (rc) fails them all. */
static void
group_issue(struct ring_comm *c, struct ring_request **ent, size_t n, int rc,
	    const char *err)
{
	bool *taken = calloc(n ? n : 1, sizeof(*taken));
	struct ring_request *pack;
	size_t i;

	for (i = 0; i < n; i++) {
		if (taken && taken[i])
			continue;
		if (ent[i]->state == LR_REQ_COMPOUND)
			continue;	/* a blocking compound, recorded to be waited
					 * for: its parts are recorded themselves */
		if (taken && group_packable(ent[i]) &&
		    (pack = group_pack(c, ent, n, i, taken)) != NULL) {
			lr_req_activate(pack, rc, err);
			continue;
		}
		lr_req_activate(ent[i], rc, err);
	}
	free(taken);
	lr_req_progress(c);
}

/* The end of ring_group_end's hold on an entry: a blocking call's request is
 * freed; a held one is freed if complete, else at its completion. */
static void
group_let_go(struct ring_request *r)
{
	if (r->group_blocking) {
		lr_req_release(r);
	} else if (r->group_held) {
		r->group_held = false;
		if (r->state == LR_REQ_DONE)
			lr_req_release(r);
		else
			r->freed = true;
	}
}

int
ring_group_start(ring_comm *c)
{
	if (!c)
		return lr_fail(NULL, RING_EINVAL, "ring_group_start: comm is NULL");
	lr_comm_lock(c);
	c->group.depth++;
	lr_comm_unlock(c);
	return 0;
}

int
ring_group_end(ring_comm *c)
{
	struct lr_group g;
	size_t i;
	int rc, first = 0;
	char why[LR_ERR_MAX];

	if (!c)
		return lr_fail(NULL, RING_EINVAL, "ring_group_end: comm is NULL");
	lr_comm_lock(c);
	if (c->group.depth == 0) {
		rc = lr_fail(c, RING_EINVAL, "ring_group_end: no group is open (call "
			     "ring_group_start first)");
		lr_comm_unlock(c);
		return rc;
	}
	if (--c->group.depth > 0) {
		lr_comm_unlock(c);
		return 0;
	}
	/* Take the group: another thread may open the next one while we wait. */
	g = c->group;
	memset(&c->group, 0, sizeof(c->group));
	/* A request freed as soon as it completes (one ring_request_free'd in the
	 * group, a compound's part) would be gone under the walks below: it is
	 * held until they are over. */
	for (i = 0; i < g.n; i++)
		if (g.ent[i]->freed) {
			g.ent[i]->freed = false;
			g.ent[i]->group_held = true;
		}
	group_issue(c, g.ent, g.n, g.rc, g.err);
	for (i = 0; i < g.n; i++) {
		if (!g.ent[i]->group_blocking)
			continue;
		rc = lr_req_wait_locked(g.ent[i]);
		if (rc && !first) {
			first = rc;
			snprintf(why, sizeof(why), "%s", g.ent[i]->err);
		}
	}
	for (i = 0; i < g.n; i++)
		group_let_go(g.ent[i]);
	free(g.ent);
	if (g.rc) {
		/* The cause, even when every blocking call's failure echoed it. */
		lr_fail(c, g.rc, "ring_group_end: %s", g.err);
		first = g.rc;
	} else if (first) {
		lr_fail(c, first, "%s", why);
	}
	lr_comm_unlock(c);
	return first;
}
