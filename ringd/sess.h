/*
 * sess.h - client sessions: one per process attached through libring.
 */
#ifndef RINGD_SESS_H
#define RINGD_SESS_H

#include "ringd.h"

struct op;

void sess_op_done(struct sess *s, struct op *op, int status, const char *text);
uint32_t sess_timeout_ms(const struct sess *s);
int sess_rank(const struct sess *s);
int sess_pid(const struct sess *s);

#endif /* RINGD_SESS_H */
