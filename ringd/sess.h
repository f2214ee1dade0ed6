/*
 * sess.h - client sessions: one per process attached through libring.
 */
#ifndef RINGD_SESS_H
#define RINGD_SESS_H

#include "ringd.h"


void sess_op_done(struct sess *s, uint64_t reqid, int status, const char *text);
uint32_t sess_timeout_ms(const struct sess *s);
int sess_rank(const struct sess *s);
int sess_local_rank(const struct sess *s);
int sess_pid(const struct sess *s);
struct job *sess_job(const struct sess *s);
/* job.c tells the session where it stands. */
void sess_set_job(struct sess *s, struct job *j, int rank, int world, int local_rank,
		  int local_size);
void sess_welcome(struct sess *s);	/* the job formed: WELCOME */
void sess_refuse(struct sess *s, int code, const char *text);	/* it cannot: ERROR, close */

#endif /* RINGD_SESS_H */
