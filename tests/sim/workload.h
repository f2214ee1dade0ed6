/*
 * workload.h - the processes and jobs of one simulated schedule: each job a
 * script of operations (collectives, point-to-point, an abort, a stalled
 * rank) that all its ranks run in order, each result checked against what
 * the ranks' data says it must be.
 */
#ifndef RINGD_SIM_WORKLOAD_H
#define RINGD_SIM_WORKLOAD_H

#include "sim.h"

#define SIM_JOBS_MAX 3
#define SIM_RANKS_MAX 8
#define SIM_STEPS_MAX 24
#define SIM_PROCS_MAX (SIM_JOBS_MAX * SIM_RANKS_MAX)
#define SIM_ARENA (2u << 20)		/* send and receive halves: 8 ranks of 64 KiB each */

/* One step of a job's script. */
struct sim_step {
	int coll;			/* PROTO_COLL_* */
	int dtype, redop;
	uint64_t count;			/* elements per rank */
	int root;			/* broadcast */
	int src, dst;			/* send/recv: the only ranks that take part */
	int abort_rank;			/* this rank posts it with PROTO_OP_F_ABORT (-1) */
	int mismatch_rank;		/* this rank asks for one element more (-1) */
	int stall_rank;			/* this rank calls it only after the others' bound */
};

struct sim_proc;

struct sim_job {
	char name[32];
	int world;
	int nsteps;
	struct sim_step step[SIM_STEPS_MAX];
	int inc;			/* incarnation: the formation the script runs in */
	bool inc_failed;		/* an op of it failed: every process starts over */
	uint64_t stalls;                /* times a rank of it stalled or quit */
	bool complete;			/* one incarnation ran the whole script */
	int nproc;
	struct sim_proc *proc[SIM_RANKS_MAX];
	bool rs_inplace;		/* reduce-scatter in place (a host holds several
					 * ranks: what libring does then) */
};

struct sim_proc {
	struct client c;		/* the engine's view */
	struct sim_job *job;
	int host, rank, lr, lsize;
	int inc;			/* incarnation it is in (or will attach to) */
	int step;			/* next step of the script */
	bool attached, welcomed, busy, finished, gone;
	uint64_t wake_at;		/* it does nothing before (virtual ms) */
	uint64_t reqid;			/* of the op in flight */
	uint8_t *mem;			/* its shared memory */
	uint8_t *recv;			/* where the op in flight puts its result */
	struct arena *arena;		/* ... as the engine holds it (one ref ours) */
	int replies;			/* DONE for the op in flight (must be 1) */
	bool left;			/* it left: the engine must not call it */
	bool leaving;			/* ... it is leaving: replies are dropped */
	bool refused;			/* the engine refused it: it must leave */
	bool stalled;			/* it stalled at its step once */
	uint64_t cuts_at, stalls_at;	/* the faults there were when it attached */
	bool broken_at_attach;          /* a cut link was not yet whole again when it
					 * attached */
};

/* What the schedule has seen go wrong; a schedule passes with none. */
struct sim_report {
	int failures;
	char first[512];
};
void sim_fail(struct sim_report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The jobs and processes of a schedule, made from its seed. */
struct sim_world {
	struct sim_net *net;
	struct sim_rng *rng;
	struct sim_rng *rng2;		/* draws added since seeds were kept */
	struct sim_report *rep;
	uint64_t cuts;			/* links cut so far */
	int healing;			/* cut links not yet up again */
	int njobs, nprocs;
	struct sim_job job[SIM_JOBS_MAX];
	struct sim_proc proc[SIM_PROCS_MAX];
	bool faults;			/* ranks stall and quit */
	bool verbose;
};
void sim_world_make(struct sim_world *w, int nhosts, bool faults);
/* A process can act now. */
bool sim_proc_ready(const struct sim_proc *p);
/* It acts: attaches, posts its next step, or leaves. */
void sim_proc_act(struct sim_world *w, struct sim_proc *p);
/* Every job ran its script once with every op right. */
bool sim_world_done(const struct sim_world *w);
/* The end: every process has left; the engine holds nothing of theirs. */
void sim_world_end(struct sim_world *w);

#endif					/* RINGD_SIM_WORKLOAD_H */
