/*
 * clock.h - the monotonic clock and the deadlines every bounded wait in
 * libring and ringctl is measured against (and ringd's, where it wants them).
 */
#ifndef PROTO_CLOCK_H
#define PROTO_CLOCK_H

#include <stdint.h>

int64_t proto_now_ms(void);	/* CLOCK_MONOTONIC, milliseconds */
int64_t proto_now_us(void);	/* CLOCK_MONOTONIC, microseconds */
/* poll's timeout for what is left until deadline (proto_now_ms's clock): 0 once
 * it has passed, never above INT_MAX. */
int proto_ms_left(int64_t deadline);

#endif /* PROTO_CLOCK_H */
