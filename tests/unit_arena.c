/*
 * unit_arena.c - tests of libring's shared arena and of how operands reach it.
 *
 * Three layers: the allocator alone (libring/arena.c: placement, alignment, first
 * fit, coalescing, refusal of foreign pointers, a randomised run against a model);
 * the public API of a size-1 group (RING_SINGLE=1: ring_alloc/ring_free, identity
 * collectives and their requests, argument checks, the group given by default
 * when no daemon socket exists, RING_STRICT=1 refusing it); and a fake ringd on a private socket that speaks
 * the client protocol, simulates the other ranks of a job (all-reduce sums size
 * equal contributions, all-gather tags each rank's block, ...) and records every
 * request.  The fake checks that every request stays inside the arena, and the
 * tests check results, the split into pieces (the same whatever the placement),
 * strides, staging, and the failure paths (daemon gone, malformed reply, error
 * status, silent daemon, arena too small).
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "libring/internal.h"
#include "proto/dtype.h"

static const char *const launcher_vars[] = {
	"RING_SOCKET", "RING_JOB", "RING_TIMEOUT_MS", "RING_ARENA_MB", "RING_SINGLE",
	"RING_DEBUG", "RING_RANK", "RING_WORLD_SIZE", "RING_LOCAL_RANK", "RING_LOCAL_SIZE",
	"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
	"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
	"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "SLURM_PROCID",
	"SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE",
	"MLX_RANK", "MLX_HOSTFILE", "RING_STRICT",
};

static void scrub_env(void)
{
	size_t i;

	for (i = 0; i < sizeof(launcher_vars) / sizeof(launcher_vars[0]); i++)
		unsetenv(launcher_vars[i]);
}

/* =================================================================== */
/* The allocator alone                                                 */
/* =================================================================== */

static struct lr_arena A;
static char aerr[LR_ERR_MAX];

static void arena_setup(void)
{
	cr_assert_eq(lr_arena_create(&A, 1 << 20, aerr, sizeof(aerr)), 0, "%s", aerr);
}

static void arena_teardown(void)
{
	lr_arena_destroy(&A);
}

TestSuite(arena, .init = arena_setup, .fini = arena_teardown);

static uint64_t offset_of(const void *p)
{
	return (uint64_t)((const uint8_t *)p - A.base);
}

Test(arena, created_sealed_and_marked)
{
	const struct proto_arena_ctl *ctl = (const void *)A.base;
	struct stat st;
	int seals;

	cr_assert_eq(A.bytes, 1 << 20);
	cr_assert_eq(ctl->magic, PROTO_ARENA_MAGIC);
	cr_assert_eq(fstat(A.fd, &st), 0);
	cr_assert_eq(st.st_size, 1 << 20);
	seals = fcntl(A.fd, F_GET_SEALS);
	cr_assert_eq(seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
		     F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	cr_assert_neq(ftruncate(A.fd, 4096), 0, "a sealed arena shrank");
	cr_assert_neq(ftruncate(A.fd, 2 << 20), 0, "a sealed arena grew");
	cr_assert(fcntl(A.fd, F_GETFD) & FD_CLOEXEC);
	cr_assert_eq(lr_arena_usable(&A), (1 << 20) - PROTO_ARENA_CTL);
	cr_assert_eq(lr_arena_largest(&A), (1 << 20) - PROTO_ARENA_CTL);
}

Test(arena, size_rounding)
{
	struct lr_arena b;

	cr_assert_eq(lr_arena_create(&b, 1, aerr, sizeof(aerr)), 0, "%s", aerr);
	cr_assert_eq(b.bytes, PROTO_ARENA_CTL + 4096);
	lr_arena_destroy(&b);
	cr_assert_eq(lr_arena_create(&b, 3 * 4096 + 1, aerr, sizeof(aerr)), 0, "%s", aerr);
	cr_assert_eq(b.bytes, 4 * 4096);
	lr_arena_destroy(&b);
	cr_assert_eq(lr_arena_create(&b, SIZE_MAX, aerr, sizeof(aerr)), RING_EINVAL);
	cr_assert(strstr(aerr, "limit"), "%s", aerr);
	lr_arena_destroy(&b);	/* safe after a failed create */
}

Test(arena, aligned_and_outside_the_control_page)
{
	size_t sizes[] = { 0, 1, 255, 256, 257, 1000, 4096, 5000 };
	void *p[8];
	size_t i, j;

	for (i = 0; i < 8; i++) {
		p[i] = lr_arena_alloc(&A, sizes[i]);
		cr_assert_not_null(p[i]);
		cr_assert_eq(offset_of(p[i]) % LR_ALIGN, 0);
		cr_assert_geq(offset_of(p[i]), PROTO_ARENA_CTL);
		cr_assert(lr_arena_find(&A, p[i], sizes[i], NULL));
		memset(p[i], 0x11 * (int)i, sizes[i]);
	}
	/* No two blocks overlap: each kept its own fill. */
	for (i = 0; i < 8; i++)
		for (j = 0; j < sizes[i]; j++)
			cr_assert_eq(((uint8_t *)p[i])[j], (uint8_t)(0x11 * i));
	for (i = 0; i < 8; i++)
		cr_assert_eq(lr_arena_free(&A, p[i]), 0);
	cr_assert_eq(A.nlive, 0);
	cr_assert_eq(lr_arena_largest(&A), lr_arena_usable(&A));
}

Test(arena, first_fit_reuses_the_lowest_hole)
{
	void *a = lr_arena_alloc(&A, 1024);
	void *b = lr_arena_alloc(&A, 4096);
	void *c = lr_arena_alloc(&A, 1024);
	void *d = lr_arena_alloc(&A, 1024);
	void *e, *f;

	cr_assert(a && b && c && d);
	cr_assert_eq(offset_of(a), PROTO_ARENA_CTL);
	cr_assert_lt(offset_of(a), offset_of(b));
	cr_assert_lt(offset_of(b), offset_of(c));
	cr_assert_eq(lr_arena_free(&A, b), 0);
	cr_assert_eq(lr_arena_free(&A, d), 0);
	/* Both holes fit; first fit takes the lower one (b's). */
	e = lr_arena_alloc(&A, 512);
	cr_assert_eq(e, b);
	f = lr_arena_alloc(&A, 3584);
	cr_assert_eq(offset_of(f), offset_of(b) + 512);
	/* Too big for what is left of the hole: goes after c. */
	cr_assert_eq(lr_arena_alloc(&A, 2048), d);
}

Test(arena, coalescing_both_ways)
{
	size_t usable = lr_arena_usable(&A);
	void *a = lr_arena_alloc(&A, 8192);
	void *b = lr_arena_alloc(&A, 8192);
	void *c = lr_arena_alloc(&A, 8192);
	void *big;

	cr_assert(a && b && c);
	cr_assert_eq(lr_arena_free(&A, a), 0);
	cr_assert_eq(lr_arena_free(&A, c), 0);	/* merges with the tail */
	cr_assert_eq(lr_arena_largest(&A), usable - 2 * 8192);
	cr_assert_eq(lr_arena_free(&A, b), 0);	/* merges with both neighbours */
	cr_assert_eq(lr_arena_largest(&A), usable);
	cr_assert_eq(A.free_bytes, usable);
	big = lr_arena_alloc(&A, usable);
	cr_assert_eq(offset_of(big), PROTO_ARENA_CTL);
	cr_assert_null(lr_arena_alloc(&A, 1));
	cr_assert_eq(lr_arena_free(&A, big), 0);
}

Test(arena, refuses_what_does_not_fit)
{
	cr_assert_null(lr_arena_alloc(&A, lr_arena_usable(&A) + 1));
	cr_assert_null(lr_arena_alloc(&A, SIZE_MAX));
	cr_assert_null(lr_arena_alloc(&A, SIZE_MAX - 100));
	cr_assert_eq(A.nlive, 0);
	cr_assert_eq(A.free_bytes, lr_arena_usable(&A));
}

Test(arena, foreign_and_stale_pointers)
{
	char local;
	uint8_t *a = lr_arena_alloc(&A, 1000);

	cr_assert_not_null(a);
	cr_assert_eq(lr_arena_free(&A, NULL), 0);
	cr_assert_eq(lr_arena_free(&A, &local), RING_EINVAL);
	cr_assert_eq(lr_arena_free(&A, a + 256), RING_EINVAL);	/* interior */
	cr_assert_eq(lr_arena_free(&A, A.base), RING_EINVAL);	/* control page */
	cr_assert_eq(lr_arena_free(&A, A.base + A.bytes), RING_EINVAL);
	cr_assert_eq(A.nlive, 1);
	cr_assert_eq(lr_arena_free(&A, a), 0);
	cr_assert_eq(lr_arena_free(&A, a), RING_EINVAL);		/* double free */
	cr_assert_eq(A.nlive, 0);
}

Test(arena, find)
{
	uint64_t off = 0;
	uint8_t *end = A.base + A.bytes;
	char local[16];

	cr_assert(lr_arena_find(&A, A.base + PROTO_ARENA_CTL, 16, &off));
	cr_assert_eq(off, PROTO_ARENA_CTL);
	cr_assert(lr_arena_find(&A, end - 16, 16, &off));
	cr_assert_eq(off, A.bytes - 16);
	cr_assert_not(lr_arena_find(&A, end - 16, 17, &off), "straddles the end");
	cr_assert_not(lr_arena_find(&A, A.base + PROTO_ARENA_CTL - 1, 2, &off),
		      "starts in the control page");
	cr_assert_not(lr_arena_find(&A, A.base, 1, &off));
	cr_assert_not(lr_arena_find(&A, local, sizeof(local), &off));
	cr_assert_not(lr_arena_find(&A, end, 1, &off));
	cr_assert_not(lr_arena_find(&A, A.base + PROTO_ARENA_CTL, SIZE_MAX, &off));
}

/* Random allocations and frees against a byte-map model of ownership. */
Test(arena, random_against_a_model)
{
	enum { SLOTS = 200, ROUNDS = 20000 };
	static uint16_t owner[1 << 20];	/* 0: free; else slot + 1 */
	void *p[SLOTS] = { 0 };
	size_t sz[SLOTS] = { 0 };
	unsigned seed = 12345;
	size_t i, j, k;

	for (k = 0; k < ROUNDS; k++) {
		i = (size_t)rand_r(&seed) % SLOTS;
		if (p[i]) {
			uint64_t o = offset_of(p[i]);

			for (j = 0; j < sz[i]; j++) {
				cr_assert_eq(owner[o + j], i + 1, "block %zu was overwritten", i);
				owner[o + j] = 0;
			}
			cr_assert_eq(lr_arena_free(&A, p[i]), 0);
			p[i] = NULL;
			continue;
		}
		sz[i] = (size_t)rand_r(&seed) % ((rand_r(&seed) & 7) ? 2048 : 40000) + 1;
		p[i] = lr_arena_alloc(&A, sz[i]);
		if (!p[i]) {
			cr_assert_lt(lr_arena_largest(&A), sz[i], "a fitting hole was missed");
			continue;
		}
		cr_assert_eq(offset_of(p[i]) % LR_ALIGN, 0);
		cr_assert_geq(offset_of(p[i]), PROTO_ARENA_CTL);
		cr_assert_leq(offset_of(p[i]) + sz[i], A.bytes);
		for (j = 0; j < sz[i]; j++) {
			cr_assert_eq(owner[offset_of(p[i]) + j], 0, "blocks overlap");
			owner[offset_of(p[i]) + j] = (uint16_t)(i + 1);
		}
	}
	for (i = 0; i < SLOTS; i++)
		cr_assert_eq(lr_arena_free(&A, p[i]), 0);
	cr_assert_eq(A.nlive, 0);
	cr_assert_eq(A.free_bytes, lr_arena_usable(&A));
	cr_assert_eq(lr_arena_largest(&A), lr_arena_usable(&A), "free blocks not coalesced");
}

/* =================================================================== */
/* A size-1 group (RING_SINGLE=1): the public API without a daemon     */
/* =================================================================== */

static ring_comm *single_open(void)
{
	struct ring_options o;
	ring_comm *c = NULL;

	scrub_env();
	setenv("RING_SINGLE", "1", 1);
	memset(&o, 0, sizeof(o));
	o.arena_bytes = 1 << 20;
	cr_assert_eq(ring_open(&c, &o), 0, "%s", ring_last_error(NULL));
	cr_assert_not_null(c);
	return c;
}

Test(single, identity_collectives)
{
	ring_comm *c = single_open();
	float a[100], b[100];
	float *s = ring_alloc(c, sizeof(a)), *r = ring_alloc(c, sizeof(a));
	size_t shape[2] = { 10, 10 };
	int i;

	cr_assert_eq(ring_rank(c), 0);
	cr_assert_eq(ring_size(c), 1);
	for (i = 0; i < 100; i++)
		a[i] = s[i] = (float)i * 0.5f;
	memset(b, 0, sizeof(b));
	cr_assert_eq(ring_allreduce(c, a, b, 100, RING_FLOAT32, RING_AVG), 0);
	cr_assert_arr_eq(a, b, sizeof(a));
	cr_assert_eq(ring_allreduce(c, s, s, 100, RING_FLOAT32, RING_SUM), 0);
	cr_assert_arr_eq(a, s, sizeof(a));
	memset(b, 0, sizeof(b));
	cr_assert_eq(ring_allgather(c, a, b, 100, RING_FLOAT32), 0);
	cr_assert_arr_eq(a, b, sizeof(a));
	memset(r, 0, sizeof(a));
	cr_assert_eq(ring_reduce_scatter(c, s, r, 100, RING_FLOAT32, RING_MAX), 0);
	cr_assert_arr_eq(a, r, sizeof(a));
	cr_assert_eq(ring_broadcast(c, b, 100, RING_FLOAT32, 0), 0);
	cr_assert_arr_eq(a, b, sizeof(a));
	cr_assert_eq(ring_barrier(c), 0);
	cr_assert_eq(ring_allreduce(c, NULL, NULL, 0, RING_FLOAT32, RING_SUM), 0);

	cr_assert_eq(ring_send(c, a, RING_FLOAT32, 2, shape, 0), RING_EINVAL);
	cr_assert(strstr(ring_last_error(c), "size-1"), "%s", ring_last_error(c));
	cr_assert_eq(ring_recv(c, a, RING_FLOAT32, 2, shape, 0), RING_EINVAL);
	cr_assert_eq(ring_broadcast(c, b, 100, RING_FLOAT32, 1), RING_EINVAL);
	ring_free(c, s);
	ring_free(c, r);
	cr_assert_eq(ring_close(c), 0);
}

Test(single, alloc_and_free)
{
	ring_comm *c = single_open();
	char local;
	void *p, *q;

	p = ring_alloc(c, 2 << 20);
	cr_assert_null(p);
	cr_assert(strstr(ring_last_error(c), "ring_alloc"), "%s", ring_last_error(c));
	cr_assert(strstr(ring_last_error(c), "RING_ARENA_MB"), "%s", ring_last_error(c));
	p = ring_alloc(c, 1000);
	cr_assert_not_null(p);
	cr_assert_eq((uintptr_t)p % 256, 0);
	ring_free(c, NULL);
	ring_free(c, &local);
	cr_assert(strstr(ring_last_error(c), "not a live"), "%s", ring_last_error(c));
	ring_free(c, p);
	q = ring_alloc(c, 1000);
	cr_assert_eq(p, q, "a freed block was not reused");
	ring_free(c, q);
	ring_free(c, q);
	cr_assert(strstr(ring_last_error(c), "ignored"), "%s", ring_last_error(c));
	cr_assert_eq(ring_close(c), 0);
}

/* ring_arena_keep: the arena stays mapped past ring_close, whole, with what
 * the blocks held, until the caller unmaps it. */
Test(single, arena_kept_past_close)
{
	ring_comm *c = single_open();
	size_t bytes = 0;
	uint8_t *base, *p;

	cr_assert_null(ring_arena_keep(NULL, &bytes));
	p = ring_alloc(c, 4096);
	cr_assert_not_null(p);
	memset(p, 0x5a, 4096);
	base = ring_arena_keep(c, &bytes);
	cr_assert_not_null(base, "%s", ring_last_error(c));
	cr_assert(p >= base && p + 4096 <= base + bytes);
	cr_assert_eq(ring_close(c), 0);
	cr_assert_eq(p[0], 0x5a);
	cr_assert_eq(p[4095], 0x5a);
	p[17] = 1;	/* still writable */
	cr_assert_eq(munmap(base, bytes), 0);
}

Test(single, argument_checks)
{
	ring_comm *c = single_open();
	int32_t v[4] = { 1, 2, 3, 4 };
	size_t shape[RING_MAX_NDIM + 1] = { 1 };
	ring_comm *out = (ring_comm *)1;

	cr_assert_eq(ring_allreduce(NULL, v, v, 4, RING_INT32, RING_SUM), RING_EINVAL);
	cr_assert(strstr(ring_last_error(NULL), "NULL"), "%s", ring_last_error(NULL));
	cr_assert_eq(ring_allreduce(c, v, v, 4, RING_INT32, RING_AVG), RING_EINVAL);
	cr_assert(strstr(ring_last_error(c), "int32"), "%s", ring_last_error(c));
	cr_assert_eq(ring_allreduce(c, v, v, 4, (enum ring_dtype)99, RING_SUM), RING_EINVAL);
	cr_assert(strstr(ring_last_error(c), "99"), "%s", ring_last_error(c));
	cr_assert_eq(ring_allreduce(c, v, v, 4, RING_INT32, (enum ring_op)7), RING_EINVAL);
	cr_assert_eq(ring_allreduce(c, v, v, 4, RING_INT32, (enum ring_op)-1), RING_EINVAL);
	cr_assert_eq(ring_allreduce(c, NULL, v, 4, RING_INT32, RING_SUM), RING_EINVAL);
	cr_assert(strstr(ring_last_error(c), "send"), "%s", ring_last_error(c));
	cr_assert_eq(ring_allreduce(c, v, NULL, 4, RING_INT32, RING_SUM), RING_EINVAL);
	cr_assert_eq(ring_allreduce(c, v, v, SIZE_MAX / 2, RING_INT32, RING_SUM), RING_EINVAL);
	cr_assert(strstr(ring_last_error(c), "overflow"), "%s", ring_last_error(c));
	cr_assert_eq(ring_allgather(c, v, NULL, 4, RING_INT32), RING_EINVAL);
	cr_assert_eq(ring_reduce_scatter(c, v, v, 4, RING_BOOL, RING_AVG), RING_EINVAL);
	cr_assert_eq(ring_broadcast(c, v, 4, RING_INT32, -1), RING_EINVAL);
	cr_assert(strstr(ring_last_error(c), "root -1"), "%s", ring_last_error(c));
	cr_assert_eq(ring_send(c, v, RING_INT32, RING_MAX_NDIM + 1, shape, 0), RING_EINVAL);
	cr_assert(strstr(ring_last_error(c), "ndim"), "%s", ring_last_error(c));
	cr_assert_eq(ring_send(c, v, RING_INT32, 2, NULL, 0), RING_EINVAL);
	cr_assert_eq(ring_split(c, 0, 0, NULL), RING_EINVAL);
	cr_assert_eq(ring_split(NULL, 0, 0, &out), RING_EINVAL);
	cr_assert_null(out);
	cr_assert_eq(ring_close(c), 0);
	cr_assert_eq(ring_close(NULL), 0);
}

/* A size-1 group splits into size-1 groups; a negative color joins none. */
Test(single, split)
{
	ring_comm *c = single_open(), *sub = (ring_comm *)1;
	int32_t v[3] = { 1, 2, 3 }, w[3];

	cr_assert_eq(ring_split(c, -1, 0, &sub), 0, "%s", ring_last_error(c));
	cr_assert_null(sub);
	cr_assert_eq(ring_split(c, 7, 3, &sub), 0, "%s", ring_last_error(c));
	cr_assert_not_null(sub);
	cr_assert_eq(ring_rank(sub), 0);
	cr_assert_eq(ring_size(sub), 1);
	cr_assert_eq(ring_allreduce(sub, v, w, 3, RING_INT32, RING_SUM), 0);
	cr_assert_arr_eq(v, w, sizeof(v));
	cr_assert_not_null(ring_alloc(sub, 1000));
	cr_assert_eq(ring_close(sub), 0);
	cr_assert_eq(ring_allreduce(c, v, w, 3, RING_INT32, RING_MAX), 0);
	cr_assert_eq(ring_close(c), 0);
}

Test(single, not_when_a_daemon_is_expected)
{
	ring_comm *c = (ring_comm *)1;

	scrub_env();
	setenv("RING_SINGLE", "1", 1);
	setenv("RING_SOCKET", "/nonexistent/ringd.sock", 1);
	cr_assert_eq(ring_open(&c, NULL), RING_EDAEMON);
	cr_assert_null(c);
	cr_assert(strstr(ring_last_error(NULL), "/nonexistent/ringd.sock"), "%s",
		  ring_last_error(NULL));
	cr_assert(strstr(ring_last_error(NULL), strerror(ENOENT)), "%s", ring_last_error(NULL));
}

/* Non-blocking calls on a size-1 group: complete at once, results copied. */
Test(single, requests)
{
	ring_comm *c = single_open();
	float a[100], b[100], *s = ring_alloc(c, sizeof(a));
	size_t shape[1] = { 100 };
	ring_request *req[6] = { NULL }, *bad = (ring_request *)1;
	int done = 0, i;

	cr_assert_eq(ring_local_rank(c), 0);
	cr_assert_eq(ring_local_size(c), 1);
	cr_assert_eq(ring_host_rank(c), 0);
	cr_assert_eq(ring_host_count(c), 1);
	for (i = 0; i < 100; i++)
		a[i] = s[i] = (float)i * 0.25f;
	memset(b, 0, sizeof(b));
	cr_assert_eq(ring_iallreduce(c, a, b, 100, RING_FLOAT32, RING_SUM, &req[0]), 0);
	cr_assert_eq(ring_test(req[0], &done), 0);
	cr_assert_eq(done, 1, "a size-1 request is complete at once");
	cr_assert_arr_eq(a, b, sizeof(a));
	memset(b, 0, sizeof(b));
	cr_assert_eq(ring_iallgather(c, s, b, 100, RING_FLOAT32, &req[1]), 0);
	cr_assert_arr_eq(a, b, sizeof(a));
	memset(b, 0, sizeof(b));
	cr_assert_eq(ring_ireduce_scatter(c, a, b, 100, RING_FLOAT32, RING_MAX, &req[2]), 0);
	cr_assert_arr_eq(a, b, sizeof(a));
	cr_assert_eq(ring_ibroadcast(c, b, 100, RING_FLOAT32, 0, &req[3]), 0);
	cr_assert_eq(ring_ibarrier(c, &req[4]), 0);
	cr_assert_eq(ring_wait_all(6, req), 0);
	for (i = 0; i < 5; i++) {
		cr_assert_eq(ring_wait(req[i]), 0);
		cr_assert_str_empty(ring_request_error(req[i]));
		ring_request_free(req[i]);
	}
	cr_assert_eq(ring_isend(c, a, RING_FLOAT32, 1, shape, 0, &bad), RING_EINVAL);
	cr_assert_null(bad, "a refused call leaves *req NULL");
	cr_assert(strstr(ring_last_error(c), "ring_isend"), "%s", ring_last_error(c));
	cr_assert_eq(ring_irecv(c, a, RING_FLOAT32, 1, shape, 0, &bad), RING_EINVAL);
	cr_assert_eq(ring_iallreduce(c, a, b, 100, RING_FLOAT32, RING_SUM, NULL), RING_EINVAL);
	cr_assert_eq(ring_test(NULL, &done), RING_EINVAL);
	ring_free(c, s);
	cr_assert_eq(ring_close(c), 0);
}

/* Reads what the test wrote to its redirected stderr. */
static void stderr_text(char *out, size_t cap)
{
	FILE *f;
	size_t n;

	fflush(stderr);
	f = cr_get_redirected_stderr();
	n = fread(out, 1, cap - 1, f);
	out[n] = '\0';
}

static bool default_socket_exists(void)
{
	struct stat st;

	return stat(RING_DEFAULT_SOCKET, &st) == 0;
}

/* No daemon socket and nothing that says the world is larger: a size-1 group,
 * with one line on stderr (MLX's non-strict init). */
Test(single, default_without_a_daemon, .init = cr_redirect_stderr)
{
	ring_comm *c = NULL;
	struct ring_options o;
	float a[3] = { 1, 2, 3 }, b[3] = { 0 };
	char text[1024];

	if (default_socket_exists())
		cr_skip_test("a ringd socket exists at " RING_DEFAULT_SOCKET);
	scrub_env();
	memset(&o, 0, sizeof(o));
	o.arena_bytes = 1 << 20;
	cr_assert_eq(ring_open(&c, &o), 0, "%s", ring_last_error(NULL));
	cr_assert_eq(ring_size(c), 1);
	cr_assert_eq(ring_rank(c), 0);
	cr_assert_eq(ring_allreduce(c, a, b, 3, RING_FLOAT32, RING_SUM), 0);
	cr_assert_arr_eq(a, b, sizeof(a));
	cr_assert_eq(ring_close(c), 0);
	stderr_text(text, sizeof(text));
	cr_assert(strstr(text, RING_DEFAULT_SOCKET) && strstr(text, "size-1") &&
		  strstr(text, "RING_STRICT=1"), "stderr: \"%s\"", text);
	cr_assert(strchr(text, '\n') == strrchr(text, '\n'), "more than one line: \"%s\"", text);

	/* RING_SINGLE=1 asks for it: nothing is said */
	setenv("RING_SINGLE", "1", 1);
	cr_assert_eq(ring_open(&c, &o), 0, "%s", ring_last_error(NULL));
	cr_assert_eq(ring_close(c), 0);
	stderr_text(text, sizeof(text));
	cr_assert_str_empty(text, "RING_SINGLE=1 said \"%s\"", text);
}

/* RING_STRICT=1, or a launcher that says there are other ranks: today's error. */
Test(single, strict_refuses)
{
	ring_comm *c = (ring_comm *)1;

	if (default_socket_exists())
		cr_skip_test("a ringd socket exists at " RING_DEFAULT_SOCKET);
	scrub_env();
	setenv("RING_STRICT", "1", 1);
	cr_assert_eq(ring_open(&c, NULL), RING_EDAEMON);
	cr_assert_null(c);
	cr_assert(strstr(ring_last_error(NULL), "is ringd running?") &&
		  strstr(ring_last_error(NULL), RING_DEFAULT_SOCKET), "%s",
		  ring_last_error(NULL));

	scrub_env();
	setenv("RANK", "0", 1);
	setenv("WORLD_SIZE", "2", 1);
	cr_assert_eq(ring_open(&c, NULL), RING_EDAEMON, "a size-1 group where the launcher "
		     "said 2 ranks");
	cr_assert(strstr(ring_last_error(NULL), "is ringd running?"), "%s",
		  ring_last_error(NULL));
}

Test(single, strings)
{
	int e;

	for (e = RING_ERR_MIN; e <= 0; e++) {
		cr_assert_not_null(ring_strerror(e));
		cr_assert_str_neq(ring_strerror(e), "unknown error", "code %d", e);
	}
	cr_assert_str_eq(ring_strerror(1), "unknown error");
	cr_assert_str_eq(ring_strerror(RING_ERR_MIN - 1), "unknown error");
	cr_assert_not_null(ring_last_error(NULL));
	cr_assert_eq(ring_dtype_size(RING_FLOAT16), 2);
	cr_assert_eq(ring_dtype_size(RING_FLOAT64), 8);
	cr_assert_eq(ring_dtype_size((enum ring_dtype)99), 0);
	cr_assert_str_eq(ring_dtype_name(RING_BFLOAT16), "bfloat16");
	cr_assert_str_eq(ring_op_name(RING_AVG), "avg");
}

/* =================================================================== */
/* A fake ringd: the client protocol, with simulated peers             */
/* =================================================================== */

enum fake_mode {
	FAKE_OK,
	FAKE_REFUSE_HELLO,	/* ERROR instead of WELCOME */
	FAKE_CLOSE_ON_OP,	/* hang up when the first op arrives */
	FAKE_GARBAGE_ON_OP,	/* answer the first op with junk */
	FAKE_WRONG_REQID,	/* answer the first op with another id */
	FAKE_STATUS_ONCE,	/* fail the first op with a status, then behave */
	FAKE_SILENT,		/* never answer an op */
	FAKE_LATE_WELCOME,	/* WELCOME after F.welcome_delay_ms (the job forms) */
	FAKE_NO_WELCOME,	/* never WELCOME (a rank of the job never comes) */
};

#define FAKE_MAX_OPS	4096
#define FAKE_MAX_SUBS	4	/* sessions after the first (ring_split) */
#define TAG		1000000u	/* all-gather: rank r's block is send + r*TAG */
#define BCAST_FILL	0xb0b0b0b0u
#define RECV_FILL	0x5e5e5e5eu
#define SCRATCH_FILL	0xdeadbeefu	/* what in-place reduce-scatter leaves elsewhere */

/* A later session (a sub-communicator): what it said and did. */
struct fake_sub {
	struct proto_hello hello;
	size_t nops;
	bool bye;
};

static struct fake {
	char dir[32], path[64];
	int lfd;
	pthread_t thread, acceptor;
	bool running, accepting;
	volatile bool stop;	/* the acceptor's end */
	/* behaviour */
	int rank, size;
	uint64_t piece;
	enum fake_mode mode;
	int welcome_delay_ms;
	uint32_t welcome_flags;	/* PROTO_WELCOME_* of the first session */
	int64_t split_rows[8][LR_SPLIT_COLS];	/* other ranks' rows of a split */
	/* what it saw on the first session */
	struct proto_hello hello;
	int arena_seals;
	off_t arena_size;
	uint64_t arena_magic;
	bool bye;
	struct proto_op ops[FAKE_MAX_OPS];
	size_t nops;
	uint64_t send_sum;	/* of SEND payloads */
	/* and on the later ones */
	struct fake_sub subs[FAKE_MAX_SUBS];
	int nsubs;
	char problem[256];	/* the first thing that was wrong, if any */
} F;

static void fake_problem(const char *what, const struct proto_op *op)
{
	if (!F.problem[0])
		snprintf(F.problem, sizeof(F.problem), "%s (op %llu: %s count %llu stride "
			 "%llu send_off %llu recv_off %llu)", what,
			 (unsigned long long)op->reqid, proto_coll_name(op->coll),
			 (unsigned long long)op->count, (unsigned long long)op->stride,
			 (unsigned long long)op->send_off, (unsigned long long)op->recv_off);
}

static bool fake_extent_ok(uint64_t off, uint64_t bytes, uint64_t arena)
{
	return off >= PROTO_ARENA_CTL && off <= arena && bytes <= arena - off;
}

/* A split's all-gather (int64 x LR_SPLIT_COLS): the other ranks' rows come from
 * F.split_rows, this rank's from libring. */
static void fake_split_rows(const struct proto_op *op, uint8_t *arena, int rank, int size)
{
	int64_t *s = (int64_t *)(arena + op->send_off), *d = (int64_t *)(arena + op->recv_off);
	uint64_t stride = op->stride ? op->stride : op->count;
	int r;

	for (r = 0; r < size && r < 8; r++)
		memcpy(d + (size_t)r * stride, r == rank ? s : F.split_rows[r],
		       LR_SPLIT_COLS * sizeof(*d));
}

/* Checks the op's extents and carries it out as if size-1 other ranks had
 * contributed the same data (uint32 data only; other dtypes are not touched).
 * Where WELCOME said PROTO_WELCOME_RS_INPLACE, reduce-scatter must be in place
 * (ringd's rule), and it scribbles over the other blocks as ringd may. */
static void fake_execute(const struct proto_op *op, uint8_t *arena, uint64_t abytes,
			 int rank, int size, bool inplace)
{
	size_t es = proto_dtype_size(op->dtype), n = op->count, i, r;
	uint64_t stride = op->stride ? op->stride : op->count;
	uint64_t big = ((uint64_t)(size - 1) * stride + n) * es;
	uint64_t sbytes = n * es, rbytes = n * es;
	uint32_t *s, *d, *tmp;

	if (op->coll == PROTO_COLL_ALLGATHER)
		rbytes = big;
	if (op->coll == PROTO_COLL_REDUCE_SCATTER)
		sbytes = big;
	if (op->coll == PROTO_COLL_BARRIER) {
		if (op->count)
			fake_problem("barrier with a count", op);
		return;
	}
	if (!fake_extent_ok(op->send_off, sbytes, abytes) ||
	    !fake_extent_ok(op->recv_off, rbytes, abytes)) {
		fake_problem("operand outside the arena", op);
		return;
	}
	if (op->fp_count < op->count && op->coll != PROTO_COLL_SEND &&
	    op->coll != PROTO_COLL_RECV)
		fake_problem("piece larger than the whole", op);
	if (op->coll == PROTO_COLL_REDUCE_SCATTER && inplace &&
	    op->recv_off != op->send_off + (uint64_t)rank * stride * es)
		fake_problem("reduce-scatter with local ranks not in place", op);
	if (op->coll == PROTO_COLL_ALLGATHER && op->dtype == RING_INT64 &&
	    op->fp_count == LR_SPLIT_COLS) {
		fake_split_rows(op, arena, rank, size);
		return;
	}
	if (es != 4 || n == 0)
		return;
	s = (uint32_t *)(arena + op->send_off);
	d = (uint32_t *)(arena + op->recv_off);
	switch (op->coll) {
	case PROTO_COLL_ALLREDUCE:
		for (i = 0; i < n; i++)
			d[i] = s[i] * (uint32_t)size;
		break;
	case PROTO_COLL_ALLGATHER:
		tmp = malloc(n * 4);
		memcpy(tmp, s, n * 4);
		for (r = 0; r < (size_t)size; r++)
			for (i = 0; i < n; i++)
				d[r * stride + i] = tmp[i] + (uint32_t)r * TAG;
		free(tmp);
		break;
	case PROTO_COLL_REDUCE_SCATTER:
		for (i = 0; i < n; i++)
			d[i] = s[(size_t)rank * stride + i] * (uint32_t)size;
		if (inplace)
			for (r = 0; r < (size_t)size; r++)
				for (i = 0; r != (size_t)rank && i < n; i++)
					s[r * stride + i] = SCRATCH_FILL;
		break;
	case PROTO_COLL_BROADCAST:
		if (op->send_off != op->recv_off)
			fake_problem("broadcast not in place", op);
		if (op->peer != rank)
			for (i = 0; i < n; i++)
				d[i] = BCAST_FILL;
		else
			for (i = 0; i < n; i++)	/* what the root sends */
				F.send_sum += s[i];
		break;
	case PROTO_COLL_SEND:
		for (i = 0; i < n; i++)
			F.send_sum += s[i];
		break;
	case PROTO_COLL_RECV:
		for (i = 0; i < n; i++)
			d[i] = RECV_FILL;
		break;
	}
}

static void fake_send(int fd, const uint8_t *buf, int n)
{
	if (n <= 0 || send(fd, buf, (size_t)n, MSG_NOSIGNAL) != n)
		snprintf(F.problem, sizeof(F.problem), "fake could not send (%d)", n);
}

/* Serves one session to its end.  sub is NULL for the first session (whose
 * details go to F itself), else the record of a later one, which always
 * behaves (FAKE_OK) and takes its place from its HELLO, as ringd does for
 * launcher ranks. */
static void fake_serve(int cfd, struct fake_sub *sub)
{
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	uint8_t buf[PROTO_MSG_MAX];
	struct iovec iov = { buf, sizeof(buf) };
	struct proto_hello *hello = sub ? &sub->hello : &F.hello;
	enum fake_mode mode = sub ? FAKE_OK : F.mode;
	struct msghdr mh;
	struct cmsghdr *cm;
	struct proto_welcome w;
	struct proto_error e;
	struct proto_done d;
	struct proto_op op;
	struct stat st;
	uint8_t *arena = NULL;
	uint16_t type;
	bool first = true;
	int afd = -1;
	ssize_t n;

	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cbuf.b;
	mh.msg_controllen = sizeof(cbuf.b);
	n = recvmsg(cfd, &mh, 0);
	cm = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL;
	if (cm && cm->cmsg_type == SCM_RIGHTS)
		memcpy(&afd, CMSG_DATA(cm), sizeof(int));
	if (n <= 0 || proto_decode_hello(buf, (size_t)n, hello) != 0 || afd < 0) {
		snprintf(F.problem, sizeof(F.problem), "bad HELLO (%zd bytes, fd %d)", n, afd);
		goto out;
	}
	fstat(afd, &st);
	if (!sub) {
		F.arena_size = st.st_size;
		F.arena_seals = fcntl(afd, F_GET_SEALS);
	}
	arena = mmap(NULL, hello->arena_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, afd, 0);
	if (arena == MAP_FAILED) {
		arena = NULL;
		snprintf(F.problem, sizeof(F.problem), "cannot map the arena");
		goto out;
	}
	if (!sub)
		F.arena_magic = ((struct proto_arena_ctl *)arena)->magic;

	if (mode == FAKE_REFUSE_HELLO) {
		memset(&e, 0, sizeof(e));
		e.code = RING_EPERM;
		snprintf(e.text, sizeof(e.text), "job %s: uid 1234 is not allowed (fake)",
			 hello->job);
		fake_send(cfd, buf, proto_encode_error(buf, sizeof(buf), &e));
		goto out;
	}
	if (mode == FAKE_NO_WELCOME) {
		/* Until libring gives up and hangs up. */
		while (recv(cfd, buf, sizeof(buf), 0) > 0)
			;
		goto out;
	}
	if (mode == FAKE_LATE_WELCOME)
		usleep((useconds_t)F.welcome_delay_ms * 1000);
	memset(&w, 0, sizeof(w));
	w.rank = sub ? hello->rank : F.rank;
	w.size = sub ? hello->size : F.size;
	w.local_rank = hello->local_rank;
	w.local_size = hello->local_size;
	w.host_rank = 0;
	w.nhosts = 1;
	w.job_id = proto_job_id(hello->job);
	w.seg_bytes = 4096;
	w.piece_bytes = F.piece;
	w.flags = sub ? 0 : F.welcome_flags;
	if (w.local_size > 1)
		w.flags |= PROTO_WELCOME_RS_INPLACE;
	snprintf(w.version, sizeof(w.version), "fake");
	fake_send(cfd, buf, proto_encode_welcome(buf, sizeof(buf), &w));

	for (;;) {
		n = recv(cfd, buf, sizeof(buf), 0);
		if (n <= 0)
			break;
		if (proto_msg_peek(buf, (size_t)n, &type) != 0) {
			snprintf(F.problem, sizeof(F.problem), "malformed message from libring");
			break;
		}
		if (type == PROTO_M_BYE) {
			if (sub)
				sub->bye = true;
			else
				F.bye = true;
			break;
		}
		if (proto_decode_op(buf, (size_t)n, &op) != 0) {
			snprintf(F.problem, sizeof(F.problem), "malformed OP (type %u)", type);
			break;
		}
		if (sub)
			sub->nops++;
		else if (F.nops < FAKE_MAX_OPS)
			F.ops[F.nops++] = op;
		memset(&d, 0, sizeof(d));
		d.reqid = op.reqid;
		if (first && mode == FAKE_CLOSE_ON_OP)
			break;
		if (first && mode == FAKE_GARBAGE_ON_OP) {
			first = false;
			fake_send(cfd, (const uint8_t *)"garbage!", 8);
			continue;
		}
		if (mode == FAKE_SILENT)
			continue;
		if (first && mode == FAKE_WRONG_REQID)
			d.reqid += 7;
		if (first && mode == FAKE_STATUS_ONCE) {
			d.status = RING_EMISMATCH;
			snprintf(d.text, sizeof(d.text), "rank 0 called allgather, rank 1 "
				 "called allreduce (fake)");
		} else {
			fake_execute(&op, arena, hello->arena_bytes, w.rank, w.size,
				     w.flags & PROTO_WELCOME_RS_INPLACE);
		}
		first = false;
		fake_send(cfd, buf, proto_encode_done(buf, sizeof(buf), &d));
	}
out:
	if (arena)
		munmap(arena, hello->arena_bytes);
	if (afd >= 0)
		close(afd);
	close(cfd);
}

/* Later sessions, one at a time, until fake_main says stop. */
static void *fake_accept_main(void *arg)
{
	struct pollfd p = { .fd = F.lfd, .events = POLLIN };
	int cfd;

	(void)arg;
	while (!F.stop && F.nsubs < FAKE_MAX_SUBS) {
		if (poll(&p, 1, 20) != 1)
			continue;
		cfd = accept(F.lfd, NULL, NULL);
		if (cfd < 0)
			continue;
		fake_serve(cfd, &F.subs[F.nsubs]);
		F.nsubs++;
	}
	return NULL;
}

static void *fake_main(void *arg)
{
	int cfd;

	(void)arg;
	cfd = accept(F.lfd, NULL, NULL);
	if (cfd < 0)
		return NULL;
	F.accepting = pthread_create(&F.acceptor, NULL, fake_accept_main, NULL) == 0;
	fake_serve(cfd, NULL);
	/* A sub-communicator still open keeps its session (and us) going. */
	F.stop = true;
	if (F.accepting)
		pthread_join(F.acceptor, NULL);
	return NULL;
}

static void fake_start(int rank, int size, uint64_t piece, enum fake_mode mode)
{
	struct sockaddr_un sa;

	scrub_env();
	memset(&F, 0, sizeof(F));
	F.rank = rank;
	F.size = size;
	F.piece = piece;
	F.mode = mode;
	snprintf(F.dir, sizeof(F.dir), "/tmp/ring-unit-XXXXXX");
	cr_assert_not_null(mkdtemp(F.dir));
	snprintf(F.path, sizeof(F.path), "%s/ringd.sock", F.dir);
	F.lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	cr_assert_geq(F.lfd, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", F.path);
	cr_assert_eq(bind(F.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(F.lfd, 4), 0);
	cr_assert_eq(pthread_create(&F.thread, NULL, fake_main, NULL), 0);
	F.running = true;
}

/* Joins the fake (the comm must be closed or broken) and removes its socket. */
static void fake_stop(void)
{
	if (!F.running)
		return;
	pthread_join(F.thread, NULL);
	F.running = false;
	close(F.lfd);
	unlink(F.path);
	rmdir(F.dir);
	cr_assert_eq(F.problem[0], '\0', "fake ringd: %s", F.problem);
}

static ring_comm *fake_open(size_t arena_bytes, int timeout_ms)
{
	struct ring_options o;
	ring_comm *c = NULL;

	memset(&o, 0, sizeof(o));
	o.socket = F.path;
	o.job = "unit";
	o.timeout_ms = timeout_ms;
	o.arena_bytes = arena_bytes;
	cr_assert_eq(ring_open(&c, &o), 0, "%s", ring_last_error(NULL));
	return c;
}

static void fill(uint32_t *p, size_t n, uint32_t base)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = base + (uint32_t)i;
}

/* Placement of a test operand: in the arena or on the heap. */
static uint32_t *buf_get(ring_comm *c, bool in_arena, size_t n)
{
	uint32_t *p = in_arena ? ring_alloc(c, n * 4) : malloc(n * 4);

	cr_assert_not_null(p);
	return p;
}

static void buf_put(ring_comm *c, bool in_arena, uint32_t *p)
{
	if (in_arena)
		ring_free(c, p);
	else
		free(p);
}

/* The counts of the ops since `from`, as one comparable string. */
static void op_counts(size_t from, char *out, size_t cap)
{
	size_t i, off = 0;

	out[0] = '\0';
	for (i = from; i < F.nops && off < cap; i++)
		off += (size_t)snprintf(out + off, cap - off, "%s:%llu/%llu ",
					proto_coll_name(F.ops[i].coll),
					(unsigned long long)F.ops[i].count,
					(unsigned long long)F.ops[i].fp_count);
}

Test(fake, hello_and_bye)
{
	ring_comm *c;

	fake_start(1, 3, 1024, FAKE_OK);
	c = fake_open(1 << 20, 5000);
	cr_assert_eq(ring_rank(c), 1);
	cr_assert_eq(ring_size(c), 3);
	cr_assert_eq(ring_close(c), 0);
	fake_stop();
	cr_assert_str_eq(F.hello.job, "unit");
	cr_assert_eq(F.hello.rank, -1);
	cr_assert_eq(F.hello.size, -1);
	cr_assert_eq(F.hello.local_rank, 0);
	cr_assert_eq(F.hello.local_size, 1);
	cr_assert_eq(F.hello.timeout_ms, 5000);
	cr_assert_eq(F.hello.pid, (uint32_t)getpid());
	cr_assert_eq(F.hello.arena_bytes, 1 << 20);
	cr_assert_eq(F.arena_size, 1 << 20);
	cr_assert_eq(F.arena_seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
		     F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	cr_assert_eq(F.arena_magic, PROTO_ARENA_MAGIC);
	cr_assert(F.bye);
}

Test(fake, launcher_rank_is_sent_and_checked)
{
	ring_comm *c = NULL;
	struct ring_options o;

	fake_start(1, 3, 1024, FAKE_OK);
	setenv("RANK", "2", 1);
	setenv("WORLD_SIZE", "3", 1);
	memset(&o, 0, sizeof(o));
	o.socket = F.path;
	cr_assert_eq(ring_open(&c, &o), RING_EPROTO);
	cr_assert_null(c);
	cr_assert(strstr(ring_last_error(NULL), "rank 2 of 3"), "%s", ring_last_error(NULL));
	fake_stop();
	cr_assert_eq(F.hello.rank, 2);
	cr_assert_eq(F.hello.size, 3);
}

Test(fake, refused_hello)
{
	ring_comm *c = (ring_comm *)1;
	struct ring_options o;

	fake_start(0, 1, 1024, FAKE_REFUSE_HELLO);
	memset(&o, 0, sizeof(o));
	o.socket = F.path;
	cr_assert_eq(ring_open(&c, &o), RING_EPERM);
	cr_assert_null(c);
	cr_assert(strstr(ring_last_error(NULL), "not allowed (fake)"), "%s",
		  ring_last_error(NULL));
	fake_stop();
}

Test(fake, no_daemon)
{
	ring_comm *c = (ring_comm *)1;
	struct ring_options o;

	scrub_env();
	memset(&o, 0, sizeof(o));
	o.socket = "/tmp/ring-unit-no-such-dir/ringd.sock";
	cr_assert_eq(ring_open(&c, &o), RING_EDAEMON);
	cr_assert_null(c);
	cr_assert(strstr(ring_last_error(NULL), o.socket), "%s", ring_last_error(NULL));
	cr_assert(strstr(ring_last_error(NULL), strerror(ENOENT)), "%s", ring_last_error(NULL));
}

/* All-reduce under every placement: same results, same pieces. */
Test(fake, allreduce_placements)
{
	enum { N = 1000 };
	static const bool place[][3] = {	/* send in arena, recv in arena, in place */
		{ true, true, true }, { true, true, false }, { false, true, false },
		{ true, false, false }, { false, false, false }, { false, false, true },
	};
	char want[512], got[512];
	ring_comm *c;
	size_t v, i, from;

	fake_start(1, 3, 1024, FAKE_OK);
	c = fake_open(1 << 20, 5000);
	for (v = 0; v < sizeof(place) / sizeof(place[0]); v++) {
		uint32_t *s = buf_get(c, place[v][0], N);
		uint32_t *r = place[v][2] ? s : buf_get(c, place[v][1], N);

		fill(s, N, 7);
		if (r != s)
			memset(r, 0, N * 4);
		from = F.nops;
		cr_assert_eq(ring_allreduce(c, s, r, N, RING_UINT32, RING_SUM), 0, "%s",
			     ring_last_error(c));
		for (i = 0; i < N; i++)
			cr_assert_eq(r[i], 3 * (7 + i), "variant %zu, element %zu", v, i);
		if (r != s)
			for (i = 0; i < N; i++)
				cr_assert_eq(s[i], 7 + i, "variant %zu changed send", v);
		op_counts(from, v ? got : want, sizeof(want));
		if (v)
			cr_assert_str_eq(got, want, "variant %zu split differently", v);
		/* In the arena, the op names the user's buffer itself. */
		if (place[v][0] && place[v][1])
			cr_assert_eq(F.ops[from].send_off, (uint64_t)((uint8_t *)s -
				     (uint8_t *)c->arena.base));
		if (r != s)
			buf_put(c, place[v][1], r);
		buf_put(c, place[v][0], s);
	}
	cr_assert_str_eq(want, "allreduce:256/1000 allreduce:256/1000 allreduce:256/1000 "
			 "allreduce:232/1000 ");
	cr_assert_eq(c->arena.nlive, 0, "staging leaked");
	for (i = 0; i < F.nops; i++)
		cr_assert_eq(F.ops[i].reqid, i + 1);
	cr_assert_eq(ring_close(c), 0);
	fake_stop();
}

Test(fake, allgather_placements)
{
	enum { N = 500, S = 3 };
	char want[512], got[512];
	ring_comm *c;
	size_t v, i, r, from;

	fake_start(1, S, 1024, FAKE_OK);
	c = fake_open(1 << 20, 5000);
	for (v = 0; v < 4; v++) {
		bool sin = v & 1, rin = v & 2;
		uint32_t *s = buf_get(c, sin, N), *d = buf_get(c, rin, S * N);

		fill(s, N, 11);
		memset(d, 0, S * N * 4);
		from = F.nops;
		cr_assert_eq(ring_allgather(c, s, d, N, RING_UINT32), 0, "%s",
			     ring_last_error(c));
		for (r = 0; r < S; r++)
			for (i = 0; i < N; i++)
				cr_assert_eq(d[r * N + i], 11 + i + r * TAG,
					     "variant %zu, rank %zu, element %zu", v, r, i);
		for (i = from; i < F.nops; i++)
			cr_assert_eq(F.ops[i].stride, rin ? N : 85, "variant %zu", v);
		op_counts(from, v ? got : want, sizeof(want));
		if (v)
			cr_assert_str_eq(got, want, "variant %zu split differently", v);
		buf_put(c, sin, s);
		buf_put(c, rin, d);
	}
	/* 1024 / (4 * 3) = 85 elements of each rank per piece. */
	cr_assert_str_eq(want, "allgather:85/500 allgather:85/500 allgather:85/500 "
			 "allgather:85/500 allgather:85/500 allgather:75/500 ");
	cr_assert_eq(c->arena.nlive, 0, "staging leaked");
	cr_assert_eq(ring_close(c), 0);
	fake_stop();
}

Test(fake, reduce_scatter_placements)
{
	enum { N = 500, S = 3 };
	char want[512], got[512];
	ring_comm *c;
	size_t v, i, from;

	fake_start(1, S, 1024, FAKE_OK);
	c = fake_open(1 << 20, 5000);
	for (v = 0; v < 4; v++) {
		bool sin = v & 1, rin = v & 2;
		uint32_t *s = buf_get(c, sin, S * N), *d = buf_get(c, rin, N);

		fill(s, S * N, 0);
		memset(d, 0, N * 4);
		from = F.nops;
		cr_assert_eq(ring_reduce_scatter(c, s, d, N, RING_UINT32, RING_SUM), 0, "%s",
			     ring_last_error(c));
		/* Rank 1 gets the sum of everyone's block 1. */
		for (i = 0; i < N; i++)
			cr_assert_eq(d[i], S * (N + i), "variant %zu, element %zu", v, i);
		for (i = from; i < F.nops; i++)
			cr_assert_eq(F.ops[i].stride, sin ? N : 85, "variant %zu", v);
		op_counts(from, v ? got : want, sizeof(want));
		if (v)
			cr_assert_str_eq(got, want, "variant %zu split differently", v);
		buf_put(c, sin, s);
		buf_put(c, rin, d);
	}
	cr_assert_str_eq(want, "reduce_scatter:85/500 reduce_scatter:85/500 "
			 "reduce_scatter:85/500 reduce_scatter:85/500 reduce_scatter:85/500 "
			 "reduce_scatter:75/500 ");
	cr_assert_eq(ring_close(c), 0);
	fake_stop();
}

Test(fake, broadcast_root_and_others)
{
	enum { N = 600 };
	ring_comm *c;
	size_t v, i;

	fake_start(1, 3, 1024, FAKE_OK);
	c = fake_open(1 << 20, 5000);
	for (v = 0; v < 4; v++) {
		bool in = v & 1;
		int root = v & 2 ? 1 : 0;
		uint32_t *b = buf_get(c, in, N);

		fill(b, N, 3);
		F.send_sum = 0;
		cr_assert_eq(ring_broadcast(c, b, N, RING_UINT32, root), 0, "%s",
			     ring_last_error(c));
		cr_assert_eq(F.send_sum, root == 1 ? N * 3 + N * (N - 1) / 2 : 0,
			     "variant %zu: the root sent other data", v);
		for (i = 0; i < N; i++)
			cr_assert_eq(b[i], root == 1 ? 3 + i : BCAST_FILL,
				     "variant %zu, element %zu", v, i);
		buf_put(c, in, b);
	}
	cr_assert_eq(F.nops, 4 * 3);
	cr_assert_eq(F.ops[0].peer, 0);
	cr_assert_eq(F.ops[F.nops - 1].peer, 1);
	cr_assert_eq(ring_broadcast(c, NULL, 0, RING_UINT32, 3), RING_EINVAL);
	cr_assert_eq(ring_close(c), 0);
	fake_stop();
}

Test(fake, send_and_recv)
{
	size_t shape[2] = { 10, 20 }, i;
	uint32_t *h = malloc(200 * 4), *a;
	uint64_t sum = 0;
	ring_comm *c;

	fake_start(1, 3, 64, FAKE_OK);	/* p2p is one request whatever the piece */
	c = fake_open(1 << 20, 5000);
	a = ring_alloc(c, 200 * 4);
	fill(h, 200, 1);
	fill(a, 200, 1000);
	for (i = 0; i < 200; i++)
		sum += h[i] + a[i];
	cr_assert_eq(ring_send(c, h, RING_UINT32, 2, shape, 2), 0, "%s", ring_last_error(c));
	cr_assert_eq(ring_send(c, a, RING_UINT32, 2, shape, 0), 0, "%s", ring_last_error(c));
	cr_assert_eq(F.send_sum, sum);
	cr_assert_eq(ring_recv(c, h, RING_UINT32, 2, shape, 0), 0, "%s", ring_last_error(c));
	cr_assert_eq(ring_recv(c, a, RING_UINT32, 2, shape, 2), 0, "%s", ring_last_error(c));
	for (i = 0; i < 200; i++)
		cr_assert(h[i] == RECV_FILL && a[i] == RECV_FILL, "element %zu", i);
	cr_assert_eq(F.nops, 4);
	for (i = 0; i < 4; i++) {
		cr_assert_eq(F.ops[i].coll, i < 2 ? PROTO_COLL_SEND : PROTO_COLL_RECV);
		cr_assert_eq(F.ops[i].count, 200);
		cr_assert_eq(F.ops[i].ndim, 2);
		cr_assert_eq(F.ops[i].shape[0], 10);
		cr_assert_eq(F.ops[i].shape[1], 20);
		cr_assert_eq(F.ops[i].peer, i == 1 || i == 2 ? 0 : 2);
	}
	/* A scalar (ndim 0) is one element. */
	cr_assert_eq(ring_send(c, h, RING_UINT32, 0, NULL, 2), 0, "%s", ring_last_error(c));
	cr_assert_eq(F.ops[4].count, 1);
	cr_assert_eq(ring_send(c, h, RING_UINT32, 2, shape, 1), RING_EINVAL);
	cr_assert(strstr(ring_last_error(c), "this rank"), "%s", ring_last_error(c));
	cr_assert_eq(ring_recv(c, h, RING_UINT32, 2, shape, 3), RING_EINVAL);
	cr_assert_eq(F.nops, 5, "an invalid call reached the daemon");
	ring_free(c, a);
	cr_assert_eq(c->arena.nlive, 0, "staging leaked");
	free(h);
	cr_assert_eq(ring_close(c), 0);
	fake_stop();
}

Test(fake, empty_ops_and_barrier)
{
	ring_comm *c;

	fake_start(0, 2, 1024, FAKE_OK);
	c = fake_open(1 << 20, 5000);
	cr_assert_eq(ring_allreduce(c, NULL, NULL, 0, RING_FLOAT32, RING_SUM), 0);
	cr_assert_eq(ring_allgather(c, NULL, NULL, 0, RING_FLOAT32), 0);
	cr_assert_eq(ring_reduce_scatter(c, NULL, NULL, 0, RING_FLOAT32, RING_MAX), 0);
	cr_assert_eq(ring_broadcast(c, NULL, 0, RING_FLOAT32, 1), 0);
	cr_assert_eq(ring_barrier(c), 0);
	cr_assert_eq(F.nops, 5, "each call is one request, even when empty");
	cr_assert_eq(F.ops[4].coll, PROTO_COLL_BARRIER);
	cr_assert_eq(F.ops[4].count, 0);
	cr_assert_eq(F.ops[3].peer, 1);
	cr_assert_eq(ring_close(c), 0);
	fake_stop();
}

/* The split depends on the element size: P / esize, never below one element. */
Test(fake, pieces_follow_the_dtype)
{
	char got[1024];
	ring_comm *c;
	void *h = calloc(1000, 8);

	fake_start(0, 4, 1024, FAKE_OK);
	c = fake_open(1 << 20, 5000);
	cr_assert_eq(ring_allreduce(c, h, h, 1000, RING_FLOAT64, RING_AVG), 0);
	op_counts(0, got, sizeof(got));
	cr_assert_str_eq(got, "allreduce:128/1000 allreduce:128/1000 allreduce:128/1000 "
			 "allreduce:128/1000 allreduce:128/1000 allreduce:128/1000 "
			 "allreduce:128/1000 allreduce:104/1000 ");
	cr_assert_eq(ring_allreduce(c, h, h, 1000, RING_BFLOAT16, RING_MAX), 0);
	op_counts(8, got, sizeof(got));
	cr_assert_str_eq(got, "allreduce:512/1000 allreduce:488/1000 ");
	cr_assert_eq(ring_close(c), 0);
	fake_stop();

	fake_start(0, 3, 16, FAKE_OK);	/* P below esize * size: one element a piece */
	c = fake_open(1 << 20, 5000);
	cr_assert_eq(ring_allgather(c, h, (uint8_t *)h + 24, 3, RING_FLOAT64), 0);
	op_counts(0, got, sizeof(got));
	cr_assert_str_eq(got, "allgather:1/3 allgather:1/3 allgather:1/3 ");
	cr_assert_eq(ring_close(c), 0);
	fake_stop();
	free(h);
}

Test(fake, arena_too_small_for_staging)
{
	ring_comm *c;
	uint32_t *h = calloc(100000, 4);

	fake_start(0, 2, 1 << 20, FAKE_OK);
	c = fake_open(64 << 10, 5000);
	cr_assert_eq(ring_allreduce(c, h, h, 100000, RING_UINT32, RING_SUM), RING_ENOMEM);
	cr_assert(strstr(ring_last_error(c), "staging"), "%s", ring_last_error(c));
	cr_assert_eq(F.nops, 0, "a rank that cannot stage must not start the op");
	/* Small enough: works, and the comm is fine. */
	cr_assert_eq(ring_allreduce(c, h, h, 1000, RING_UINT32, RING_SUM), 0, "%s",
		     ring_last_error(c));
	cr_assert_eq(F.nops, 1);
	cr_assert_eq(ring_close(c), 0);
	fake_stop();
	free(h);
}

Test(fake, error_status_keeps_the_comm)
{
	uint32_t v[8] = { 1 };
	ring_comm *c;

	fake_start(0, 2, 1024, FAKE_STATUS_ONCE);
	c = fake_open(1 << 20, 5000);
	cr_assert_eq(ring_allreduce(c, v, v, 8, RING_UINT32, RING_SUM), RING_EMISMATCH);
	cr_assert_str_eq(ring_last_error(c), "rank 0 called allgather, rank 1 called "
			 "allreduce (fake)");
	cr_assert_eq(ring_allreduce(c, v, v, 8, RING_UINT32, RING_SUM), 0, "%s",
		     ring_last_error(c));
	cr_assert_eq(v[0], 2);
	cr_assert_eq(ring_close(c), 0);
	fake_stop();
}

static void expect_broken(ring_comm *c, int code, const char *w1)
{
	uint32_t v[8] = { 0 };
	size_t nops;

	cr_assert_eq(ring_allreduce(c, v, v, 8, RING_UINT32, RING_SUM), code, "%s",
		     ring_last_error(c));
	cr_assert(strstr(ring_last_error(c), w1), "\"%s\" lacks \"%s\"",
		  ring_last_error(c), w1);
	nops = F.nops;
	cr_assert_eq(ring_barrier(c), RING_EDAEMON);
	cr_assert(strstr(ring_last_error(c), w1), "%s", ring_last_error(c));
	cr_assert_eq(ring_allreduce(c, v, v, 8, RING_UINT32, RING_SUM), RING_EDAEMON);
	cr_assert_eq(F.nops, nops, "a broken comm still sent requests");
	/* The arena outlives the session: the caller's buffers stay valid. */
	cr_assert_not_null(ring_alloc(c, 100));
	cr_assert_eq(ring_close(c), 0);
	fake_stop();
}

Test(fake, daemon_goes_away)
{
	fake_start(0, 2, 1024, FAKE_CLOSE_ON_OP);
	expect_broken(fake_open(1 << 20, 5000), RING_EDAEMON, "closed the connection");
}

Test(fake, malformed_reply)
{
	fake_start(0, 2, 1024, FAKE_GARBAGE_ON_OP);
	expect_broken(fake_open(1 << 20, 5000), RING_EPROTO, "malformed");
}

Test(fake, reply_to_another_request)
{
	fake_start(0, 2, 1024, FAKE_WRONG_REQID);
	expect_broken(fake_open(1 << 20, 5000), RING_EPROTO, "request");
}

/* The daemon never answers: the wait ends at timeout + grace (10 s). */
Test(fake, silent_daemon_is_bounded, .timeout = 30)
{
	struct timespec t0, t1;
	ring_comm *c;
	double s;
	uint32_t v[8] = { 0 };

	fake_start(0, 2, 1024, FAKE_SILENT);
	c = fake_open(1 << 20, 100);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	cr_assert_eq(ring_allreduce(c, v, v, 8, RING_UINT32, RING_SUM), RING_ETIMEDOUT);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	cr_assert(s >= 10.0 && s < 12.0, "waited %.2f s", s);
	cr_assert(strstr(ring_last_error(c), "did not answer"), "%s", ring_last_error(c));
	cr_assert_eq(ring_barrier(c), RING_EDAEMON);
	cr_assert_eq(ring_close(c), 0);
	fake_stop();
}

static ring_comm *fake_open_local(int local_rank, int local_size)
{
	struct ring_options o;
	ring_comm *c = NULL;

	memset(&o, 0, sizeof(o));
	o.socket = F.path;
	o.job = "unit";
	o.timeout_ms = 5000;
	o.arena_bytes = 1 << 20;
	o.local_rank = local_rank;
	o.local_size = local_size;
	cr_assert_eq(ring_open(&c, &o), 0, "%s", ring_last_error(NULL));
	cr_assert_eq(c->local_size, local_size);
	return c;
}

/* With several local ranks ringd runs reduce-scatter in place only: every piece
 * goes through an arena slot laid out as [block 0 | ... | block size-1] with
 * stride = the piece, and recv_off = send_off + rank * stride * esize, whatever
 * the user's placement; the split into pieces does not change, the user's send
 * side is left alone, and what ringd scribbles elsewhere in the slot is unseen. */
Test(fake, reduce_scatter_in_place_with_local_ranks)
{
	enum { N = 500, S = 4, RANK = 2 };
	char want[512], got[512];
	ring_comm *c;
	size_t v, i, from;

	fake_start(RANK, S, 1024, FAKE_OK);
	c = fake_open_local(1, 2);
	for (v = 0; v < 5; v++) {
		bool sin = v & 1, rin = v & 2, user_inplace = v == 4;
		uint32_t *s = buf_get(c, sin || user_inplace, S * N);
		uint32_t *d = user_inplace ? s + RANK * N : buf_get(c, rin, N);

		fill(s, S * N, 0);
		if (!user_inplace)
			memset(d, 0, N * 4);
		from = F.nops;
		cr_assert_eq(ring_reduce_scatter(c, s, d, N, RING_UINT32, RING_SUM), 0, "%s",
			     ring_last_error(c));
		for (i = 0; i < N; i++)
			cr_assert_eq(d[i], S * (RANK * N + i), "variant %zu, element %zu", v, i);
		for (i = 0; i < S * N && !user_inplace; i++)
			cr_assert_eq(s[i], i, "variant %zu: send[%zu] changed", v, i);
		for (i = from; i < F.nops; i++) {
			const struct proto_op *op = &F.ops[i];

			cr_assert_eq(op->stride, 64, "variant %zu", v);
			cr_assert_eq(op->recv_off, op->send_off + RANK * op->stride * 4,
				     "variant %zu, op %zu not in place", v, i);
		}
		op_counts(from, v ? got : want, sizeof(want));
		if (v)
			cr_assert_str_eq(got, want, "variant %zu split differently", v);
		if (!user_inplace)
			buf_put(c, rin, d);
		buf_put(c, sin || user_inplace, s);
	}
	/* 1024 / (4 * 4) = 64 elements of each rank per piece, as with one local rank. */
	cr_assert_str_eq(want, "reduce_scatter:64/500 reduce_scatter:64/500 "
			 "reduce_scatter:64/500 reduce_scatter:64/500 reduce_scatter:64/500 "
			 "reduce_scatter:64/500 reduce_scatter:64/500 reduce_scatter:52/500 ");
	cr_assert_eq(c->arena.nlive, 0, "staging leaked");
	/* Count 0 still synchronises, and its offsets satisfy the rule trivially. */
	cr_assert_eq(ring_reduce_scatter(c, NULL, NULL, 0, RING_UINT32, RING_SUM), 0);
	cr_assert_eq(F.ops[F.nops - 1].send_off, F.ops[F.nops - 1].recv_off);
	cr_assert_eq(ring_close(c), 0);
	fake_stop();
	cr_assert_eq(F.hello.local_rank, 1);
	cr_assert_eq(F.hello.local_size, 2);
}

/* One local rank here, but another host holds several: WELCOME's flag asks for
 * reduce-scatter in place all the same, since every host must run it alike. */
Test(fake, reduce_scatter_in_place_when_another_host_has_local_ranks)
{
	enum { N = 100, S = 3 };
	uint32_t *s = malloc(S * N * 4), *d = malloc(N * 4);
	ring_comm *c;
	size_t i;

	fake_start(1, S, 1 << 20, FAKE_OK);
	F.welcome_flags = PROTO_WELCOME_RS_INPLACE;
	c = fake_open(1 << 20, 5000);
	cr_assert_eq(c->local_size, 1);
	fill(s, S * N, 0);
	cr_assert_eq(ring_reduce_scatter(c, s, d, N, RING_UINT32, RING_SUM), 0, "%s",
		     ring_last_error(c));
	for (i = 0; i < N; i++)
		cr_assert_eq(d[i], S * (N + i), "element %zu", i);
	cr_assert_eq(F.nops, 1);
	cr_assert_eq(F.ops[0].recv_off, F.ops[0].send_off + 1 * F.ops[0].stride * 4);
	cr_assert_eq(ring_close(c), 0);
	fake_stop();
	free(s);
	free(d);
}

/* A job forms only when all its ranks have attached, so the wait for WELCOME
 * lasts as long as an operation may (timeout_ms), then says what it waits for. */
Test(fake, welcome_waits_for_the_job, .timeout = 30)
{
	struct timespec t0, t1;
	ring_comm *c;
	double s;

	fake_start(0, 2, 1024, FAKE_LATE_WELCOME);
	F.welcome_delay_ms = 1500;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	c = fake_open(1 << 20, 4000);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	cr_assert(s >= 1.4, "opened after %.2f s, before the WELCOME", s);
	cr_assert_eq(ring_size(c), 2);
	cr_assert_eq(ring_close(c), 0);
	fake_stop();

	fake_start(0, 2, 1024, FAKE_NO_WELCOME);
	c = (ring_comm *)1;
	{
		struct ring_options o;

		memset(&o, 0, sizeof(o));
		o.socket = F.path;
		o.job = "waiting";
		o.timeout_ms = 800;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		cr_assert_eq(ring_open(&c, &o), RING_ETIMEDOUT);
		clock_gettime(CLOCK_MONOTONIC, &t1);
	}
	s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	cr_assert(s >= 0.75 && s < 3.0, "gave up after %.2f s", s);
	cr_assert_null(c);
	cr_assert(strstr(ring_last_error(NULL), "\"waiting\""), "%s", ring_last_error(NULL));
	cr_assert(strstr(ring_last_error(NULL), "all its ranks"), "%s", ring_last_error(NULL));
	fake_stop();
}

/* =================================================================== */
/* ring_split: the place in the group and the sub-job's name           */
/* =================================================================== */

static void split_row(int64_t *rows, int r, int64_t color, int64_t key, int64_t host)
{
	rows[r * LR_SPLIT_COLS + LR_SPLIT_COLOR] = color;
	rows[r * LR_SPLIT_COLS + LR_SPLIT_KEY] = key;
	rows[r * LR_SPLIT_COLS + LR_SPLIT_HOST] = host;
	rows[r * LR_SPLIT_COLS + LR_SPLIT_RANK] = r;
}

Test(split, place)
{
	/* rank: color key host */
	static const int64_t in[8][3] = {
		{ 0, 5, 0 }, { 1, 0, 0 }, { 0, 0, 1 }, { 1, 0, 1 },
		{ 0, 0, 0 }, { -1, 0, 1 }, { 0, -3, 2 }, { 1, 0, 0 },
	};
	/* color 0: keys 5,0,0,-3 from ranks 0,2,4,6 -> order 6, 2, 4, 0;
	 * color 1: keys 0,0,0 from 1,3,7 -> order 1, 3, 7. */
	static const int want[8][4] = {	/* rank size local_rank local_size */
		{ 3, 4, 1, 2 }, { 0, 3, 0, 2 }, { 1, 4, 0, 1 }, { 1, 3, 0, 1 },
		{ 2, 4, 0, 2 }, { 0, 0, 0, 0 }, { 0, 4, 0, 1 }, { 2, 3, 1, 2 },
	};
	int64_t rows[8 * LR_SPLIT_COLS];
	char err[256];
	int r, p[4];

	for (r = 0; r < 8; r++)
		split_row(rows, r, in[r][0], in[r][1], in[r][2]);
	for (r = 0; r < 8; r++) {
		if (in[r][0] < 0)
			continue;
		cr_assert_eq(lr_split_place(rows, 8, r, &p[0], &p[1], &p[2], &p[3], err,
					    sizeof(err)), 0, "%s", err);
		cr_assert(p[0] == want[r][0] && p[1] == want[r][1] && p[2] == want[r][2] &&
			  p[3] == want[r][3], "rank %d: got %d of %d, local %d of %d; want "
			  "%d of %d, local %d of %d", r, p[0], p[1], p[2], p[3], want[r][0],
			  want[r][1], want[r][2], want[r][3]);
	}
	/* A row that does not come from its rank is refused, not guessed. */
	rows[3 * LR_SPLIT_COLS + LR_SPLIT_RANK] = 5;
	cr_assert_eq(lr_split_place(rows, 8, 0, &p[0], &p[1], &p[2], &p[3], err, sizeof(err)),
		     RING_EINVAL);
	cr_assert(strstr(err, "parent rank 3"), "%s", err);
}

Test(split, job_names)
{
	char a[PROTO_JOB_MAX + 1], b[PROTO_JOB_MAX + 1], c[PROTO_JOB_MAX + 1];
	char parent[PROTO_JOB_MAX + 1];

	lr_split_job_name(a, "train", 0, 1);
	cr_assert_str_eq(a, "train:s0.1");
	lr_split_job_name(a, "train:s0.1", 12, 0);
	cr_assert_str_eq(a, "train:s0.1:s12.0");
	cr_assert(proto_job_name_ok(a));

	/* Too long: a prefix and a hash, still valid, still distinct. */
	memset(parent, 'j', PROTO_JOB_MAX);
	parent[PROTO_JOB_MAX] = '\0';
	lr_split_job_name(a, parent, 0, 1);
	lr_split_job_name(b, parent, 0, 2);
	lr_split_job_name(c, parent, 1, 1);
	cr_assert(proto_job_name_ok(a), "%s", a);
	cr_assert(proto_job_name_ok(b), "%s", b);
	cr_assert_eq(strlen(a), PROTO_JOB_MAX);
	cr_assert(strncmp(a, parent, 40) == 0, "%s", a);
	cr_assert_str_neq(a, b);
	cr_assert_str_neq(a, c);
	lr_split_job_name(b, parent, 0, 1);
	cr_assert_str_eq(a, b, "not deterministic");
	lr_split_job_name(b, "x", 4000000000u, -0x7fffffff);
	cr_assert(proto_job_name_ok(b), "%s", b);
}

/* ring_split against the fake: an all-gather of the rows on the parent, then a
 * second session with the derived job name and explicit places; the parent
 * stays usable and counts every split, also those this rank joins no group in. */
Test(fake, split_into_a_sub_job)
{
	uint32_t v[16];
	ring_comm *c, *sub = (ring_comm *)1;
	size_t nops;
	int i;

	fake_start(1, 4, 1024, FAKE_OK);
	split_row(&F.split_rows[0][0], 0, 0, 5, 0);
	split_row(&F.split_rows[0][0], 2, 1, 0, 1);
	split_row(&F.split_rows[0][0], 3, 0, 0, 1);
	c = fake_open(1 << 20, 5000);
	/* color 0: rank 1 (key 0), rank 3 (key 0), rank 0 (key 5); this rank and
	 * rank 0 are on host 0. */
	cr_assert_eq(ring_split(c, 0, 0, &sub), 0, "%s", ring_last_error(c));
	cr_assert_not_null(sub);
	cr_assert_eq(ring_rank(sub), 0);
	cr_assert_eq(ring_size(sub), 3);
	cr_assert_eq(F.nops, 1);
	cr_assert_eq(F.ops[0].coll, PROTO_COLL_ALLGATHER);
	cr_assert_eq(F.ops[0].dtype, RING_INT64);
	fill(v, 16, 1);
	cr_assert_eq(ring_allreduce(sub, v, v, 16, RING_UINT32, RING_SUM), 0, "%s",
		     ring_last_error(sub));
	cr_assert_eq(v[0], 3, "the sub-communicator reduced over %u ranks", v[0]);
	cr_assert_eq(ring_close(sub), 0);

	nops = F.nops;
	cr_assert_eq(ring_split(c, -1, 0, &sub), 0, "%s", ring_last_error(c));
	cr_assert_null(sub);
	cr_assert_eq(F.nops, nops + 1, "a rank with no color skipped the all-gather");

	cr_assert_eq(ring_split(c, 2, -1, &sub), 0, "%s", ring_last_error(c));
	cr_assert_eq(ring_size(sub), 1);
	cr_assert_eq(ring_close(sub), 0);

	fill(v, 16, 1);
	cr_assert_eq(ring_allreduce(c, v, v, 16, RING_UINT32, RING_SUM), 0, "%s",
		     ring_last_error(c));
	cr_assert_eq(v[0], 4);
	cr_assert_eq(ring_close(c), 0);
	fake_stop();

	cr_assert_eq(F.nsubs, 2);
	cr_assert_str_eq(F.subs[0].hello.job, "unit:s0.0");
	cr_assert_eq(F.subs[0].hello.rank, 0);
	cr_assert_eq(F.subs[0].hello.size, 3);
	cr_assert_eq(F.subs[0].hello.local_rank, 0);
	cr_assert_eq(F.subs[0].hello.local_size, 2);
	cr_assert_eq(F.subs[0].hello.arena_bytes, 1 << 20);
	cr_assert_eq(F.subs[0].nops, 1);
	cr_assert(F.subs[0].bye);
	cr_assert_str_eq(F.subs[1].hello.job, "unit:s2.2");
	cr_assert_eq(F.subs[1].hello.rank, 0);
	cr_assert_eq(F.subs[1].hello.size, 1);
	for (i = 0; i < 2; i++)
		cr_assert_eq(F.subs[i].hello.timeout_ms, 5000);
}
