/*
 * ops.c - what `ringctl ops` shows: for every job, each local rank's last
 * sequence numbers (called, answered), the operation in flight and what it waits
 * for, and a flight recorder of the last operations with their outcome.  With the
 * same view from every host an operator sees who waits for whom while it happens.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include <event2/buffer.h>

#include "coll.h"
#include "../proto/log.h"

static const char *
err_name(int code)
{
	static const char *const names[] = { "ok", "EINVAL", "ENOMEM", "EDAEMON", "EPEER",
		"ETIMEDOUT", "EMISMATCH", "EABORTED", "EPROTO", "EPERM", "ENOTSUP", "ECLOSED" };

	return code <= 0 && code >= RING_ERR_MIN ? names[-code] : "?";
}

void
ops_record(struct job *j, const struct op *op)
{
	struct rec *r = &j->rec[j->nrec % REC_MAX];

	r->fp = op->fp;
	r->start_ms = op->started_ms;
	r->dur_ms = now_ms() - op->started_ms;
	r->status = op->status;
	/* the start of the reason is what matters; it is cut to fit */
	memcpy(r->text, op->text, sizeof(r->text) - 1);
	r->text[sizeof(r->text) - 1] = '\0';
	j->nrec++;
}

/* In words, what the op in flight is waiting for. */
static void
waiting_for(const struct op *op, char *buf, size_t cap)
{
	const struct job *j = op->job;

	if (op->joined < op->nc)
		snprintf(buf, cap, "local ranks to call it");
	else if (op->finished)
		snprintf(buf, cap, "its data to leave for host %d", j->next_host);
	else if (op->ring.plan.nrx > 0 && !op->ring.hdr_rcvd)
		snprintf(buf, cap, "host %d to start it", j->prev_host);
	else if (op->ring.rx_i < op->ring.plan.nrx)
		snprintf(buf, cap, "data from host %d (step %d of %d)", j->prev_host,
			 op->ring.rx_i + 1, op->ring.plan.nrx);
	else if (op->ring.tx_i < op->ring.plan.ntx)
		snprintf(buf, cap, "credit or room towards host %d", j->next_host);
	else
		snprintf(buf, cap, "nothing (completing)");
}

static json_t *
job_ops_json(struct ringd *rd, struct job *j)
{
	json_t *ranks = json_array(), *recent = json_array(), *inflight = json_null();
	struct op *op = j->active;
	char fp[160], w[160];
	int i, k;

	for (i = 0; i < j->local_size; i++) {
		if (j->loc[i].sess == NULL)
			continue;
		json_array_append_new(ranks, json_pack("{s:i, s:i, s:i, s:I, s:I}",
			"rank", j->loc[i].rank, "local_rank", i, "pid", j->loc[i].sess->pid,
			"called", (json_int_t)j->loc[i].entered,
			"answered", (json_int_t)j->loc[i].done));
	}
	if (op != NULL) {
		json_t *missing = json_array();

		for (i = 0; i < op->nc && i < j->local_size; i++)
			if (!op->c[i].in)
				json_array_append_new(missing, json_integer(j->loc[i].rank));
		waiting_for(op, w, sizeof(w));
		inflight = json_pack("{s:s, s:I, s:I, s:o, s:s, s:i, s:i}",
			"fingerprint", proto_fp_format(&op->fp, fp, sizeof(fp)),
			"seq", (json_int_t)op->fp.seq,
			"age_ms", (json_int_t)(now_ms() - op->started_ms),
			"waiting_for_local", missing, "waiting_for", w,
			"prev_host", j->prev_host, "next_host", j->next_host);
	}
	for (k = j->nrec > REC_MAX ? j->nrec - REC_MAX : 0; k < j->nrec; k++) {
		const struct rec *r = &j->rec[k % REC_MAX];

		json_array_append_new(recent, json_pack("{s:s, s:I, s:I, s:I, s:s, s:s}",
			"fingerprint", proto_fp_format(&r->fp, fp, sizeof(fp)),
			"seq", (json_int_t)r->fp.seq,
			"age_ms", (json_int_t)(now_ms() - r->start_ms),
			"duration_ms", (json_int_t)r->dur_ms,
			"status", err_name(r->status),
			"error", r->text));
	}
	(void)rd;
	return json_pack("{s:s, s:I, s:i, s:b, s:I, s:I, s:o, s:o, s:o}",
		"name", j->name, "id", (json_int_t)j->id, "world", j->world, "ready", j->ready,
		"next_seq", (json_int_t)j->next_seq, "last_done_seq", (json_int_t)j->last_done_seq,
		"ranks", ranks, "inflight", inflight, "recent", recent);
}

char *
ops_json(struct ringd *rd)
{
	json_t *jobs = json_array(), *doc;
	struct job *j;
	char *out;

	TAILQ_FOREACH(j, &rd->jobs, entry)
		if (j->nloc > 0 || j->active != NULL || j->nrec > 0)
			json_array_append_new(jobs, job_ops_json(rd, j));
	doc = json_pack("{s:i, s:s, s:I, s:o}", "rank", rd->rank,
			"state", ring_state_name(rd->state), "epoch", (json_int_t)rd->epoch,
			"jobs", jobs);
	if (doc == NULL)
		return strdup("{\"error\": \"cannot build the ops document\"}");
	out = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	return out;
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
