/*
 * jobrec.h - struct job itself: what a job is on this host (its name, its
 * formation, its processes here).  Only the job's own files include it: job.c
 * (membership), jobform.c (a formation's agreement), jobattach.c (a host's
 * processes attaching), revoke.c (revocation and the shrink's answer) and
 * jobtab.c (the table and the record's functions, which the rest of the
 * engine calls).
 * What the engine's other rooms keep of a job is in their parts (job_part),
 * each its owner's.
 */
#ifndef RINGD_JOBREC_H
#define RINGD_JOBREC_H

#include "coll.h"

struct job {
	uint32_t id;			/* proto_job_id(name) */
	char name[PROTO_JOB_MAX + 1];	/* "" until a client or JOIN names it */
	/* membership, the same on every host once complete */
	int world;			/* global world size (0: no formation here) */
	int *host_of;			/* [world]: host of each rank, -1 unknown */
	int nplaced;			/* ranks with a host */
	int *hosts;			/* member hosts in ring order */
	int nhosts;
	int **hranks;			/* [nhosts]: each member's ranks, ascending */
	int *nhranks;
	int pos;			/* our index in hosts (-1: not a member) */
	int next_host, prev_host;	/* our neighbours in the job's ring */
	bool ready;			/* every rank placed, formation agreed */
	uint32_t fgen;			/* generation of the current (or last) formation */
	uint32_t gen_max;		/* the highest generation claimed or formed that
					 * this host has seen: ours propose above it */
	bool confirmed;                 /* we sent a CONFIRM of the formation ... */
	uint32_t confirm_gen;           /* ... of this generation ... */
	uint64_t confirm_digest;        /* ... on these claims (jobform.c) */
	struct job_host *host;		/* [hosts]: each host of the ring, as this job
					 * knows it (a record per host) */
	char error[PROTO_TEXT_MAX + 1];	/* why the job cannot form, if it cannot */
	uint64_t error_ms;		/* when that was found */
	/* this host's processes */
	int local_size;			/* expected (0: none here) */
	int local_world;		/* the world size they asked for */
	struct job_proc *loc;		/* [local_size], by local rank */
	int nloc;			/* attached */
	int nmember;			/* ... of them in the current formation */
	bool joined;			/* our ranks are claimed in the current formation */
	bool reclaim;			/* ... but the ring broke before it formed: the
					 * others forgot the claim (job_ring_up) */
	bool formed;			/* ... and it became ready here (our processes may
					 * have run operations in it) */
	bool broken;			/* the ring broke under it: it takes no new
					 * member, and dissolves as its processes leave */
	bool survivors;                 /* its processes here come from ring_comm_shrink
					 * (PROTO_HELLO_SURVIVORS): it may form on a
					 * broken ring (hosts_linked) */
	bool revoked;                   /* a rank revoked the formation (fgen): every
					 * operation of it fails, until it dissolves */
	char revoke_why[PROTO_TEXT_MAX + 1]; /* who revoked it */
	char broke_why[PROTO_TEXT_MAX + 1];  /* broken: what the ring lost */
	struct proto_grow *grow_offer;       /* a lobby's latest grow offer (jobgrow.c) */
	uint64_t stale_frames;		/* frames dropped: of an older formation, or
					 * beyond what this job may hold */
	void *part[JOB_NPARTS];		/* the other rooms' state of it (job_part) */
	unsigned work;                  /* JOB_WORK_*: asked for, to run in the turn */
	bool working;                   /* on rd->work */
	TAILQ_ENTRY(job) work_entry;
	bool over;                      /* the table's sweep found it over here ... */
	uint64_t over_ms;               /* ... at this time (jobtab.c) */
	TAILQ_ENTRY(job) entry;
};

/*
 * jobform.c, for job.c: the member list from the claims (the member hosts
 * in ring order; the formation's generation, the latest claim, in *gen; the
 * number of hosts, or -1: out of memory), and the agreement on it: whether
 * every other member host of the n has confirmed the same claims (ours is
 * sent when it is new).  A CONFIRM frame (*recheck: the job whose agreement
 * may have come); a host's LEAVE of its claim voids its confirmation; ours
 * is sent again at the next look (the ring broke or came back).  And the
 * routes of membership frames: straight to each host with ranks in the
 * formation that this host has a link to; to every host it has a link to;
 * and whether j is a survivors' job on a ring that broke with every host of
 * hosts[0..n) but this one linked to here, so it forms over those links.
 */
int job_members_make(struct ringd *rd, struct job *j, uint32_t *gen);
bool job_form_agreed(struct ringd *rd, struct job *j, int n, uint32_t gen);
int job_form_rx(struct ringd *rd, struct link *l, const struct proto_frame *f, const uint8_t *pl,
		struct job **recheck);
void job_form_void(struct job *j, int origin, uint32_t claim);
void job_form_again(struct job *j);
void job_send_straight(struct ringd *rd, struct job *j, struct proto_frame *f, const uint8_t *pl);
void job_send_linked(struct ringd *rd, struct proto_frame *f, const uint8_t *pl);
bool job_hosts_linked(struct ringd *rd, const struct job *j, const int *hosts, int n);

/* jobgrow.c, for jobattach.c: a newcomer's place in its base's lobby (its
 * name, rank and world there); false with err when it cannot wait there. */
bool job_grow_newcomer_place(struct ringd *rd, const char *base, int lr, char *name, size_t cap,
			     int *rank, int *world, char *err, size_t errlen);

/* revoke.c: a REVOKE frame, straight from its host or going round. */
int job_rx_revoke(struct ringd *rd, struct link *l, const struct proto_frame *f, const uint8_t *pl);

/* job.c, for jobattach.c: claiming this host's ranks once its processes are
 * all here, taking the claim back, telling the others (JOIN, LEAVE), and a
 * job that cannot form (its processes told why; tell: every host too). */
#define FORM_ERROR_MS 3000 /* a failure to form is this job's answer for this long */
void job_claim(struct ringd *rd, struct job *j);
void job_withdraw(struct ringd *rd, struct job *j);
void send_membership(struct ringd *rd, struct job *j, uint16_t type, uint64_t last);
bool job_complete(const struct job *j);
void job_fail_form(struct ringd *rd, struct job *j, bool tell, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif /* RINGD_JOBREC_H */
