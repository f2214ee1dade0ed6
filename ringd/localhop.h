/*
 * localhop.h - the local hop's rings of one client, as the session sees them
 * (localhop.c).  The front's: sess.c alone includes it.
 */
#ifndef RINGD_LOCALHOP_H
#define RINGD_LOCALHOP_H

#include <stdbool.h>
#include <stdint.h>
#include <event2/event.h>

#include "ringd.h"

struct lhop;

/* The rings the client asked for in its arena's control page, with a new
 * doorbell whose ringing calls rang(fd, what, arg); NULL when it did not ask,
 * they do not fit, or there is no memory (the session keeps to the socket). */
struct lhop *hop_open(struct event_base *base, const struct arena *a, int pid,
		      event_callback_fn rang, void *arg);
/* The doorbell to hand over with WELCOME. */
int hop_bell(const struct lhop *h);
/* The daemon serves the rings from now on (WELCOME went out). */
void hop_serve(struct lhop *h);
/* Bumps the client's futex word and wakes a sleeper. */
void hop_kick(struct lhop *h);
/* A message went over the socket: a sleeper reads it. */
void hop_socket_sent(struct lhop *h);
/* A DONE into the completion ring: 0, or -1 when it must go over the socket. */
int hop_done(struct lhop *h, const uint8_t *buf, int len);
/* Reads the doorbell's count away (it rang). */
void hop_clear_bell(struct lhop *h);
/* The next entry of the submission ring into buf: its length, 0 when empty,
 * -1 on garbage (why says what; the session drops the client).  *at: its
 * entry's number. */
int hop_take(struct lhop *h, uint8_t *buf, size_t cap, uint32_t *at, char *why, size_t whylen);
/* Whether the submission ring holds entries not taken. */
bool hop_pending(const struct lhop *h);
/* Tells the client whether the loop looks at its ring itself (no doorbell). */
void hop_looking(struct lhop *h, bool on);
/* Runs the doorbell's callback again from the loop (more than a ring's worth). */
void hop_again(struct lhop *h);
/* Closes the doorbell and frees the view (the memory is the arena's). */
void hop_close(struct lhop *h);

#endif /* RINGD_LOCALHOP_H */
