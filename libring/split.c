/*
 * split.c - ring_split, MLX's Group.split: a collective over the parent that
 * all-gathers every rank's (color, key, host rank, rank), orders the members of
 * each color by key and then parent rank, and attaches each member to the same
 * daemon as a new job whose name every member derives alike from the parent's
 * name, the number of earlier splits of the parent and the color.  The sub-job is
 * an ordinary job to ringd: a new session with its own arena (as large as the
 * parent's), its members' ranks given explicitly like a launcher's, so a group
 * may span any subset of the hosts with any number of members on each.  Nothing
 * of the parent changes except its split counter, so it stays usable, and closing
 * either communicator leaves the other alone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Every member must compute the same place from the same rows; anything that
 * would make them disagree (a row that does not come from its rank, a host out
 * of range) is refused rather than guessed around. */
int
lr_split_place(const int64_t *rows, int n, int me, int *rank, int *size,
	       int *local_rank, int *local_size, char *err, size_t cap)
{
	const int64_t *mine = rows + (size_t)me * LR_SPLIT_COLS;
	int64_t color = mine[LR_SPLIT_COLOR], key = mine[LR_SPLIT_KEY];
	int64_t host = mine[LR_SPLIT_HOST];
	int before = 0, members = 0, lbefore = 0, lmembers = 0, r;

	for (r = 0; r < n; r++) {
		const int64_t *row = rows + (size_t)r * LR_SPLIT_COLS;
		bool earlier;

		if (row[LR_SPLIT_RANK] != r || row[LR_SPLIT_HOST] < 0 ||
		    row[LR_SPLIT_HOST] > PROTO_MAX_RANKS) {
			snprintf(err, cap, "parent rank %d sent an inconsistent split row "
				 "(rank %lld, host %lld)", r, (long long)row[LR_SPLIT_RANK],
				 (long long)row[LR_SPLIT_HOST]);
			return RING_EINVAL;
		}
		if (row[LR_SPLIT_COLOR] != color)
			continue;
		/* Order: key, then parent rank (a strict total order). */
		earlier = row[LR_SPLIT_KEY] < key || (row[LR_SPLIT_KEY] == key && r < me);
		members++;
		before += earlier;
		if (row[LR_SPLIT_HOST] == host) {
			lmembers++;
			lbefore += earlier;
		}
	}
	*rank = before;
	*size = members;
	*local_rank = lbefore;
	*local_size = lmembers;
	return 0;
}

/* 64-bit FNV-1a, printed in the fallback name. */
static uint64_t
split_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ull;
	}
	return h;
}

void
lr_split_job_name(char *out, const char *parent, unsigned nsplit, int color)
{
	char full[PROTO_JOB_MAX + 64];
	int n;

	n = snprintf(full, sizeof(full), "%s:s%u.%d", parent, nsplit, color);
	if (n > 0 && n <= PROTO_JOB_MAX) {
		memcpy(out, full, (size_t)n + 1);
		return;
	}
	/* Nested splits of a long name: keep a readable prefix and make the rest
	 * a hash of the whole, so different colors and splits stay distinct.
	 * ":h" and 16 hex digits take 18 bytes. */
	snprintf(out, PROTO_JOB_MAX + 1, "%.*s:h%016llx", PROTO_JOB_MAX - 18, parent,
		 (unsigned long long)split_hash(full));
}

/* What a sub-communicator takes from its parent whatever its group. */
void
lr_split_env(const struct ring_comm *c, struct lr_env *env, const char *source)
{
	memset(env, 0, sizeof(*env));
	memcpy(env->socket, c->sock, sizeof(env->socket));
	env->timeout_ms = c->timeout_ms;
	env->poll_us = c->poll_us;
	env->algo = c->algo;
	env->wire = c->wire;
	env->arena_bytes = c->arena.bytes;
	env->source = source;
	env->debug = c->debug;
	env->no_shm = c->no_shm;
	env->no_fast = c->no_fast;
	memcpy(env->base, c->base, sizeof(env->base));
}

/* A size-1 group's new communicator (RING_SINGLE): itself again; fn names
 * the call (ring_split, ring_comm_shrink) in its errors. */
int
lr_comm_single_again(struct ring_comm *c, const char *fn, ring_comm **out)
{
	struct lr_env env;
	int rc;

	lr_split_env(c, &env, fn);
	memcpy(env.job, c->job, sizeof(env.job));
	env.rank = env.size = -1;
	env.local_size = 1;
	env.single = true;
	rc = lr_comm_open(&env, out);
	if (rc)
		return lr_fail(c, rc, "%s: %s", fn, ring_last_error(NULL));
	return 0;
}

/* The collective part: all-gathers every rank's (color, key, host, rank) and,
 * for a rank that joins a group, puts its place in that group into env. */
static int
split_gather(struct ring_comm *c, int color, int key, struct lr_env *env)
{
	int64_t mine[LR_SPLIT_COLS] = {
		[LR_SPLIT_COLOR] = color < 0 ? -1 : color, [LR_SPLIT_KEY] = key,
		[LR_SPLIT_HOST] = c->host_rank, [LR_SPLIT_RANK] = c->rank,
	};
	char err[LR_ERR_MAX];
	int64_t *rows;
	int rc;

	rows = calloc((size_t)c->size, LR_SPLIT_COLS * sizeof(*rows));
	if (!rows)
		return lr_fail(c, RING_ENOMEM, "ring_split: out of memory for %d ranks", c->size);
	/* On failure ring_allgather leaves its message in c->err.  A negative
	 * color (MPI_UNDEFINED) takes part in the gather but joins no group. */
	rc = ring_allgather(c, mine, rows, LR_SPLIT_COLS, RING_INT64);
	if (rc == 0 && color >= 0) {
		rc = lr_split_place(rows, c->size, c->rank, &env->rank, &env->size,
				    &env->local_rank, &env->local_size, err, sizeof(err));
		if (rc)
			rc = lr_fail(c, rc, "ring_split: %s", err);
	}
	free(rows);
	return rc;
}

/* Attaches to the sub-job env describes and checks that ringd placed this
 * process where the members computed. */
static int
split_join(struct ring_comm *c, const struct lr_env *env, int color, int key,
	   ring_comm **out)
{
	ring_comm *sub = NULL;
	int rc;

	rc = lr_comm_open(env, &sub);
	if (rc)
		return lr_fail(c, rc, "ring_split(color %d, key %d): joining sub-job \"%s\" "
			       "as rank %d of %d: %s", color, key, env->job, env->rank,
			       env->size, ring_last_error(NULL));
	/* ringd placed us by the ranks we gave; a different local place would
	 * mean the members disagree about the layout. */
	if (sub->local_rank != env->local_rank || sub->local_size != env->local_size) {
		rc = lr_fail(c, RING_EPROTO, "ring_split: ringd at %s placed this process at "
			     "local rank %d of %d in sub-job \"%s\", expected %d of %d", c->sock,
			     sub->local_rank, sub->local_size, env->job, env->local_rank,
			     env->local_size);
		ring_close(sub);
		return rc;
	}
	if (c->debug)
		fprintf(stderr, "libring: split of job %s (color %d, key %d): rank %d of %d in "
			"job %s\n", c->job, color, key, env->rank, env->size, env->job);
	*out = sub;
	return 0;
}

int
ring_split(ring_comm *c, int color, int key, ring_comm **out)
{
	struct lr_env env;
	unsigned nsplit;
	int rc;

	if (out)
		*out = NULL;
	if (!c)
		return lr_fail(NULL, RING_EINVAL, "ring_split: comm is NULL");
	if (!out)
		return lr_fail(c, RING_EINVAL, "ring_split: out is NULL");
	/* Counted on every rank, also those that join no group, so the sub-job
	 * names of later splits agree. */
	lr_comm_lock(c);
	nsplit = c->nsplits++;
	lr_comm_unlock(c);
	if (c->single)
		return color < 0 ? 0 : lr_comm_single_again(c, "ring_split", out);

	lr_split_env(c, &env, "ring_split");
	if ((rc = split_gather(c, color, key, &env)) != 0 || color < 0)
		return rc;
	env.socket_set = true;
	lr_split_job_name(env.job, c->job, nsplit, color);
	return split_join(c, &env, color, key, out);
}
