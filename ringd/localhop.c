/*
 * localhop.c - the daemon's side of the local hop (proto.h, "The local hop"):
 * a client's submission and completion rings in its arena, its doorbell and
 * its futex word.  A client that asks in its arena's control page and has
 * room for the rings gets, with WELCOME, an eventfd: its doorbell, registered
 * in the loop.  The session (sess.c) takes each entry of the submission ring
 * and runs it exactly as an OP from the socket; a DONE that fits goes into the
 * completion ring, after which the client's futex word is bumped and a
 * sleeper woken.  While the engine loop spins it looks at the rings itself
 * (hop_pending) and says so in `looking`, and the clients ring no doorbell.
 * The client owns that memory: every index and length read there is checked,
 * and garbage is reported to the session, which drops the client.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/futex.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>

#include "localhop.h"
#include "../proto/log.h"

struct lhop {
	struct proto_shm *shm;    /* the rings' header, in the client's arena */
	struct proto_shmq sq, cq; /* our own indices */
	int bell;                 /* the doorbell eventfd */
	struct event *bell_ev;    /* ... registered in the loop */
	int pid;                  /* the client's, for messages */
};

struct lhop *
hop_open(struct event_base *base, const struct arena *a, int pid, event_callback_fn rang, void *arg)
{
	struct proto_arena_ctl *ctl = (struct proto_arena_ctl *)(void *)a->base;
	struct lhop *h;
	uint64_t off;

	if (__atomic_load_n(&ctl->shm_magic, __ATOMIC_ACQUIRE) != PROTO_SHM_MAGIC)
		return NULL;
	off = __atomic_load_n(&ctl->shm_off, __ATOMIC_RELAXED);
	if (off < PROTO_ARENA_CTL || off % 64 != 0 || off > a->len ||
	    a->len - off < PROTO_SHM_BYTES) {
		log_info("client pid %d: its submission rings at offset %llu do not lie in "
			 "its %zu-byte arena; operations over the socket",
			 pid, (unsigned long long)off, a->len);
		return NULL;
	}
	if ((h = calloc(1, sizeof(*h))) == NULL)
		return NULL;
	h->pid = pid;
	if ((h->bell = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
		free(h);
		return NULL;
	}
	h->bell_ev = event_new(base, h->bell, EV_READ | EV_PERSIST, rang, arg);
	if (h->bell_ev == NULL || event_add(h->bell_ev, NULL) != 0) {
		if (h->bell_ev != NULL)
			event_free(h->bell_ev);
		close(h->bell);
		free(h);
		return NULL;
	}
	h->shm = (struct proto_shm *)(void *)(a->base + off);
	proto_shm_views(h->shm, &h->sq, &h->cq);
	return h;
}

int
hop_bell(const struct lhop *h)
{
	return h->bell;
}

void
hop_serve(struct lhop *h)
{
	__atomic_store_n(&h->shm->served, 1, __ATOMIC_RELEASE);
}

void
hop_kick(struct lhop *h)
{
	__atomic_add_fetch(&h->shm->wake, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&h->shm->sleeping, __ATOMIC_SEQ_CST) != 0)
		syscall(SYS_futex, &h->shm->wake, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

void
hop_socket_sent(struct lhop *h)
{
	/* a client asleep on the futex reads the socket when this moves */
	__atomic_add_fetch(&h->shm->sock_seq, 1, __ATOMIC_SEQ_CST);
	hop_kick(h);
}

int
hop_done(struct lhop *h, const uint8_t *buf, int len)
{
	if (len <= 0 || proto_shmq_put(&h->cq, buf, (size_t)len) != 0)
		return -1;
	hop_kick(h);
	return 0;
}

void
hop_clear_bell(struct lhop *h)
{
	uint64_t v;

	if (read(h->bell, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_debug("client pid %d: doorbell: %s", h->pid, strerror(errno));
}

int
hop_take(struct lhop *h, uint8_t *buf, size_t cap, uint32_t *at, char *why, size_t whylen)
{
	uint16_t type;
	int n;

	*at = h->sq.mine;
	n = proto_shmq_get(&h->sq, buf, cap);
	if (n == 0)
		return 0;
	if (n < 0 || proto_msg_peek(buf, (size_t)n, &type) != 0 || type != PROTO_M_OP) {
		snprintf(why, whylen, "garbage in the submission ring at entry %u (%s)", *at,
			 n == -1 ? "its index is past the ring's entries" :
			 n == -2 ? "its length is not a message's" :
				   "not an operation request");
		return -1;
	}
	return n;
}

bool
hop_pending(const struct lhop *h)
{
	return __atomic_load_n(h->sq.prod, __ATOMIC_ACQUIRE) != h->sq.mine;
}

void
hop_looking(struct lhop *h, bool on)
{
	__atomic_store_n(&h->shm->looking, on ? 1u : 0u, __ATOMIC_SEQ_CST);
}

void
hop_again(struct lhop *h)
{
	event_active(h->bell_ev, EV_READ, 0);
}

void
hop_close(struct lhop *h)
{
	if (h == NULL)
		return;
	event_free(h->bell_ev);
	close(h->bell);
	/* a client asleep on the futex looks at the socket and finds it closed */
	hop_kick(h);
	free(h);
}
