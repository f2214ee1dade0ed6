/*
 * opsjson.c - what `ringctl ops` shows: for every job, each local rank's last
 * sequence numbers (called, answered), the operation in flight and what it waits
 * for, and the flight recorder's last operations with their outcome.  With the
 * same view from every host an operator sees who waits for whom while it happens.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "opring.h"

static const char *
err_name(int code)
{
	static const char *const names[] = { "ok",     "EINVAL",    "ENOMEM",    "EDAEMON",
					     "EPEER",  "ETIMEDOUT", "EMISMATCH", "EABORTED",
					     "EPROTO", "EPERM",     "ENOTSUP",   "ECLOSED" };

	return code <= 0 && code >= RING_ERR_MIN ? names[-code] : "?";
}

/* The first host whose operation header has not come. */
static int
hdr_missing(struct op *op)
{
	const struct plan *pl = &op_ring(op)->plan;
	int i;

	for (i = 0; i < pl->nhdr_from; i++)
		if (!pl->hdr_got[i])
			return job_member(op_job(op), pl->hdr_from[i]);
	return -1;
}

/* In words, what the op in flight is waiting for. */
static void
waiting_for(struct op *op, char *buf, size_t cap)
{
	const struct op_ring *ring = op_ring(op);
	const struct job *j = op_job(op);

	if (op_njoined(op) < op_ncontrib(op))
		snprintf(buf, cap, "local ranks to call it");
	else if (op_finished(op))
		snprintf(buf, cap, "its data to leave for host %d", job_next_host(j));
	else if (ring->hdr_rx < ring->plan.nhdr_from)
		snprintf(buf, cap, "host %d to start it", hdr_missing(op));
	else if (ring->rx_i < ring->plan.nrx)
		snprintf(buf, cap, "data from host %d (step %d of %d)",
			 job_member(j, ring->plan.rx[ring->rx_i].from), ring->rx_i + 1,
			 ring->plan.nrx);
	else if (ring->tx_i < ring->plan.ntx)
		snprintf(buf, cap, "credit or room towards host %d",
			 job_member(j, ring->plan.tx[ring->tx_i].to));
	else
		snprintf(buf, cap, "nothing (completing)");
}

static json_t *
job_ops_json(struct ringd *rd, struct job *j)
{
	json_t *ranks = json_array(), *recent = json_array(), *inflight = json_null();
	struct op *op = coll_active(j);
	const struct rec *rec[REC_MAX];
	struct plan_cost cost;
	char fp[160], w[160];
	int i, k, n;

	for (i = 0; i < job_local_size(j); i++) {
		const struct job_proc *p = job_proc(j, i);

		if (p->sess == NULL)
			continue;
		json_array_append_new(ranks, json_pack("{s:i, s:i, s:i, s:I, s:I}", "rank", p->rank,
						       "local_rank", i, "pid", p->sess->pid,
						       "called", (json_int_t)p->entered, "answered",
						       (json_int_t)p->done));
	}
	if (op != NULL) {
		json_t *missing = json_array();

		for (i = 0; i < op_ncontrib(op) && i < job_local_size(j); i++)
			if (!op_contrib(op, i)->in)
				json_array_append_new(missing, json_integer(job_proc(j, i)->rank));
		waiting_for(op, w, sizeof(w));
		inflight = json_pack("{s:s, s:s?, s:I, s:I, s:o, s:s, s:i, s:i}", "fingerprint",
				     proto_fp_format(op_fp(op), fp, sizeof(fp)), "plan",
				     op_plan_name(op), "seq", (json_int_t)op_fp(op)->seq, "age_ms",
				     (json_int_t)(now_ms() - op_started_ms(op)),
				     "waiting_for_local", missing, "waiting_for", w, "prev_host",
				     job_prev_host(j), "next_host", job_next_host(j));
	}
	n = ops_recent(j, rec);
	for (k = 0; k < n; k++) {
		const struct rec *r = rec[k];

		json_array_append_new(
		    recent,
		    json_pack("{s:s, s:s?, s:I, s:I, s:I, s:s, s:s}", "fingerprint",
			      proto_fp_format(&r->fp, fp, sizeof(fp)), "plan", r->plan, "seq",
			      (json_int_t)r->fp.seq, "age_ms", (json_int_t)(now_ms() - r->start_ms),
			      "duration_ms", (json_int_t)r->dur_ms, "status", err_name(r->status),
			      "error", r->text));
	}
	(void)rd;
	job_plan_cost(j, &cost);	/* the model's inputs (latency_doubling = auto) */
	return json_pack("{s:s, s:I, s:i, s:b, s:I, s:I, s:o, s:o, s:o, s:f, s:f}", "name",
			 job_name(j), "id", (json_int_t)job_id(j), "world", job_world(j), "ready",
			 job_ready(j), "next_seq", (json_int_t)coll_next_seq(j), "last_done_seq",
			 (json_int_t)coll_last_done(j), "ranks", ranks, "inflight", inflight,
			 "recent", recent, "hop_us", cost.hop_us, "link_gbps", 8e-3 / cost.byte_us);
}

char *
ops_json(struct ringd *rd)
{
	json_t *jobs = json_array(), *doc;
	struct job *j;
	char *out;

	JOBS_FOREACH(j, rd)
		if (job_nloc(j) > 0 || coll_active(j) != NULL || ops_nrec(j) > 0)
			json_array_append_new(jobs, job_ops_json(rd, j));
	doc = json_pack("{s:i, s:s, s:I, s:o}", "rank", rd->rank, "state",
			ring_state_name(rd->state), "epoch", (json_int_t)rd->epoch, "jobs", jobs);
	if (doc == NULL)
		return strdup("{\"error\": \"cannot build the ops document\"}");
	out = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	return out;
}

json_t *
ops_inflight_json(struct job *j, struct op *op)
{
	const struct op_ring *ring = COLL_IS_P2P(op_fp(op)->coll) ? NULL : op_ring(op);
	json_t *waiting = json_array();
	char fp[160];
	int i;

	for (i = 0; i < op_ncontrib(op) && i < job_local_size(j); i++)
		if (!op_contrib(op, i)->in)
			json_array_append_new(waiting, json_integer(job_proc(j, i)->rank));
	return json_pack("{s:s, s:I, s:I, s:s, s:o, s:b, s:i, s:i, s:i, s:i, s:I}", "coll",
			 proto_coll_name(op_fp(op)->coll), "seq", (json_int_t)op_fp(op)->seq,
			 "age_ms", (json_int_t)(now_ms() - op_started_ms(op)), "fingerprint",
			 proto_fp_format(op_fp(op), fp, sizeof(fp)), "waiting_for_local", waiting,
			 "started", op_started(op), "headers_in", ring ? ring->hdr_rx : 0,
			 "headers_expected", ring ? ring->plan.nhdr_from : 0, "step",
			 ring ? ring->rx_i : 0, "steps", ring ? ring->plan.nrx : 0, "step_bytes_in",
			 (json_int_t)(ring ? ring->rx_off : 0));
}
