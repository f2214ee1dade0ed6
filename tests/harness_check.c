/*
 * harness_check.c - the checks that run inside the ranks of an integration
 * test: failure messages that name the rank and the place, a result compared
 * bit for bit with its reference (tests/pattern.c) and the guard bytes after it
 * untouched, every rank holding the same bytes, buffers in the arena or in
 * plain memory, and the checked collectives several test files share.  They
 * never call cr_assert (a forked rank is not the Criterion worker): they print
 * and return 1.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/harness.h"

int it_rank = -1;
ring_comm *it_comm;

void it_fail(const char *file, int line, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "rank %d: %s:%d: %s\n", it_rank, file, line, msg);
	fflush(stderr);
}

int it_check_result(const void *got, const void *want, enum ring_dtype dt, size_t count,
		    const char *what)
{
	size_t bad = 0, wrong = pattern_compare(got, want, dt, count, &bad);
	const unsigned char *g = (const unsigned char *)got + count * ring_dtype_size(dt);
	char desc[160];

	if (wrong) {
		pattern_describe(desc, sizeof(desc), got, want, dt, bad);
		it_fail(__FILE__, __LINE__, "%s: %zu of %zu elements wrong, first %s", what,
			wrong, count, desc);
		return 1;
	}
	for (int i = 0; i < IT_GUARD; i++)
		if (g[i] != 0xa5) {
			it_fail(__FILE__, __LINE__, "%s: byte %d past the result was written",
				what, i);
			return 1;
		}
	return 0;
}

uint64_t it_hash(const void *buf, size_t bytes)
{
	const unsigned char *p = buf;
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < bytes; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

int it_same_everywhere(ring_comm *comm, const void *buf, size_t bytes)
{
	int n = ring_size(comm), me = ring_rank(comm), rc, bad = 0;
	uint64_t mine = it_hash(buf, bytes), *all = calloc((size_t)n, sizeof(*all));

	if (!all)
		return 1;
	rc = ring_allgather(comm, &mine, all, 1, RING_UINT64);
	if (rc) {
		fprintf(stderr, "rank %d: allgather of result hashes: %s: %s\n", me,
			ring_strerror(rc), ring_last_error(comm));
		free(all);
		return 1;
	}
	for (int r = 0; r < n; r++)
		if (all[r] != all[0]) {
			fprintf(stderr, "rank %d: rank %d's result (hash %016" PRIx64 ") differs "
				"from rank 0's (%016" PRIx64 ")\n", me, r, all[r], all[0]);
			bad = 1;
		}
	if (all[me] != mine) {
		fprintf(stderr, "rank %d: the allgather returned a wrong hash for me\n", me);
		bad = 1;
	}
	free(all);
	return bad;
}

void *it_alloc(ring_comm *comm, enum it_place place, size_t bytes)
{
	void *p = NULL;

	if (place == IT_ARENA)
		return ring_alloc(comm, bytes ? bytes : 1);
	if (posix_memalign(&p, 64, bytes ? bytes : 1))
		return NULL;
	return p;
}

void it_free(ring_comm *comm, enum it_place place, void *p)
{
	if (!p)
		return;
	if (place == IT_ARENA)
		ring_free(comm, p);
	else
		free(p);
}

const char *it_place_name(enum it_place place)
{
	return place == IT_ARENA ? "arena" : "host";
}

int it_broadcast_one(ring_comm *comm, int rank, int n, enum ring_dtype dt, size_t count,
		     int root, enum it_place place, uint64_t seed, bool same_everywhere)
{
	size_t bytes = count * ring_dtype_size(dt);
	void *buf = it_alloc(comm, place, bytes + IT_GUARD), *want = malloc(bytes + 1);
	char what[160];
	int rc = 1;

	snprintf(what, sizeof(what), "broadcast(%s, count %zu, root %d, %s)",
		 ring_dtype_name(dt), count, root, it_place_name(place));
	if (!buf || !want) {
		it_fail(__FILE__, __LINE__, "%s: out of memory: %s", what, ring_last_error(comm));
		goto out;
	}
	memset(buf, 0xa5, bytes + IT_GUARD);
	pattern_fill(want, dt, RING_SUM, n, root, count, 0, seed);
	if (rank == root)
		memcpy(buf, want, bytes);
	rc = ring_broadcast(comm, buf, count, dt, root);
	if (rc) {
		it_fail(__FILE__, __LINE__, "%s: %s: %s", what, ring_strerror(rc),
			ring_last_error(comm));
		rc = 1;
		goto out;
	}
	rc = it_check_result(buf, want, dt, count, what);
	if (!rc && same_everywhere && it_same_everywhere(comm, buf, bytes))
		rc = 1;
out:
	it_free(comm, place, buf);
	free(want);
	return rc;
}

int
it_checked_allreduce(ring_comm *comm, float *buf, float *want, size_t count, uint64_t seed,
		     char *why, size_t cap)
{
	int n = ring_size(comm), r = ring_rank(comm), rc;
	size_t bad = 0, wrong;

	pattern_fill(buf, RING_FLOAT32, RING_SUM, n, r, count, 0, seed);
	if ((rc = ring_allreduce(comm, buf, buf, count, RING_FLOAT32, RING_SUM)) != 0)
		return rc;
	pattern_expect_reduce(want, RING_FLOAT32, RING_SUM, n, count, 0, seed);
	wrong = pattern_compare(buf, want, RING_FLOAT32, count, &bad);
	if (wrong) {
		char d[160];

		pattern_describe(d, sizeof(d), buf, want, RING_FLOAT32, bad);
		snprintf(why, cap, "seed %llu on %d ranks: %zu of %zu elements wrong, first %s",
			 (unsigned long long)seed, n, wrong, count, d);
		return 1;
	}
	return 0;
}
