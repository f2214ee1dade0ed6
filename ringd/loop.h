/*
 * loop.h - the engine thread's loop (loop.c): what it asks of the floors it
 * serves, through hooks main gives it, so that it names none of them.
 */
#ifndef RINGD_LOOP_H
#define RINGD_LOOP_H

#include <stdbool.h>

struct ringd;

struct loop_hooks {
	/* runs the work the events of a pass caused (the engine's queue); true
	 * when some is left for the next pass (which then does not block) */
	bool (*turn)(struct ringd *rd);
	/* whether an operation is in flight: its next frame is due */
	bool (*busy)(const struct ringd *rd);
	/* looks for work that rings no bell while the loop spins (the clients'
	 * submission rings); true if it found and ran any */
	bool (*look)(struct ringd *rd);
	/* tells whoever would ring a bell whether the loop looks itself */
	void (*looking)(struct ringd *rd, bool on);
};

/* The windows' first values (ringd.h, struct ringd's loop). */
void loop_init(struct ringd *rd);
/* Runs until event_base_loopexit or a break on rd->base. */
void loop_run(struct ringd *rd, const struct loop_hooks *h);

#endif /* RINGD_LOOP_H */
