/*
 * arena.c - the shared arena: a sealed memfd that libring maps and hands to ringd,
 * and the allocator behind ring_alloc.  Buffers placed here are read and written
 * by the daemon directly, so operations on them need no copy.  The allocator is
 * an address-ordered first-fit list with coalescing; its bookkeeping lives on the
 * client's heap, never in the arena, so nothing the daemon (or a stray write into
 * a buffer) does to shared memory can corrupt it.  The first PROTO_ARENA_CTL bytes
 * are the control page and are never handed out.  This module needs nothing from
 * proto's .c files, so its unit test links it alone.
 */
#include <errno.h>
#include <fcntl.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

struct lr_block {
	uint64_t off;			/* byte offset in the arena, LR_ALIGN multiple */
	uint64_t size;			/* bytes, LR_ALIGN multiple, > 0 */
	bool used;			/* handed out by lr_arena_alloc */
	struct lr_block *prev, *next;	/* neighbours in address order */
};

#define ARENA_PAGE	4096u

static int
block_cmp(const void *a, const void *b)
{
	const struct lr_block *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

/* tdestroy wants a callback; the blocks themselves are freed from the list. */
static void
block_nofree_cb(void *node)
{
	(void)node;
}

int
lr_arena_create(struct lr_arena *a, size_t bytes, char *err, size_t cap)
{
	struct proto_arena_ctl *ctl;
	struct lr_block *b = NULL;
	int seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

	memset(a, 0, sizeof(*a));
	a->fd = -1;
	/* At least one page to hand out; page multiple so the mapping is exact. */
	if (bytes < PROTO_ARENA_CTL + ARENA_PAGE)
		bytes = PROTO_ARENA_CTL + ARENA_PAGE;
	if (bytes > SIZE_MAX - ARENA_PAGE || bytes > ((size_t)LR_MAX_ARENA_MB << 20)) {
		snprintf(err, cap, "arena size %zu bytes is above the limit of %u MiB",
			 bytes, LR_MAX_ARENA_MB);
		return RING_EINVAL;
	}
	bytes = (bytes + ARENA_PAGE - 1) & ~(size_t)(ARENA_PAGE - 1);

	a->fd = memfd_create("ring-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (a->fd < 0) {
		snprintf(err, cap, "memfd_create for the arena: %s", strerror(errno));
		goto fail;
	}
	if (ftruncate(a->fd, (off_t)bytes) < 0) {
		snprintf(err, cap, "sizing the arena to %zu bytes: %s", bytes, strerror(errno));
		goto fail;
	}
	/* Sealed, the daemon can rely on the size it was told for as long as it
	 * holds the fd: neither side can shrink it under the other's mapping. */
	if (fcntl(a->fd, F_ADD_SEALS, seals) < 0) {
		snprintf(err, cap, "sealing the arena memfd: %s", strerror(errno));
		goto fail;
	}
	a->base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, a->fd, 0);
	if (a->base == MAP_FAILED) {
		a->base = NULL;
		snprintf(err, cap, "mapping the %zu-byte arena: %s", bytes, strerror(errno));
		goto fail;
	}
	a->bytes = bytes;

	b = calloc(1, sizeof(*b));
	if (!b) {
		snprintf(err, cap, "out of memory for the arena's bookkeeping");
		goto fail;
	}
	b->off = PROTO_ARENA_CTL;
	b->size = bytes - PROTO_ARENA_CTL;
	a->head = b;
	a->free_bytes = b->size;

	ctl = (struct proto_arena_ctl *)a->base;
	ctl->magic = PROTO_ARENA_MAGIC;
	return 0;
fail:
	lr_arena_destroy(a);
	return RING_ENOMEM;
}

void
lr_arena_destroy(struct lr_arena *a)
{
	struct lr_block *b, *next;

	if (a->live)
		tdestroy(a->live, block_nofree_cb);
	for (b = a->head; b; b = next) {
		next = b->next;
		free(b);
	}
	if (a->base && !a->kept)
		munmap(a->base, a->bytes);
	if (a->fd >= 0)
		close(a->fd);
	memset(a, 0, sizeof(*a));
	a->fd = -1;
}

void *
lr_arena_alloc(struct lr_arena *a, size_t bytes)
{
	struct lr_block *b, *rest;
	uint64_t need;

	if (!a->base || bytes > SIZE_MAX - LR_ALIGN)
		return NULL;
	/* alloc(0) is a valid, freeable pointer, as with malloc. */
	need = bytes ? ((uint64_t)bytes + LR_ALIGN - 1) & ~(uint64_t)(LR_ALIGN - 1) : LR_ALIGN;
	for (b = a->head; b; b = b->next)
		if (!b->used && b->size >= need)
			break;
	if (!b)
		return NULL;

	/* Register first: the key (offset) does not change when the tail is cut. */
	if (!tsearch(b, &a->live, block_cmp))
		return NULL;
	if (b->size > need) {
		rest = calloc(1, sizeof(*rest));
		if (!rest) {
			tdelete(b, &a->live, block_cmp);
			return NULL;
		}
		rest->off = b->off + need;
		rest->size = b->size - need;
		rest->prev = b;
		rest->next = b->next;
		if (b->next)
			b->next->prev = rest;
		b->next = rest;
		b->size = need;
	}
	b->used = true;
	a->nlive++;
	a->free_bytes -= b->size;
	return a->base + b->off;
}

/* Merges b's successor into b; both are free. */
static void
block_merge_next(struct lr_block *b)
{
	struct lr_block *n = b->next;

	b->size += n->size;
	b->next = n->next;
	if (n->next)
		n->next->prev = b;
	free(n);
}

int
lr_arena_free(struct lr_arena *a, void *p)
{
	struct lr_block key, *b;
	void **node;
	uintptr_t u = (uintptr_t)p, base = (uintptr_t)a->base;

	if (!p)
		return 0;
	if (!a->base || u < base + PROTO_ARENA_CTL || u >= base + a->bytes)
		return RING_EINVAL;
	key.off = u - base;
	node = tfind(&key, &a->live, block_cmp);
	if (!node)
		return RING_EINVAL;	/* interior pointer, double free, never allocated */
	b = *node;
	tdelete(&key, &a->live, block_cmp);
	b->used = false;
	a->nlive--;
	a->free_bytes += b->size;

	if (b->next && !b->next->used)
		block_merge_next(b);
	if (b->prev && !b->prev->used)
		block_merge_next(b->prev);
	return 0;
}

bool
lr_arena_find(const struct lr_arena *a, const void *p, size_t bytes, uint64_t *off)
{
	uintptr_t u = (uintptr_t)p, base = (uintptr_t)a->base;

	if (!a->base || !p || u < base + PROTO_ARENA_CTL || u > base + a->bytes)
		return false;
	if (bytes > a->bytes - (u - base))
		return false;
	if (off)
		*off = u - base;
	return true;
}

size_t
lr_arena_largest(const struct lr_arena *a)
{
	const struct lr_block *b;
	size_t best = 0;

	for (b = a->head; b; b = b->next)
		if (!b->used && b->size > best)
			best = b->size;
	return best;
}

size_t
lr_arena_usable(const struct lr_arena *a)
{
	return a->base ? a->bytes - PROTO_ARENA_CTL : 0;
}
