/*
 * ops.c - what the engine keeps of its operations once they are over: a flight
 * recorder of each job's last operations here (its part JOB_PART_REC), with
 * their outcome, and the daemon's counts of outcomes and durations, which the
 * metrics read.  opsjson.c shows them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "../proto/log.h"

/* The job's part JOB_PART_REC: its last operations here, a ring buffer. */
struct recorder {
	struct rec rec[REC_MAX];
	int nrec;			/* entries written in all */
};

static void *
rec_make(struct ringd *rd)
{
	(void)rd;
	return calloc(1, sizeof(struct recorder));
}

const struct job_part rec_part = {
	.name = "recorder",
	.make = rec_make,
	.free = free,
	.idle = NULL,			/* what it holds is history */
};

void
ops_record(struct job *j, const struct proto_fp *fp, const char *plan, uint64_t start_ms,
	   int status, const char *text)
{
	struct recorder *rc = job_part(j, JOB_PART_REC);
	struct rec *r = &rc->rec[rc->nrec % REC_MAX];

	r->fp = *fp;
	r->plan = plan;
	r->start_ms = start_ms;
	r->dur_ms = now_ms() - start_ms;
	r->status = status;
	/* the start of the reason is what matters; it is cut to fit */
	snprintf(r->text, sizeof(r->text), "%s", text);
	rc->nrec++;
}

int
ops_recent(const struct job *j, const struct rec **out)
{
	const struct recorder *rc = job_part(j, JOB_PART_REC);
	int k, n = 0;

	for (k = rc->nrec > REC_MAX ? rc->nrec - REC_MAX : 0; k < rc->nrec; k++)
		out[n++] = &rc->rec[k % REC_MAX];
	return n;
}

int
ops_nrec(const struct job *j)
{
	const struct recorder *rc = job_part(j, JOB_PART_REC);

	return rc->nrec;
}

/* Upper bounds (seconds) of the duration histogram's buckets; +Inf is implied. */
const double ops_dur_le[OPS_DUR_BUCKETS] = {
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
};

static struct ops_counts counts;

void
ops_count(int coll, int status, uint64_t dur_ms)
{
	size_t b;

	if (coll < 1 || coll > PROTO_API_MAX)
		return;
	if (status == 0)
		counts.done[coll]++;
	else
		counts.failed[coll]++;
	if (status < 0 && status >= RING_ERR_MIN)
		counts.errors[-status]++;
	for (b = 0; b < OPS_DUR_BUCKETS && (double)dur_ms / 1000.0 > ops_dur_le[b]; b++)
		;
	counts.bucket[coll][b]++;
	counts.sum_ms[coll] += dur_ms;
}

const struct ops_counts *
ops_counts(void)
{
	return &counts;
}
