/*
 * jobpage.h - the job pages of the jobs on this host alone (jobpage.c), as
 * the sessions see them.  The front's: sess.c alone includes it.
 */
#ifndef RINGD_JOBPAGE_H
#define RINGD_JOBPAGE_H

#include <stdint.h>

struct jpage;

/* The page of job `name` (id) in its formation gen, for its nranks local
 * processes: made at the first call of the formation, referenced by each
 * (jobpage_put lets go); NULL when it cannot be made (logged: the
 * processes then take the daemon's path). */
struct jpage *jobpage_get(const char *name, uint32_t id, uint32_t gen, int nranks);
/* The memfd to hand over with WELCOME. */
int jobpage_fd(const struct jpage *p);
/* The formation is over for the fast path: a process went away, or revoked
 * it.  The first reason stays; every process asleep on the page wakes and
 * returns code with it. */
void jobpage_break(struct jpage *p, int code, const char *why);
/* Lets go of a reference (NULL: none); the last one frees the page. */
void jobpage_put(struct jpage *p);

#endif /* RINGD_JOBPAGE_H */
