/*
 * member.h - what the membership's two files share: census.c (the censuses,
 * which every eviction and every change a view cannot make alone must win)
 * and member.c above it (the view, how it spreads, readmission, the frames'
 * way in).  The rest of the daemon sees the membership only through ringd.h.
 */
#ifndef RINGD_MEMBER_H
#define RINGD_MEMBER_H

#include "link.h"

#define TICK_MS 50          /* the membership's timer */
#define CENSUS_AGAIN_MS 500 /* a census goes round again this often */
#define HOP_WAIT_MS 500     /* a census's wait for a link past a break */
#define MAX_HOPS 8          /* censuses a host holds for a link at once */
#define MAX_POLLS 4         /* polls a host runs at once (census.c) */
#define POLL_MS 2000        /* a poll's censuses go round this long, */
#define POLL_QUIET_MS 1000  /* ... then none of that host for this long */
#define BALLOT_MS 10000     /* a vote to evict a host counts this long */
/* an eviction that others still lack after this long is put to a poll
 * (member.c) */
#define REVERT_AFTER_MS 3000
/* A census's payload (census.c): the asker's key, then bitmaps of the
 * hosts: passed, said yes, vetoed (with yes: held it already) */
#define CENSUS_KEY_LEN 8
#define CENSUS_NBITS 3
#define CENSUS_PL_MAX (CENSUS_KEY_LEN + CENSUS_NBITS * (PROTO_VIEW_MAX / 8))

/* A ring link's host, and when this host last heard it over that link. */
struct watch {
	int peer;
	uint64_t heard_ms;
	bool warned; /* said once that eviction has no majority */
};

/* A census this host runs: an eviction it asks for (a neighbour silent for
 * evict_after_ms), or a poll of what the others hold. */
struct ask {
	int host;      /* -1: none */
	uint32_t want; /* the incarnation it asks about */
	/* its censuses carry it: one that comes home without it is none of
	 * ours */
	uint64_t key;
	bool poll;                /* a poll, not a neighbour's eviction */
	bool self_yes, self_veto; /* our own answer, as we sent it */
	uint64_t started_ms, sent_ms;
	uint32_t round; /* the last census sent (offset) */
	uint32_t home;  /* ... and the last that came home */
	/* the last census home: hosts that said yes, that hear the host (a
	 * veto), that it passed, that hold it at want already */
	int yes, heard, reached, held;
	char why[192];
};

/* A census held here until a link to the host past a break is up. */
struct hop {
	bool used;
	int to; /* the host it waits for */
	uint64_t since_ms;
	struct proto_frame f;
	uint8_t pl[CENSUS_PL_MAX];
};

struct member {
	struct ringd *rd;
	void (*changed)(struct ringd *rd); /* the ring's handler */
	/* member.c's handler of a census of ours that came home with more than
	 * half the hostfile's hosts saying yes */
	void (*decided)(struct ringd *rd, const struct ask *a);
	struct timer *tick;
	bool tick_off; /* evict_after_ms = 0: no timer */
	struct watch next, prev;
	/* [0]: the next host's eviction, [1]: the previous one's, then polls */
	struct ask ask[2 + MAX_POLLS];
	struct hop hops[MAX_HOPS];
	uint64_t *since_ms;        /* [world]: when its last change came here */
	uint64_t *member_since_ms; /* [world]: when it was last readmitted */
	uint64_t *up_since_ms;     /* [world]: evicted, its direct link up since */
	uint64_t *probe_ms;        /* [world]: evicted, its next probe */
	uint32_t *probe_gap_ms;    /* [world]: ... and the wait after that one */
	uint32_t *flaps;           /* [world]: evictions soon after readmissions */
	uint64_t *view_sent_ms;    /* [world]: when our view last went to it */
	/* [world]: the incarnation we last voted to evict it at (census.c) */
	uint32_t *ballot;
	uint64_t *ballot_ms;     /* [world]: ... when (0: never) */
	uint64_t *poll_quiet_ms; /* [world]: no poll of it before this */
	char (*why)[192];        /* [world]: why it was evicted */
};

/* Incarnations are serial numbers (RFC 1982), as generations are: a is
 * later than b when a - b, as a signed 32-bit difference, is positive, so a
 * number that wraps still moves on. */
static inline bool
member_inc_after(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) > 0;
}

/* census.c */
/* The link membership frames of host h come on: its ring link while that is
 * up, else its direct link (NULL: none). */
struct link *census_link_of(struct ringd *rd, int h);
/* A ring link's host: whether it is silent for evict_after_ms, and its
 * eviction (a, with w its watch). */
void census_watch(struct ringd *rd, struct link *l, struct watch *w, struct ask *a);
/* The censuses held at a break, and the polls' next rounds and ends. */
void census_run(struct ringd *rd);
/* Polls the others: does host h stand at incarnation want?  A new poll
 * (false: one runs already, or no room, or too soon). */
bool census_poll(struct ringd *rd, int h, uint32_t want, const char *why);
/* An EVICT frame: RX_DONE or RX_ERROR. */
int census_rx(struct link *l, const struct proto_frame *f, const uint8_t *pl);

#endif /* RINGD_MEMBER_H */
