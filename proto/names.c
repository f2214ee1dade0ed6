/*
 * names.c - the names that both codecs and both sides of every boundary share:
 * the collectives (their names, the algorithm an API collective runs as,
 * which have a root), the algorithms a rank may ask for, and job names with
 * the job id each side derives from one.  The peer frames (frame.c) and the
 * client messages (msg.c) check their fields against these, so they live
 * below both codecs, which call nothing of each other.
 */
#include <string.h>

#include "proto.h"

/* ---- collectives and algorithms ---- */

static const char *const coll_names[PROTO_API_MAX + 1] = {
	[PROTO_COLL_ALLREDUCE] = "allreduce",
	[PROTO_COLL_ALLGATHER] = "allgather",
	[PROTO_COLL_REDUCE_SCATTER] = "reduce_scatter",
	[PROTO_COLL_BROADCAST] = "broadcast",
	[PROTO_COLL_BARRIER] = "barrier",
	[PROTO_COLL_SEND] = "send",
	[PROTO_COLL_RECV] = "recv",
	[PROTO_COLL_REDUCE] = "reduce",
	[PROTO_COLL_GATHER] = "gather",
	[PROTO_COLL_SCATTER] = "scatter",
	[PROTO_COLL_ALLGATHERV] = "allgatherv",
	[PROTO_COLL_ALLTOALL] = "alltoall",
	[PROTO_COLL_ALLTOALLV] = "alltoallv",
};

/* What each API collective above PROTO_COLL_MAX runs as: a pair a line. */
/* clang-format off */
static const uint8_t coll_base[PROTO_API_MAX + 1] = {
	[PROTO_COLL_REDUCE] = PROTO_COLL_ALLREDUCE,
	[PROTO_COLL_GATHER] = PROTO_COLL_ALLGATHER,
	[PROTO_COLL_SCATTER] = PROTO_COLL_BROADCAST,
	[PROTO_COLL_ALLGATHERV] = PROTO_COLL_ALLGATHER,
	[PROTO_COLL_ALLTOALL] = PROTO_COLL_BARRIER,
	[PROTO_COLL_ALLTOALLV] = PROTO_COLL_BARRIER,
};
/* clang-format on */

const char *
proto_coll_name(int coll)
{
	if (coll < 1 || coll > PROTO_API_MAX)
		return "?";
	return coll_names[coll];
}

int
proto_coll_base(int api)
{
	if (api < 1 || api > PROTO_API_MAX)
		return 0;
	return api <= PROTO_COLL_MAX ? api : coll_base[api];
}

bool
proto_coll_rooted(int api)
{
	return api == PROTO_COLL_BROADCAST || api == PROTO_COLL_REDUCE ||
	       api == PROTO_COLL_GATHER || api == PROTO_COLL_SCATTER;
}

static const char *const algo_names[PROTO_ALGO_COUNT] = { "auto", "ring", "rd", "2l" };

const char *
proto_algo_name(int algo)
{
	return algo >= 0 && algo < PROTO_ALGO_COUNT ? algo_names[algo] : "?";
}

int
proto_algo_parse(const char *s)
{
	int i;

	for (i = 0; s != NULL && i < PROTO_ALGO_COUNT; i++)
		if (strcmp(s, algo_names[i]) == 0)
			return i;
	return -1;
}

/* ---- jobs ---- */

bool
proto_job_name_ok(const char *name)
{
	size_t n;

	if (name == NULL)
		return false;
	for (n = 0; name[n] != '\0'; n++) {
		char c = name[n];

		if (n >= PROTO_JOB_MAX)
			return false;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-' || c == ':'))
			return false;
	}
	return n > 0;
}

uint32_t
proto_job_id(const char *name)
{
	uint32_t h = 2166136261u;
	const unsigned char *p;

	for (p = (const unsigned char *)(name != NULL ? name : ""); *p != '\0'; p++) {
		h ^= *p;
		h *= 16777619u;
	}
	/* 0 means "no job" on the wire (link frames). */
	return h != 0 ? h : 1;
}
