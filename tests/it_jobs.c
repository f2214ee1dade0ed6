/*
 * it_jobs.c - integration tests of jobs with several processes per host, several
 * jobs per ring, jobs on some of the hosts, and ring_split, against real ringd
 * daemons on loopback (scripts/ring-local through tests/harness_cluster.c).
 *
 * Layouts: 2 hosts x 2 processes and 3 hosts x 2 processes run every collective
 * (all-reduce over every op, avg for the floating types, all-gather,
 * reduce-scatter in and out of place, broadcast from every root, barrier, and
 * send/recv between every pair of ranks, local and remote alike); two jobs with
 * different names run all-reduce loops at the same time; a job on daemons 0 and
 * 2 of three runs every collective through daemon 1, which has no client of it;
 * launcher ranks that are not contiguous per host (host 0 holds ranks 0 and 2);
 * three processes on one host and one on the other, numbered by the launcher;
 * a split into even and odd ranks (and two more) with an all-reduce inside each
 * group and one on the parent afterwards; unequal local sizes without launcher
 * ranks refused at ring_open with a message that names the problem; and
 * `ringctl jobs --json` listing the job and its ranks while it runs.
 *
 * Inputs are tests/pattern.c's exact patterns, so every result is compared bit
 * for bit with a reference computed locally, and hashed and all-gathered so a rank that
 * got other bits than the rest fails too.  Clusters run with `--segment 64K` so
 * moderate counts cross segment boundaries, and RING_TIMEOUT_MS is 30 s so a
 * hang fails a test instead of outliving it.
 */
#include <criterion/criterion.h>

#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "libring/ring.h"
#include "tests/harness.h"

#define SEGMENT_ARGS	"--segment 64K"
#define GUARD		IT_GUARD	/* bytes after a result that nothing may touch */
#define LARGE		70001	/* a prime; several 64K segments per chunk */

static struct ring_cluster cluster;

static void setup(void)
{
	setenv("RING_TIMEOUT_MS", "30000", 1);
}

static void teardown(void)
{
	cluster_stop(&cluster);
}

static void start(int n)
{
	cr_assert_eq(cluster_start(&cluster, n, SEGMENT_ARGS), 0,
		     "could not start %d daemons (see above)", n);
}

/* ---------------------------------------------------------------------- */
/* Every collective, once per interesting case                             */
/* ---------------------------------------------------------------------- */

static int allreduce_one(ring_comm *comm, int rank, int n, enum ring_dtype dt,
			 enum ring_op op, size_t count, enum it_place place, bool inplace,
			 uint64_t seed)
{
	size_t bytes = count * ring_dtype_size(dt);
	void *send = NULL, *recv, *want = malloc(bytes + 1);
	char what[160];
	int rc = 1;

	snprintf(what, sizeof(what), "allreduce(%s, %s, count %zu, %s, %s)",
		 ring_dtype_name(dt), ring_op_name(op), count, it_place_name(place),
		 inplace ? "in place" : "out of place");
	recv = it_alloc(comm, place, bytes + GUARD);
	if (!inplace)
		send = it_alloc(comm, place, bytes + 1);
	if (!recv || (!inplace && !send) || !want) {
		it_fail(__FILE__, __LINE__, "%s: out of memory: %s", what, ring_last_error(comm));
		goto out;
	}
	memset(recv, 0xa5, bytes + GUARD);
	pattern_fill(inplace ? recv : send, dt, op, n, rank, count, 0, seed);
	rc = ring_allreduce(comm, inplace ? recv : send, recv, count, dt, op);
	if (rc) {
		it_fail(__FILE__, __LINE__, "%s: %s: %s", what, ring_strerror(rc),
			ring_last_error(comm));
		rc = 1;
		goto out;
	}
	pattern_expect_reduce(want, dt, op, n, count, 0, seed);
	rc = it_check_result(recv, want, dt, count, what);
	if (!rc && it_same_everywhere(comm, recv, bytes)) {
		it_fail(__FILE__, __LINE__, "%s: ranks hold different results", what);
		rc = 1;
	}
out:
	it_free(comm, place, recv);
	if (send)
		it_free(comm, place, send);
	free(want);
	return rc;
}

static int allgather_one(ring_comm *comm, int rank, int n, enum ring_dtype dt,
			 size_t count, enum it_place place, uint64_t seed)
{
	size_t bytes = count * ring_dtype_size(dt), total = bytes * (size_t)n;
	void *send = it_alloc(comm, place, bytes + 1);
	void *recv = it_alloc(comm, place, total + GUARD), *want = malloc(total + 1);
	char what[160];
	int rc = 1;

	snprintf(what, sizeof(what), "allgather(%s, count %zu, %s)", ring_dtype_name(dt),
		 count, it_place_name(place));
	if (!send || !recv || !want) {
		it_fail(__FILE__, __LINE__, "%s: out of memory: %s", what, ring_last_error(comm));
		goto out;
	}
	pattern_fill(send, dt, RING_SUM, n, rank, count, 0, seed);
	memset(recv, 0xa5, total + GUARD);
	for (int r = 0; r < n; r++)
		pattern_fill((char *)want + (size_t)r * bytes, dt, RING_SUM, n, r, count, 0, seed);
	rc = ring_allgather(comm, send, recv, count, dt);
	if (rc) {
		it_fail(__FILE__, __LINE__, "%s: %s: %s", what, ring_strerror(rc),
			ring_last_error(comm));
		rc = 1;
		goto out;
	}
	rc = it_check_result(recv, want, dt, count * (size_t)n, what);
	if (!rc && it_same_everywhere(comm, recv, total))
		rc = 1;
out:
	it_free(comm, place, send);
	it_free(comm, place, recv);
	free(want);
	return rc;
}

/* In place means MPI's: the result lands in this rank's own block of send. */
static int reduce_scatter_one(ring_comm *comm, int rank, int n, enum ring_dtype dt,
			      enum ring_op op, size_t count, enum it_place place, bool inplace,
			      uint64_t seed)
{
	size_t bytes = count * ring_dtype_size(dt), total = bytes * (size_t)n;
	void *send = it_alloc(comm, place, total + GUARD), *recv = NULL;
	void *want = malloc(bytes + 1), *orig = malloc(total + 1);
	char what[160];
	int rc = 1;

	snprintf(what, sizeof(what), "reduce_scatter(%s, %s, recvcount %zu, %s, %s)",
		 ring_dtype_name(dt), ring_op_name(op), count, it_place_name(place),
		 inplace ? "in place" : "out of place");
	if (!inplace)
		recv = it_alloc(comm, place, bytes + GUARD);
	if (!send || (!inplace && !recv) || !want || !orig) {
		it_fail(__FILE__, __LINE__, "%s: out of memory: %s", what, ring_last_error(comm));
		goto out;
	}
	memset(send, 0xa5, total + GUARD);
	pattern_fill(send, dt, op, n, rank, count * (size_t)n, 0, seed);
	memcpy(orig, send, total);
	if (inplace) {
		recv = (char *)send + (size_t)rank * bytes;
	} else {
		memset(recv, 0xa5, bytes + GUARD);
	}
	pattern_expect_reduce(want, dt, op, n, count, (size_t)rank * count, seed);
	rc = ring_reduce_scatter(comm, send, recv, count, dt, op);
	if (rc) {
		it_fail(__FILE__, __LINE__, "%s: %s: %s", what, ring_strerror(rc),
			ring_last_error(comm));
		rc = 1;
		goto out;
	}
	if (inplace) {
		size_t bad = 0, wrong = pattern_compare(recv, want, dt, count, &bad);
		const unsigned char *g = (const unsigned char *)send + total;
		char desc[160];

		rc = 0;
		if (wrong) {
			pattern_describe(desc, sizeof(desc), recv, want, dt, bad);
			it_fail(__FILE__, __LINE__, "%s: %zu of %zu elements wrong, first %s",
				what, wrong, count, desc);
			rc = 1;
		}
		/* Only our block may change, and nothing after the last one. */
		for (int r = 0; !rc && r < n; r++)
			if (r != rank && memcmp((char *)send + (size_t)r * bytes,
						(char *)orig + (size_t)r * bytes, bytes)) {
				it_fail(__FILE__, __LINE__, "%s: block %d of send changed", what, r);
				rc = 1;
			}
		for (int i = 0; !rc && i < GUARD; i++)
			if (g[i] != 0xa5) {
				it_fail(__FILE__, __LINE__, "%s: byte %d past send was written",
					what, i);
				rc = 1;
			}
	} else {
		rc = it_check_result(recv, want, dt, count, what);
		if (!rc && memcmp(send, orig, total)) {
			it_fail(__FILE__, __LINE__, "%s: the send buffer was modified", what);
			rc = 1;
		}
	}
out:
	it_free(comm, place, send);
	if (!inplace)
		it_free(comm, place, recv);
	free(want);
	free(orig);
	return rc;
}

/* One message from a to b, seen by both (the others skip it). */
static int p2p_one(ring_comm *comm, int rank, int n, int a, int b, size_t count,
		   enum it_place place, uint64_t seed)
{
	size_t shape[2] = { count / 7, 7 }, bytes = (count / 7) * 7 * 4;
	void *buf, *want;
	char what[120];

	if (rank != a && rank != b)
		return 0;
	snprintf(what, sizeof(what), "send/recv of %zu float32 from rank %d to %d (%s)",
		 shape[0] * 7, a, b, it_place_name(place));
	buf = it_alloc(comm, place, bytes + GUARD);
	want = malloc(bytes + 1);
	IT_CHECK(buf && want, "%s: out of memory", what);
	pattern_fill(want, RING_FLOAT32, RING_SUM, n, a, shape[0] * 7, 0, seed);
	if (rank == a) {
		memcpy(buf, want, bytes);
		IT_CALL(ring_send(comm, buf, RING_FLOAT32, 2, shape, b));
	} else {
		memset(buf, 0xa5, bytes + GUARD);
		IT_CALL(ring_recv(comm, buf, RING_FLOAT32, 2, shape, a));
		if (it_check_result(buf, want, RING_FLOAT32, shape[0] * 7, what))
			return 1;
	}
	it_free(comm, place, buf);
	free(want);
	return 0;
}

static const enum ring_dtype reduce_dtypes[] = {
	RING_BOOL, RING_INT8, RING_UINT16, RING_INT32, RING_UINT64, RING_FLOAT16,
	RING_BFLOAT16, RING_FLOAT32, RING_FLOAT64,
};
#define N_REDUCE ((int)(sizeof(reduce_dtypes) / sizeof(reduce_dtypes[0])))

/* Every collective over comm; the placements, counts and dtypes vary so each
 * combination that matters appears once without a full matrix (that is
 * it_collectives.c's job, with one process per host). */
static int every_collective(ring_comm *comm, int rank, int n, void *arg)
{
	const size_t counts[] = { 0, 1, (size_t)n - 1, 3 * (size_t)n + 1, 1009 };
	uint64_t seed = arg ? *(const uint64_t *)arg : 1;
	int k = 0;

	for (int d = 0; d < N_REDUCE; d++) {
		enum ring_dtype dt = reduce_dtypes[d];

		for (int op = 0; op < RING_OP_COUNT; op++) {
			if (op == RING_AVG && !pattern_dtype_is_float(dt))
				continue;
			k++;
			if (allreduce_one(comm, rank, n, dt, (enum ring_op)op,
					  counts[k % 5], k & 1 ? IT_HOST : IT_ARENA, k & 2, seed++))
				return 1;
		}
	}
	/* large: several segments, zero-copy and staged in place */
	if (allreduce_one(comm, rank, n, RING_FLOAT32, RING_SUM, LARGE, IT_ARENA, false,
			  seed++) ||
	    allreduce_one(comm, rank, n, RING_BFLOAT16, RING_AVG, LARGE, IT_HOST, true, seed++))
		return 1;

	for (int c = 0; c < 5; c++)
		if (allgather_one(comm, rank, n, c & 1 ? RING_INT8 : RING_FLOAT32, counts[c],
				  c & 1 ? IT_HOST : IT_ARENA, seed++))
			return 1;
	if (allgather_one(comm, rank, n, RING_FLOAT64, LARGE / 3, IT_ARENA, seed++))
		return 1;

	for (int c = 0; c < 5; c++)
		for (int v = 0; v < 4; v++) {
			static const enum ring_op rs_ops[4] = {
				RING_SUM, RING_MAX, RING_AVG, RING_PROD,
			};
			enum ring_dtype dt = v == 2 ? RING_FLOAT32 : v == 3 ? RING_INT32 :
					     v == 1 ? RING_BFLOAT16 : RING_FLOAT64;

			if (reduce_scatter_one(comm, rank, n, dt, rs_ops[v], counts[c],
					       v & 1 ? IT_HOST : IT_ARENA, c & 1, seed++))
				return 1;
		}
	if (reduce_scatter_one(comm, rank, n, RING_FLOAT32, RING_SUM, LARGE / 2, IT_ARENA,
			       true, seed++) ||
	    reduce_scatter_one(comm, rank, n, RING_FLOAT32, RING_SUM, LARGE / 2, IT_HOST,
			       false, seed++))
		return 1;

	for (int root = 0; root < n; root++)
		if (it_broadcast_one(comm, rank, n, root & 1 ? RING_INT16 : RING_FLOAT32,
				     root == n - 1 ? LARGE : counts[root % 5] + 1, root,
				     root & 1 ? IT_HOST : IT_ARENA, seed++, false))
			return 1;

	for (int i = 0; i < 5; i++)
		IT_CALL(ring_barrier(comm));

	/* Every ordered pair, in one order all ranks agree on, so no cycle of
	 * waits can form: local pairs and remote pairs alike. */
	for (int a = 0; a < n; a++)
		for (int b = 0; b < n; b++)
			if (a != b && p2p_one(comm, rank, n, a, b, (a + b) % 3 ? 77 : 70007,
					      (a + b) & 1 ? IT_HOST : IT_ARENA, seed++))
				return 1;
	IT_CALL(ring_barrier(comm));
	return 0;
}

Test(jobs, every_collective_2x2, .init = setup, .fini = teardown, .timeout = 150)
{
	start(2);
	cr_assert_eq(cluster_run_local(&cluster, 4, 2, every_collective, NULL), 0,
		     "every collective on 2 hosts x 2 processes failed (see above)");
}

Test(jobs, every_collective_3x2, .init = setup, .fini = teardown, .timeout = 150)
{
	start(3);
	cr_assert_eq(cluster_run_local(&cluster, 6, 2, every_collective, NULL), 0,
		     "every collective on 3 hosts x 2 processes failed (see above)");
}

/* ---------------------------------------------------------------------- */
/* Two jobs at once                                                        */
/* ---------------------------------------------------------------------- */

/* One job of the pair: its seed, and when its rank 0 ran the loop (in memory
 * shared with the test process, which checks that the two loops overlapped). */
struct loop_job {
	uint64_t seed;
	double t0, t1;
};

#define LOOP_ITERS	300

/* Back-to-back all-reduces of changing sizes, each checked. */
static int allreduce_loop(ring_comm *comm, int rank, int n, void *arg)
{
	struct loop_job *job = arg;
	double t0 = harness_now();

	for (int i = 0; i < LOOP_ITERS; i++) {
		size_t count = (size_t)(i * 7919) % 40000 + 1;

		if (allreduce_one(comm, rank, n, i % 3 ? RING_FLOAT32 : RING_INT64,
				  RING_SUM, count, i & 1 ? IT_HOST : IT_ARENA, i & 2,
				  job->seed + (uint64_t)i))
			return 1;
	}
	if (rank == 0) {
		job->t0 = t0;
		job->t1 = harness_now();
		fprintf(stderr, "job of %d ranks (seed %llu): %d checked all-reduces in "
			"%.2f s\n", n, (unsigned long long)job->seed, LOOP_ITERS,
			job->t1 - t0);
	}
	return 0;
}

Test(jobs, two_jobs_at_once, .init = setup, .fini = teardown, .timeout = 150)
{
	struct cluster_proc procs[6];
	struct loop_job *jobs;
	char job_a[48], job_b[48];
	double overlap;

	jobs = mmap(NULL, 2 * sizeof(*jobs), PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(jobs, MAP_FAILED);
	memset(jobs, 0, 2 * sizeof(*jobs));
	jobs[0].seed = 100000;
	jobs[1].seed = 200000;
	start(2);
	snprintf(job_a, sizeof(job_a), "it-a-%d", (int)getpid());
	snprintf(job_b, sizeof(job_b), "it-b-%d", (int)getpid());
	/* A: 2 hosts x 2 processes; B: 2 hosts x 1.  Forked together. */
	cluster_procs_local(&cluster, procs, 4, 2);
	cluster_procs_local(&cluster, procs + 4, 2, 1);
	for (int i = 0; i < 6; i++) {
		procs[i].job = i < 4 ? job_a : job_b;
		procs[i].arg = &jobs[i < 4 ? 0 : 1];
	}
	cr_assert_eq(cluster_run_procs(&cluster, procs, 6, allreduce_loop, NULL), 0,
		     "two concurrent jobs failed (see above)");
	/* Side by side, not one after the other (which would prove nothing). */
	overlap = (jobs[0].t1 < jobs[1].t1 ? jobs[0].t1 : jobs[1].t1) -
		  (jobs[0].t0 > jobs[1].t0 ? jobs[0].t0 : jobs[1].t0);
	cr_assert_gt(overlap, 0, "the jobs' loops did not overlap (A %.2f..%.2f s, B "
		     "%.2f..%.2f s)", jobs[0].t0, jobs[0].t1, jobs[1].t0, jobs[1].t1);
	munmap(jobs, 2 * sizeof(*jobs));
}

/* ---------------------------------------------------------------------- */
/* A job on hosts 0 and 2 of three                                         */
/* ---------------------------------------------------------------------- */

Test(jobs, subset_of_hosts, .init = setup, .fini = teardown, .timeout = 150)
{
	struct cluster_proc procs[2];

	start(3);
	cluster_procs_local(&cluster, procs, 2, 1);
	for (int i = 0; i < 2; i++) {
		procs[i].daemon = 2 * i;	/* daemon 1 only forwards */
		procs[i].rank = i;
		procs[i].world = 2;
	}
	cr_assert_eq(cluster_run_procs(&cluster, procs, 2, every_collective, NULL), 0,
		     "a job on daemons 0 and 2 of 3 failed (see above)");
}

/* ---------------------------------------------------------------------- */
/* Launcher ranks that are not contiguous per host                          */
/* ---------------------------------------------------------------------- */

static int interleaved(ring_comm *comm, int rank, int n, void *arg)
{
	const size_t counts[] = { 1, 1009, LARGE / 2 };
	uint64_t seed = 5000;

	for (int c = 0; c < 3; c++) {
		enum it_place place = c & 1 ? IT_HOST : IT_ARENA;

		if (allgather_one(comm, rank, n, RING_FLOAT32, counts[c], place, seed++) ||
		    reduce_scatter_one(comm, rank, n, RING_INT32, RING_SUM, counts[c], place,
				       false, seed++) ||
		    reduce_scatter_one(comm, rank, n, RING_FLOAT64, RING_MAX, counts[c], place,
				       true, seed++) ||
		    allreduce_one(comm, rank, n, RING_BFLOAT16, RING_AVG, counts[c], place,
				  c & 1, seed++) ||
		    allreduce_one(comm, rank, n, RING_UINT8, RING_MIN, counts[c], place, false,
				  seed++))
			return 1;
	}
	/* a message between the two ranks of one host */
	if (p2p_one(comm, rank, n, 2, 0, 777, IT_ARENA, seed++) ||
	    p2p_one(comm, rank, n, 1, 2, 777, IT_HOST, seed++))
		return 1;
	IT_CALL(ring_barrier(comm));
	return 0;
}

Test(jobs, noncontiguous_launcher_ranks, .init = setup, .fini = teardown, .timeout = 120)
{
	static const int ranks[4] = { 0, 2, 1, 3 };	/* host 0: 0 and 2; host 1: 1 and 3 */
	struct cluster_proc procs[4];

	start(2);
	cluster_procs_local(&cluster, procs, 4, 2);
	for (int i = 0; i < 4; i++) {
		procs[i].rank = procs[i].expect_rank = ranks[i];
		procs[i].world = 4;
	}
	cr_assert_eq(cluster_run_procs(&cluster, procs, 4, interleaved, NULL), 0,
		     "ranks 0,2 on host 0 and 1,3 on host 1 failed (see above)");
}

/* Unequal local sizes are fine once the launcher numbers the ranks: three
 * processes on host 0 (ranks 0, 3, 1) and one on host 1 (rank 2). */
Test(jobs, unequal_local_sizes_with_launcher_ranks, .init = setup, .fini = teardown,
     .timeout = 120)
{
	static const int ranks[4] = { 0, 3, 1, 2 };
	struct cluster_proc procs[4];

	start(2);
	cluster_procs_local(&cluster, procs, 3, 3);
	cluster_procs_local(&cluster, procs + 3, 1, 1);
	procs[3].daemon = 1;
	for (int i = 0; i < 4; i++) {
		procs[i].rank = procs[i].expect_rank = ranks[i];
		procs[i].world = procs[i].expect_size = 4;
	}
	cr_assert_eq(cluster_run_procs(&cluster, procs, 4, interleaved, NULL), 0,
		     "3 + 1 processes with launcher ranks failed (see above)");
}

/* ---------------------------------------------------------------------- */
/* ring_split                                                              */
/* ---------------------------------------------------------------------- */

/* An all-reduce in sub whose members are the given parent ranks (in sub's
 * order): each contributes parent_rank + 1, so the sum names the members. */
static int sub_allreduce(ring_comm *sub, const int *members, int nmembers, int parent_rank)
{
	int64_t v[3] = { parent_rank + 1, 1, 0 }, want = 0;

	for (int i = 0; i < nmembers; i++)
		want += members[i] + 1;
	IT_CALL(ring_allreduce(sub, v, v, 3, RING_INT64, RING_SUM));
	IT_CHECK(v[0] == want && v[1] == nmembers && v[2] == 0,
		 "all-reduce in a sub-communicator gave {%lld, %lld, %lld}, expected "
		 "{%lld, %d, 0}", (long long)v[0], (long long)v[1], (long long)v[2],
		 (long long)want, nmembers);
	return 0;
}

/* Checks sub's rank and size against the expected member list, then gathers
 * the parent ranks to check the order, and runs a few collectives in it. */
static int check_sub(ring_comm *sub, const int *members, int nmembers, int parent_rank,
		     uint64_t seed)
{
	int32_t mine = parent_rank, all[8];
	int me = -1;

	for (int i = 0; i < nmembers; i++)
		if (members[i] == parent_rank)
			me = i;
	IT_CHECK(sub, "no sub-communicator for parent rank %d", parent_rank);
	IT_CHECK(ring_rank(sub) == me && ring_size(sub) == nmembers,
		 "parent rank %d is rank %d of %d in its group, expected %d of %d",
		 parent_rank, ring_rank(sub), ring_size(sub), me, nmembers);
	IT_CALL(ring_allgather(sub, &mine, all, 1, RING_INT32));
	for (int i = 0; i < nmembers; i++)
		IT_CHECK(all[i] == members[i], "rank %d of the group is parent rank %d, "
			 "expected %d", i, all[i], members[i]);
	if (sub_allreduce(sub, members, nmembers, parent_rank) ||
	    allreduce_one(sub, me, nmembers, RING_FLOAT32, RING_AVG, 1009, IT_HOST, true,
			  seed) ||
	    reduce_scatter_one(sub, me, nmembers, RING_INT32, RING_SUM, 333, IT_ARENA, false,
			       seed + 1) ||
	    it_broadcast_one(sub, me, nmembers, RING_UINT16, 500, nmembers - 1, IT_HOST,
			     seed + 2, false))
		return 1;
	if (nmembers > 1 && p2p_one(sub, me, nmembers, nmembers - 1, 0, 140, IT_ARENA,
				    seed + 3))
		return 1;
	IT_CALL(ring_barrier(sub));
	return 0;
}

static int split_groups(ring_comm *comm, int rank, int n, void *arg)
{
	ring_comm *sub = NULL, *rev = NULL, *host0 = NULL;
	int even[2] = { 0, 2 }, odd[2] = { 1, 3 }, all_rev[4] = { 3, 2, 1, 0 };
	int first_host[2] = { 0, 1 };

	IT_CHECK(n == 4, "split_groups needs 4 ranks, not %d", n);
	/* even and odd ranks: each group spans both hosts, one process on each */
	IT_CALL(ring_split(comm, rank % 2, rank, &sub));
	if (check_sub(sub, rank % 2 ? odd : even, 2, rank, 6000))
		return 1;
	/* the parent while the split is open */
	if (sub_allreduce(comm, all_rev, 4, rank))
		return 1;
	/* everyone, keys reversed: the order follows the key, not the rank */
	IT_CALL(ring_split(comm, 5, -rank, &rev));
	if (check_sub(rev, all_rev, 4, rank, 6100))
		return 1;
	/* only host 0's two processes (a job on one of the hosts, two local
	 * ranks); the others pass a negative color and get no group */
	IT_CALL(ring_split(comm, rank < 2 ? 0 : -1, 0, &host0));
	if (rank < 2) {
		if (check_sub(host0, first_host, 2, rank, 6200))
			return 1;
	} else {
		IT_CHECK(host0 == NULL, "a negative color gave a communicator");
	}
	/* closing a sub-communicator leaves the parent and the others alone */
	IT_CALL(ring_close(sub));
	if (sub_allreduce(rev, all_rev, 4, rank))
		return 1;
	IT_CALL(ring_close(rev));
	if (host0)
		IT_CALL(ring_close(host0));
	if (sub_allreduce(comm, all_rev, 4, rank) ||
	    allreduce_one(comm, rank, n, RING_FLOAT32, RING_SUM, LARGE, IT_HOST, false, 6300))
		return 1;
	IT_CALL(ring_barrier(comm));
	return 0;
}

Test(jobs, split_even_odd, .init = setup, .fini = teardown, .timeout = 120)
{
	start(2);
	cr_assert_eq(cluster_run_local(&cluster, 4, 2, split_groups, NULL), 0,
		     "ring_split on 2 hosts x 2 processes failed (see above)");
}

/* ---------------------------------------------------------------------- */
/* Refusals at attach time                                                  */
/* ---------------------------------------------------------------------- */

static bool mentions(const char *text, const char *word)
{
	size_t n = strlen(word);

	for (; *text; text++)
		if (!strncasecmp(text, word, n))
			return true;
	return false;
}

/* ring_open must fail, promptly and not by the timeout, saying why. */
static int expect_open_refused(ring_comm *unused, int proc, int nprocs, void *arg)
{
	ring_comm *comm = NULL;
	double t0 = harness_now();
	int rc = ring_open(&comm, NULL);
	const char *msg = ring_last_error(NULL);

	if (rc == 0) {
		it_fail(__FILE__, __LINE__, "process %d: ring_open accepted unequal local sizes "
			"without launcher ranks (rank %d of %d)", proc, ring_rank(comm),
			ring_size(comm));
		ring_close(comm);
		return 1;
	}
	IT_CHECK(rc != RING_ETIMEDOUT, "process %d: refused only by the timeout after "
		 "%.1f s: %s", proc, harness_now() - t0, msg);
	IT_CHECK(mentions(msg, "local") || mentions(msg, "per host"), "process %d: the "
		 "message does not name the unequal local sizes: %s", proc, msg);
	fprintf(stderr, "process %d: refused as expected (%s, %.2f s): %s\n", proc,
		ring_strerror(rc), harness_now() - t0, msg);
	return 0;
}

Test(jobs, unequal_local_sizes_refused, .init = setup, .fini = teardown, .timeout = 120)
{
	struct cluster_proc procs[3];

	start(2);
	/* daemon 0: two processes (local size 2); daemon 1: one (local size 1) */
	cluster_procs_local(&cluster, procs, 2, 2);
	cluster_procs_local(&cluster, procs + 2, 1, 1);
	procs[2].daemon = 1;
	for (int i = 0; i < 3; i++) {
		procs[i].rank = procs[i].world = -1;	/* no launcher ranks */
		procs[i].self_open = true;
	}
	cr_assert_eq(cluster_run_procs(&cluster, procs, 3, expect_open_refused, NULL), 0,
		     "unequal local sizes were not refused clearly (see above)");
}

/* ---------------------------------------------------------------------- */
/* ringctl jobs --json while a job runs                                     */
/* ---------------------------------------------------------------------- */

/* The global ranks a job entry lists: plain integers or objects with "rank". */
static int job_ranks(json_t *job, bool *seen, int n)
{
	json_t *ranks = json_object_get(job, "ranks"), *v;
	size_t i;
	int count = 0;

	json_array_foreach(ranks, i, v) {
		json_t *r = json_is_object(v) ? json_object_get(v, "rank") : v;

		if (json_is_integer(r) && json_integer_value(r) >= 0 &&
		    json_integer_value(r) < n) {
			seen[json_integer_value(r)] = true;
			count++;
		}
	}
	return count;
}

static int ringctl_jobs(ring_comm *comm, int rank, int n, void *arg)
{
	const struct ring_cluster *c = arg;
	const char *job = getenv("RING_JOB");
	char bin[512], *out = malloc(1 << 20);
	int bad = 0;

	IT_CHECK(out && job, "setup");
	IT_CALL(ring_barrier(comm));	/* everyone attached, the job formed */
	if (rank == 0) {
		harness_bin(bin, sizeof(bin), "ringctl");
		for (int d = 0; d < c->n && !bad; d++) {
			char *argv[] = { bin, "--control", (char *)(uintptr_t)c->controls[d], "jobs",
					 "--json", NULL };
			bool seen[8] = { false };
			json_error_t jerr;
			json_t *doc, *jobs, *entry, *found = NULL;
			size_t i;
			int rc = harness_exec(argv, NULL, out, 1 << 20, 20);

			IT_CHECK(rc == 0 || rc == 1, "ringctl jobs --json on daemon %d exited %d:\n%s",
				 d, rc, out);
			doc = json_loads(out, 0, &jerr);
			IT_CHECK(doc, "daemon %d: not JSON (%s):\n%s", d, jerr.text, out);
			jobs = json_object_get(doc, "jobs");
			json_array_foreach(jobs, i, entry) {
				const char *name = json_string_value(json_object_get(entry, "name"));

				if (name && !strcmp(name, job))
					found = entry;
			}
			if (!found) {
				it_fail(__FILE__, __LINE__, "daemon %d does not list job %s:\n%s", d,
					job, out);
				bad = 1;
			} else {
				job_ranks(found, seen, n);
				/* at least this daemon's own ranks, 2d and 2d + 1 */
				if (!seen[2 * d] || !seen[2 * d + 1]) {
					it_fail(__FILE__, __LINE__, "daemon %d lists job %s without "
						"its ranks %d and %d:\n%s", d, job, 2 * d, 2 * d + 1,
						out);
					bad = 1;
				}
			}
			json_decref(doc);
		}
	}
	free(out);
	/* nobody leaves before rank 0 has looked */
	IT_CALL(ring_barrier(comm));
	return bad;
}

Test(jobs, ringctl_lists_the_job, .init = setup, .fini = teardown, .timeout = 120)
{
	start(2);
	cr_assert_eq(cluster_run_local(&cluster, 4, 2, ringctl_jobs, &cluster), 0,
		     "ringctl jobs --json did not show the job (see above)");
}

/* ---------------------------------------------------------------------- */
/* A stray process with a running job's name                               */
/* ---------------------------------------------------------------------- */

#define STRAYS	3

struct stray_state {
	atomic_int formed;		/* ranks of the running job that opened */
	atomic_int ops;			/* its checked all-reduces so far */
	atomic_int strays_done;		/* strays that have their answer */
	atomic_int target;		/* all-reduces the job runs in all: both ranks
					 * stop at the same one, which the test sets
					 * ahead of where they are */
	int rc[STRAYS];			/* what each stray's ring_open gave */
	double secs[STRAYS];		/* ... after how long */
	char err[STRAYS][256];
};

static int running_job(ring_comm *comm, int rank, int n, void *arg)
{
	struct stray_state *st = arg;

	atomic_fetch_add(&st->formed, 1);
	for (int i = 0; i < atomic_load(&st->target); i++) {
		if (allreduce_one(comm, rank, n, RING_FLOAT32, RING_SUM, 1000 + (size_t)i,
				  IT_ARENA, false, 5000 + (uint64_t)i))
			return 1;
		if (rank == 0)
			atomic_fetch_add(&st->ops, 1);
	}
	return 0;
}

static int stray(ring_comm *unused, int idx, int n, void *arg)
{
	struct stray_state *st = arg;
	int k = idx;
	ring_comm *comm = NULL;
	double t0 = harness_now();

	(void)unused;
	(void)n;
	st->rc[k] = ring_open(&comm, NULL);
	st->secs[k] = harness_now() - t0;
	snprintf(st->err[k], sizeof(st->err[k]), "%s", ring_last_error(comm));
	if (comm != NULL)
		ring_close(comm);
	atomic_fetch_add(&st->strays_done, 1);
	return 0;
}

/* A process that attaches with a running job's name and another shape is the
 * newcomer: it is refused at once, on a host of the job and on a host without
 * one of its ranks, and the job runs on unharmed. */
Test(jobs, stray_attach_is_refused, .init = setup, .fini = teardown, .timeout = 150)
{
	struct stray_state *st = harness_shared(sizeof(*st));
	struct cluster_proc procs[2 + STRAYS];
	struct cluster_job job, strays;
	char name[48];
	int before;

	start(3);
	atomic_store(&st->target, 100000);
	snprintf(name, sizeof(name), "it-stray-%d", (int)getpid());
	memset(procs, 0, sizeof(procs));
	for (int i = 0; i < 2 + STRAYS; i++) {
		procs[i].job = name;
		procs[i].local_size = 1;
		procs[i].expect_rank = procs[i].expect_size = -1;
	}
	for (int i = 0; i < 2; i++) {	/* the job: hosts 0 and 1, world 2 */
		procs[i].daemon = i;
		procs[i].rank = procs[i].expect_rank = i;
		procs[i].world = procs[i].expect_size = 2;
	}
	/* host 2, launcher ranks of a world of 4 */
	procs[2] = (struct cluster_proc){ .daemon = 2, .local_size = 1, .rank = 2, .world = 4 };
	/* host 2, no launcher ranks: rank 2 of 3 */
	procs[3] = (struct cluster_proc){ .daemon = 2, .local_size = 1, .rank = -1, .world = -1 };
	/* host 0, beside the job's rank 0: rank 1 of 3 */
	procs[4] = (struct cluster_proc){ .daemon = 0, .local_size = 1, .rank = 1, .world = 3 };
	for (int i = 2; i < 2 + STRAYS; i++) {
		procs[i].job = name;
		procs[i].expect_rank = procs[i].expect_size = -1;
		procs[i].fn = stray;
		procs[i].self_open = true;
	}
	cr_assert_eq(cluster_spawn_procs(&cluster, procs, 2, running_job, st, &job), 0);
	for (int t = 0; t < 3000 && atomic_load(&st->ops) < 5; t++)
		usleep(10000);
	cr_assert_geq(atomic_load(&st->ops), 5, "the job did not run");
	setenv("RING_TIMEOUT_MS", "10000", 1);
	cr_assert_eq(cluster_spawn_procs(&cluster, procs + 2, STRAYS, stray, st, &strays), 0);
	setenv("RING_TIMEOUT_MS", "30000", 1);
	cr_assert_eq(cluster_wait(&strays), 0, "a stray process failed (see above)");
	for (int k = 0; k < STRAYS; k++) {
		cr_assert_eq(st->rc[k], RING_EINVAL, "stray %d: ring_open gave %d (%s): %s", k,
			     st->rc[k], ring_strerror(st->rc[k]), st->err[k]);
		cr_assert_lt(st->secs[k], 5.0, "stray %d was refused only after %.1f s", k,
			     st->secs[k]);
		cr_assert(strstr(st->err[k], name) != NULL, "stray %d: '%s' does not name the "
			  "job", k, st->err[k]);
	}
	before = atomic_load(&st->ops);
	atomic_store(&st->target, before + 20);
	cr_assert_eq(cluster_wait(&job), 0, "the running job failed after the strays");
	cr_assert_eq(atomic_load(&st->ops), before + 20, "the job stalled after the strays");
}

/* A process that opens a second communicator of its job is told that it is
 * itself the holder, and how to share the open one. */
static int second_open(ring_comm *comm, int rank, int n, void *arg)
{
	ring_comm *again = NULL;
	int rc;

	(void)rank;
	(void)n;
	(void)arg;
	rc = ring_open(&again, NULL);
	IT_CHECK(rc == RING_EINVAL, "a second ring_open in one process gave %d (%s): %s", rc,
		 ring_strerror(rc), ring_last_error(again));
	IT_CHECK(strstr(ring_last_error(again), "this process") != NULL &&
		 strstr(ring_last_error(again), "share it") != NULL,
		 "the error does not say the process holds it itself: %s",
		 ring_last_error(again));
	ring_close(again);
	IT_CALL(ring_barrier(comm));	/* the first one still works */
	return 0;
}

Test(jobs, second_open_in_one_process, .init = setup, .fini = teardown, .timeout = 120)
{
	start(2);
	cr_assert_eq(cluster_run(&cluster, 2, second_open, NULL), 0,
		     "a second open in one process (see above)");
}
