/*
 * statesync.c - ring_state_sync: makes a set of buffers (a model's parameters,
 * its optimizer's state, a step counter) identical on every rank, and says
 * which ranks' copies differed.  Every rank hashes each buffer (XXH3, 128
 * bits); one all-gather of a 64-byte head per rank (the buffer count, a digest
 * of the sizes and one of the hashes) settles the common case, every rank the
 * same, with no buffer data sent.  Otherwise the ranks all-gather the sizes
 * (only when the size digests differ: a mismatch is refused before anything
 * moves) and the hashes, in batches, and each rank works out the same plan
 * from them: per buffer, the version most ranks hold (a tie goes to the one
 * the lowest rank holds) and who lacks it.  A buffer that more ranks lack
 * than hold goes round in one broadcast from a holder; else each rank that
 * lacks it receives it from a holder, a holder on its own host first and
 * otherwise the least loaded, so the sending is spread over the holders.
 * Everything is built on the public calls: every rank issues the transfers in
 * the same global order, so the earliest unfinished one is always posted on
 * both its ends and the whole never deadlocks, whatever the window.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wcast-qual"
#pragma GCC diagnostic ignored "-Wundef"
#define XXH_INLINE_ALL
#include <xxhash.h>
#pragma GCC diagnostic pop

#define SYNC_MAGIC 0x31434e5953545352ull /* "RSTSYNC1" */
#define SYNC_BATCH 1024                  /* buffers per all-gather of hashes */

/* One rank's head: what the first all-gather carries. */
enum { H_MAGIC, H_N, H_BAD, H_HOST, H_SIZES0, H_SIZES1, H_STATE0, H_STATE1, H_WORDS };

/* The state of one call, the same on every rank but for me and the buffers. */
struct sync {
	struct ring_comm *c;
	int n, size, me;
	void *const *bufs;
	const size_t *sizes;
	uint64_t *hash;      /* 2 x n: this rank's hashes */
	uint64_t *heads;     /* H_WORDS x size */
	uint64_t *gath;      /* a batch's all-gather: size x SYNC_BATCH x 2 */
	int *source;         /* the caller's n x size, or NULL */
	int *load;           /* transfers given to each rank as a holder */
	ring_request **reqs; /* a batch's transfers on this rank */
	int *reqbuf;         /* the buffer of each */
	size_t nreq, capreq;
};

static void
sync_digest(const void *p, size_t bytes, uint64_t *out)
{
	XXH128_hash_t h = XXH3_128bits(p, bytes);

	out[0] = h.low64;
	out[1] = h.high64;
}

static int
sync_check_args(struct ring_comm *c, int n, void *const bufs[], const size_t sizes[])
{
	static const char fn[] = "ring_state_sync";
	int b;

	if (n < 0)
		return lr_fail(c, RING_EINVAL, "%s: n is %d (the number of buffers, >= 0)", fn, n);
	if (n > 0 && (!bufs || !sizes))
		return lr_fail(c, RING_EINVAL,
			       "%s: %d buffers but bufs %p and sizes %p "
			       "(both needed when n > 0)",
			       fn, n, (const void *)bufs, (const void *)sizes);
	for (b = 0; b < n; b++)
		if (sizes[b] > 0 && !bufs[b])
			return lr_fail(c, RING_EINVAL, "%s: buffer %d is NULL with %zu bytes", fn,
				       b, sizes[b]);
	return 0;
}

/* This rank's head (bad: its arguments were refused, so it only says so). */
static int
sync_head(struct sync *s, bool bad, uint64_t *head)
{
	uint64_t *sz;
	int b;

	memset(head, 0, H_WORDS * sizeof(*head));
	head[H_MAGIC] = SYNC_MAGIC;
	head[H_N] = (uint64_t)(bad ? 0 : s->n);
	head[H_BAD] = bad;
	head[H_HOST] = (uint64_t)ring_host_rank(s->c);
	if (bad)
		return 0;
	s->hash = calloc((size_t)s->n * 2 + 1, sizeof(*s->hash));
	sz = calloc((size_t)s->n + 1, sizeof(*sz));
	if (!s->hash || !sz) {
		free(sz);
		return lr_fail(s->c, RING_ENOMEM, "ring_state_sync: no memory for %d hashes", s->n);
	}
	for (b = 0; b < s->n; b++) {
		sz[b] = s->sizes[b];
		sync_digest(s->bufs[b], s->sizes[b], s->hash + 2 * b);
	}
	sync_digest(sz, (size_t)s->n * sizeof(*sz), head + H_SIZES0);
	sync_digest(s->hash, (size_t)s->n * 2 * sizeof(*s->hash), head + H_STATE0);
	free(sz);
	return 0;
}

/* What the heads say: 0 and *same when every rank holds the same state, 0
 * when only the hashes differ, or the failure every rank reaches alike. */
static int
sync_heads(struct sync *s, bool *same, bool *sizes_differ)
{
	const uint64_t *h0 = s->heads, *h;
	int r;

	*same = true;
	*sizes_differ = false;
	for (r = 0; r < s->size; r++) {
		h = s->heads + (size_t)r * H_WORDS;
		if (h[H_MAGIC] != SYNC_MAGIC)
			return lr_fail(s->c, RING_EMISMATCH,
				       "ring_state_sync: rank %d called "
				       "another all-gather of 64 bytes, not ring_state_sync",
				       r);
		if (h[H_BAD])
			return lr_fail(s->c, RING_EABORTED,
				       "ring_state_sync: rank %d passed "
				       "invalid arguments (its ring_last_error says which)",
				       r);
	}
	for (r = 1; r < s->size; r++) {
		h = s->heads + (size_t)r * H_WORDS;
		if (h[H_N] != h0[H_N])
			return lr_fail(s->c, RING_EMISMATCH,
				       "ring_state_sync: rank %d passed %llu "
				       "buffers and rank 0 %llu: every rank must pass the same "
				       "buffers in the same order",
				       r, (unsigned long long)h[H_N], (unsigned long long)h0[H_N]);
		if (h[H_SIZES0] != h0[H_SIZES0] || h[H_SIZES1] != h0[H_SIZES1])
			*sizes_differ = true;
		if (h[H_STATE0] != h0[H_STATE0] || h[H_STATE1] != h0[H_STATE1])
			*same = false;
	}
	if (*sizes_differ)
		*same = false;
	return 0;
}

/* The sizes differ somewhere: all-gathers them, a batch at a time, and names
 * the first buffer whose size is not the same on every rank. */
static int
sync_find_size(struct sync *s)
{
	uint64_t *mine = s->gath + (size_t)s->size * SYNC_BATCH;
	int first, k, r, rc;

	for (first = 0; first < s->n; first += SYNC_BATCH) {
		int cnt = s->n - first < SYNC_BATCH ? s->n - first : SYNC_BATCH;

		for (k = 0; k < cnt; k++)
			mine[k] = s->sizes[first + k];
		rc = ring_allgather(s->c, mine, s->gath, (size_t)cnt, RING_UINT64);
		if (rc)
			return rc;
		for (k = 0; k < cnt; k++)
			for (r = 1; r < s->size; r++)
				if (s->gath[(size_t)r * cnt + k] != s->gath[k])
					return lr_fail(
					    s->c, RING_EMISMATCH,
					    "ring_state_sync: "
					    "buffer %d is %llu bytes on rank 0 and %llu "
					    "on rank %d: every rank must pass the same "
					    "sizes",
					    first + k, (unsigned long long)s->gath[k],
					    (unsigned long long)s->gath[(size_t)r * cnt + k], r);
	}
	return lr_fail(s->c, RING_EMISMATCH,
		       "ring_state_sync: the ranks' size digests "
		       "differ but no buffer's size does (a hash collision?)");
}

/* Rank r's hash of batch buffer k in the gathered hashes of cnt buffers. */
static const uint64_t *
sync_hash_of(const struct sync *s, int r, int cnt, int k)
{
	return s->gath + ((size_t)r * cnt + k) * 2;
}

static bool
sync_same(const uint64_t *a, const uint64_t *b)
{
	return a[0] == b[0] && a[1] == b[1];
}

/* The agreed version of batch buffer k: the lowest rank holding the hash most
 * ranks hold (a tie: the one whose lowest holder is lowest). */
static int
sync_agree(const struct sync *s, int cnt, int k)
{
	int best = 0, bestn = 0, r, q, votes;

	for (r = 0; r < s->size; r++) {
		const uint64_t *h = sync_hash_of(s, r, cnt, k);

		for (q = 0; q < r; q++)
			if (sync_same(sync_hash_of(s, q, cnt, k), h))
				break;
		if (q < r)
			continue; /* counted with its lowest holder q */
		for (votes = 0, q = r; q < s->size; q++)
			votes += sync_same(sync_hash_of(s, q, cnt, k), h);
		if (votes > bestn) {
			best = r;
			bestn = votes;
		}
	}
	return best;
}

/* Rank me's part of one transfer: a request kept for the batch's wait. */
static int
sync_add(struct sync *s, int rc, ring_request *req, int b)
{
	if (rc)
		return rc;
	if (s->nreq == s->capreq) {
		size_t cap = s->capreq ? 2 * s->capreq : 64;
		ring_request **nr = realloc(s->reqs, cap * sizeof(*nr));
		int *nb;

		if (nr)
			s->reqs = nr;
		nb = nr ? realloc(s->reqbuf, cap * sizeof(*nb)) : NULL;
		if (!nb) {
			ring_wait(req);
			ring_request_free(req);
			return lr_fail(s->c, RING_ENOMEM,
				       "ring_state_sync: no memory for "
				       "%zu transfers",
				       cap);
		}
		s->reqbuf = nb;
		s->capreq = cap;
	}
	s->reqs[s->nreq] = req;
	s->reqbuf[s->nreq++] = b;
	return 0;
}

/* The holder of the agreed version that sends buffer b to stale rank t: one
 * on t's host if any, else the least loaded (ties: the lowest rank). */
static int
sync_pick(const struct sync *s, const bool *holds, int t)
{
	int r, pick = -1;
	bool local, plocal = false;

	for (r = 0; r < s->size; r++) {
		if (!holds[r])
			continue;
		local = s->heads[(size_t)r * H_WORDS + H_HOST] ==
			s->heads[(size_t)t * H_WORDS + H_HOST];
		if (pick < 0 || (local && !plocal) ||
		    (local == plocal && s->load[r] < s->load[pick])) {
			pick = r;
			plocal = local;
		}
	}
	return pick;
}

/* The plan of batch buffer k (buffer b) and this rank's part of it. */
static int
sync_repair(struct sync *s, int cnt, int k, int b, bool *holds)
{
	const uint64_t *want = sync_hash_of(s, sync_agree(s, cnt, k), cnt, k);
	size_t shape[1] = { s->sizes[b] };
	ring_request *req = NULL;
	int r, nhold = 0, nstale, root, rc = 0;

	for (r = 0; r < s->size; r++)
		nhold += holds[r] = sync_same(sync_hash_of(s, r, cnt, k), want);
	nstale = s->size - nhold;
	if (nstale == 0)
		return 0;
	if (nstale > nhold) { /* a broadcast: one pass round the ring */
		for (root = -1, r = 0; r < s->size; r++)
			if (holds[r] && (root < 0 || s->load[r] < s->load[root]))
				root = r;
		s->load[root]++;
		for (r = 0; r < s->size; r++)
			if (!holds[r] && s->source)
				s->source[(size_t)b * s->size + r] = root;
		rc = ring_ibroadcast(s->c, s->bufs[b], s->sizes[b], RING_UINT8, root, &req);
		return sync_add(s, rc, req, b);
	}
	for (r = 0; r < s->size && rc == 0; r++) {
		if (holds[r])
			continue;
		root = sync_pick(s, holds, r);
		s->load[root]++;
		if (s->source)
			s->source[(size_t)b * s->size + r] = root;
		if (s->me == root) {
			rc = ring_isend(s->c, s->bufs[b], RING_UINT8, 1, shape, r, &req);
			rc = sync_add(s, rc, req, b);
		} else if (s->me == r) {
			rc = ring_irecv(s->c, s->bufs[b], RING_UINT8, 1, shape, root, &req);
			rc = sync_add(s, rc, req, b);
		}
	}
	return rc;
}

/* Waits for this rank's transfers of the batch; the first failure, named. */
static int
sync_wait(struct sync *s, int rc)
{
	char why[LR_ERR_MAX];
	size_t i;
	int first = rc, wrc;

	why[0] = '\0';
	if (rc)
		snprintf(why, sizeof(why), "%s", ring_last_error(s->c));
	for (i = 0; i < s->nreq; i++) {
		wrc = ring_wait(s->reqs[i]);
		if (wrc && !first) {
			first = wrc;
			snprintf(why, sizeof(why), "repairing buffer %d: %s", s->reqbuf[i],
				 ring_request_error(s->reqs[i]));
		}
		ring_request_free(s->reqs[i]);
	}
	s->nreq = 0;
	if (first)
		return lr_fail(s->c, first, "ring_state_sync: %s", why);
	return 0;
}

/* The hashes differ somewhere: gathers them a batch at a time and repairs
 * each batch's buffers before the next. */
static int
sync_batches(struct sync *s)
{
	uint64_t *mine = s->gath + (size_t)s->size * SYNC_BATCH * 2;
	bool *holds = calloc((size_t)s->size, sizeof(*holds));
	int first, k, rc = 0;

	if (!holds)
		return lr_fail(s->c, RING_ENOMEM, "ring_state_sync: out of memory");
	for (first = 0; first < s->n && rc == 0; first += SYNC_BATCH) {
		int cnt = s->n - first < SYNC_BATCH ? s->n - first : SYNC_BATCH;

		memcpy(mine, s->hash + (size_t)first * 2, (size_t)cnt * 2 * sizeof(*mine));
		rc = ring_allgather(s->c, mine, s->gath, (size_t)cnt * 2, RING_UINT64);
		for (k = 0; k < cnt && rc == 0; k++)
			rc = sync_repair(s, cnt, k, first + k, holds);
		rc = sync_wait(s, rc);
	}
	free(holds);
	return rc;
}

static int
sync_run(struct sync *s, bool bad)
{
	uint64_t head[H_WORDS];
	bool same, sizes_differ;
	int rc;

	s->heads = calloc((size_t)s->size * H_WORDS, sizeof(*s->heads));
	s->load = calloc((size_t)s->size, sizeof(*s->load));
	if (!s->heads || !s->load)
		return lr_fail(s->c, RING_ENOMEM, "ring_state_sync: out of memory");
	if ((rc = sync_head(s, bad, head)))
		bad = true; /* the others learn of it rather than wait */
	if (bad)
		sync_head(s, true, head);
	{
		int grc = ring_allgather(s->c, head, s->heads, H_WORDS, RING_UINT64);

		if (grc || bad)
			return grc ? grc : rc ? rc : RING_EINVAL;
	}
	if ((rc = sync_heads(s, &same, &sizes_differ)) || same)
		return rc;
	/* a batch's all-gather, then this rank's own part of it */
	s->gath = calloc(((size_t)s->size + 1) * SYNC_BATCH * 2, sizeof(*s->gath));
	if (!s->gath)
		return lr_fail(s->c, RING_ENOMEM,
			       "ring_state_sync: no memory for the "
			       "hashes of %d ranks",
			       s->size);
	if (sizes_differ)
		return sync_find_size(s);
	return sync_batches(s);
}

int
ring_state_sync(ring_comm *c, int n, void *const bufs[], const size_t sizes[], int *source)
{
	struct sync s = { .c = c, .n = n, .bufs = bufs, .sizes = sizes, .source = source };
	char keep[LR_ERR_MAX];
	bool bad;
	int rc, depth;

	if ((rc = lr_check_comm(c, "ring_state_sync")))
		return rc;
	lr_comm_lock(c);
	depth = c->group.depth;
	lr_comm_unlock(c);
	if (depth > 0) /* its all-gathers would be recorded, not run */
		return lr_fail(c, RING_EINVAL,
			       "ring_state_sync: not inside a group "
			       "(ring_group_start): it waits for its own operations");
	s.size = ring_size(c);
	s.me = ring_rank(c);
	bad = sync_check_args(c, n, bufs, sizes) != 0;
	if (bad)
		snprintf(keep, sizeof(keep), "%s", ring_last_error(c));
	if (!bad && source)
		for (size_t i = 0; i < (size_t)n * s.size; i++)
			source[i] = -1;
	rc = sync_run(&s, bad);
	if (bad && rc == RING_EINVAL)
		rc = lr_fail(c, RING_EINVAL, "%s", keep);
	free(s.hash);
	free(s.heads);
	free(s.gath);
	free(s.load);
	free(s.reqs);
	free(s.reqbuf);
	return rc;
}
