/*
 * arena.c - a client's shared memory as the daemon holds it: mapped once when
 * the client attaches, and unmapped when the last reference goes.  The
 * session holds one; so does every piece of link output that points into it
 * (sent data is referenced, not copied) and every payload being read straight
 * into it.  It stands below the links and the engine, which both hold it, and
 * names nothing above it.
 */
#include <stdlib.h>
#include <sys/mman.h>

#include "ringd.h"

struct arena *
arena_new(uint8_t *base, size_t len)
{
	struct arena *a = calloc(1, sizeof(*a));

	if (a == NULL)
		return NULL;
	a->base = base;
	a->len = len;
	a->refs = 1;
	return a;
}

void
arena_ref(struct arena *a)
{
	if (a != NULL)
		a->refs++;
}

void
arena_unref(struct arena *a)
{
	if (a == NULL || --a->refs > 0)
		return;
	munmap(a->base, a->len);
	free(a);
}
