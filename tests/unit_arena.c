/*
 * unit_arena.c - tests of libring's shared arena and of its public API without
 * a daemon.  Two layers: the allocator alone (libring/arena.c: placement,
 * alignment, first fit, coalescing, refusal of foreign pointers, a randomised
 * run against a model); and the public API of a size-1 group (RING_SINGLE=1:
 * ring_alloc/ring_free, identity collectives and their requests, argument
 * checks, the group given by default when no daemon socket exists,
 * RING_STRICT=1 refusing it).  How operands reach a daemon is unit_client.c's,
 * against the fake of tests/fake_daemon.c.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "libring/internal.h"
#include "proto/dtype.h"
#include "tests/fake_daemon.h"

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

	fake_scrub_env();
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

	fake_scrub_env();
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
	fake_scrub_env();
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
	fake_scrub_env();
	setenv("RING_STRICT", "1", 1);
	cr_assert_eq(ring_open(&c, NULL), RING_EDAEMON);
	cr_assert_null(c);
	cr_assert(strstr(ring_last_error(NULL), "is ringd running?") &&
		  strstr(ring_last_error(NULL), RING_DEFAULT_SOCKET), "%s",
		  ring_last_error(NULL));

	fake_scrub_env();
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
