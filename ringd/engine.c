/*
 * engine.c - the engine's door to the ring floor: every frame of a job or of
 * the failure model that the ring hands up goes to its handler here (the
 * membership, the collectives, point-to-point, failure), and a payload about
 * to be read is offered to the operation that can take it in place.  The top
 * of the engine's files: it calls them, none of them calls it.
 */
#include <stdio.h>

#include "coll.h"

/* The engine's frames, from the ring floor, to their handlers. */
int
engine_frame(struct ringd *rd, struct link *l, const struct proto_frame *f, const uint8_t *pl)
{
	switch (f->type) {
	case PROTO_F_JOIN:
	case PROTO_F_LEAVE:
	case PROTO_F_CONFIRM:
	case PROTO_F_REVOKE:
		return job_rx(rd, l, f, pl);
	case PROTO_F_GROW:
		return job_grow_rx(rd, l, f, pl);
	case PROTO_F_ABORT:
		/* all go round the ring (each host acts on it and passes it on),
		 * but an op's abort may come straight from its host while the ring
		 * is broken (op_abort_ring) */
		if (f->job != 0 && f->seq != 0 && f->aux == 0 &&
		    PROTO_ROUTE_DST(f->route) == rd->rank && PROTO_ROUTE_SRC(f->route) == l->peer &&
		    l->peer != rd->rank)
			return fail_rx_abort(rd, l, f, pl);
		if (l->dir != LINK_PREV || PROTO_ROUTE_DST(f->route) != PROTO_ROUTE_SRC(f->route)) {
			snprintf(l->last_error, sizeof(l->last_error), "abort frame on the wrong "
				 "link");
			return RX_ERROR;	/* the link closes with that reason */
		}
		if (f->job == 0)	/* a host lost a link */
			return fail_rx_ring_down(rd, l, f, pl);
		if (f->seq == 0)	/* a job that cannot form */
			return job_rx(rd, l, f, pl);
		return fail_rx_abort(rd, l, f, pl);	/* an op failed */
	case PROTO_F_CREDIT:
	case PROTO_F_OPHDR:
	case PROTO_F_DATA:
		return exec_rx(rd, l, f, pl);
	case PROTO_F_P2P_RTS:
	case PROTO_F_P2P_CTS:
	case PROTO_F_P2P_DATA:
		return p2p_rx(rd, l, f, pl);
	default:
		snprintf(l->last_error, sizeof(l->last_error), "unexpected %s frame",
			 proto_frame_type_name(f->type));
		return RX_ERROR;
	}
}

uint8_t *
engine_place(struct ringd *rd, struct link *l, const struct proto_frame *f, struct arena **arena,
	   const void **owner)
{
	if (f->type == PROTO_F_DATA)
		return exec_rx_dest(rd, l, f, arena, owner);
	if (f->type == PROTO_F_P2P_DATA)
		return p2p_rx_dest(rd, f, arena, owner);
	return NULL;
}

/*
 * The engine's turn: the work the events asked for (job_want, op_complete,
 * exec_pump), run after them, one piece at a time, until none is left: each
 * operation that is over completed (its processes answered, the op freed),
 * then each job's work in its fixed order (coll_work), then the daemon's
 * (every job's sends; the links' blocked input offered again).  Nothing
 * here runs on the stack of the event that asked for it, so no handler
 * finds the world changed under it.  Offering the links' input again can
 * ask for more work without end when a frame blocks again at once: a turn
 * offers it TURN_RESUMES times at most and leaves the rest to the next
 * (true: some is left, the loop must not sleep).
 */
#define TURN_RESUMES 8

bool
engine_turn(struct ringd *rd)
{
	struct op *op;
	struct job *j;
	unsigned what;
	int resumes = 0;

	for (;;) {
		if ((op = op_next_done(rd)) != NULL)
			op_complete_now(rd, op);
		else if ((j = job_work_next(rd, &what)) != NULL)
			coll_work(rd, j, what);
		else if (job_take_all(rd, ENGINE_WORK_PUMP))
			exec_pump_now(rd);
		else if (resumes < TURN_RESUMES && job_take_all(rd, ENGINE_WORK_RESUME)) {
			resumes++;
			link_rx_resume_all(rd);
		} else
			break;
	}
	return job_work_pending(rd) || !TAILQ_EMPTY(&rd->done);
}

bool
engine_busy(const struct ringd *rd)
{
	return rd->ops_live > 0;
}
