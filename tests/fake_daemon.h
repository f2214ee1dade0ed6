/*
 * fake_daemon.h - a fake ringd for libring's unit tests: one thread on a
 * private SOCK_SEQPACKET socket that speaks the client protocol, simulates the
 * other ranks of a job (all-reduce sums size equal contributions, all-gather
 * tags each rank's block, ...) and records every request.  It checks that
 * every request stays inside the arena, and it can misbehave on purpose
 * (enum fake_mode) so that the failure paths of libring are reached: daemon
 * gone, malformed reply, error status, silent daemon, WELCOME late or never.
 * Later sessions on the same socket (ring_split's sub-communicators) always
 * behave.  The tests read what it saw from F once fake_stop has joined it.
 */
#ifndef TESTS_FAKE_DAEMON_H
#define TESTS_FAKE_DAEMON_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "libring/internal.h"

enum fake_mode {
	FAKE_OK,
	FAKE_REFUSE_HELLO,  /* ERROR instead of WELCOME */
	FAKE_CLOSE_ON_OP,   /* hang up when the first op arrives */
	FAKE_GARBAGE_ON_OP, /* answer the first op with junk */
	FAKE_WRONG_REQID,   /* answer the first op with another id */
	FAKE_STATUS_ONCE,   /* fail the first op with a status, then behave */
	FAKE_SILENT,        /* never answer an op */
	FAKE_LATE_WELCOME,  /* WELCOME after F.welcome_delay_ms (the job forms) */
	FAKE_NO_WELCOME,    /* never WELCOME (a rank of the job never comes) */
};

#define FAKE_MAX_OPS 4096
#define FAKE_MAX_SUBS 4   /* sessions after the first (ring_split) */
#define FAKE_TAG 1000000u /* all-gather: rank r's block is send + r*TAG */
#define FAKE_BCAST_FILL 0xb0b0b0b0u
#define FAKE_RECV_FILL 0x5e5e5e5eu
#define FAKE_SCRATCH_FILL 0xdeadbeefu /* what in-place reduce-scatter leaves elsewhere */

/* A later session (a sub-communicator): what it said and did. */
struct fake_sub {
	struct proto_hello hello;
	size_t nops;
	bool bye;
};

/* The fake's behaviour and what it saw: one at a time. */
struct fake {
	char dir[32], path[64];
	int lfd;
	pthread_t thread, acceptor;
	bool running, accepting;
	volatile bool stop; /* the acceptor's end */
	/* behaviour */
	int rank, size;
	uint64_t piece;
	enum fake_mode mode;
	int welcome_delay_ms;
	uint32_t welcome_flags;               /* PROTO_WELCOME_* of the first session */
	int64_t split_rows[8][LR_SPLIT_COLS]; /* other ranks' rows of a split */
	/* what it saw on the first session */
	struct proto_hello hello;
	int arena_seals;
	off_t arena_size;
	uint64_t arena_magic;
	bool bye;
	struct proto_op ops[FAKE_MAX_OPS];
	size_t nops;
	uint64_t send_sum; /* of SEND payloads */
	/* and on the later ones */
	struct fake_sub subs[FAKE_MAX_SUBS];
	int nsubs;
	char problem[256]; /* the first thing that was wrong, if any */
};
extern struct fake F;

/* Unsets every launcher and libring variable (RING_*, torchrun's, Open MPI's,
 * PMI's, Slurm's, MLX's), so that a test starts from no launcher at all. */
void fake_scrub_env(void);
/* Starts the fake as rank of size, splitting at piece bytes, behaving as mode;
 * scrubs the environment first. */
void fake_start(int rank, int size, uint64_t piece, enum fake_mode mode);
/* Joins the fake (the comm must be closed or broken), removes its socket, and
 * fails the test if it saw anything wrong. */
void fake_stop(void);
/* ring_open on the fake's socket, job "unit"; fails the test if it fails. */
ring_comm *fake_open(size_t arena_bytes, int timeout_ms);
/* The same with local_rank of local_size processes on this host. */
ring_comm *fake_open_local(int local_rank, int local_size);
/* The collective, count and fingerprint count of each op since `from`, as one
 * comparable string ("allreduce:256/1000 ..."). */
void fake_op_counts(size_t from, char *out, size_t cap);

#endif /* TESTS_FAKE_DAEMON_H */
