/*
 * clock.c - the monotonic clock behind every deadline: wall-clock time can jump
 * (NTP, an operator's date), and a bound measured on it could end at once or
 * never.  Deadlines are absolute proto_now_ms() values, so a loop that polls
 * several times keeps one bound for the whole wait instead of restarting it.
 */
#include <limits.h>
#include <time.h>

#include "clock.h"

int64_t
proto_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t
proto_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int
proto_ms_left(int64_t deadline)
{
	int64_t left = deadline - proto_now_ms();

	if (left <= 0)
		return 0;
	return left > INT_MAX ? INT_MAX : (int)left;
}
