/*
 * unit_proto_clock.c - unit tests of proto/clock.c alone: the monotonic clock
 * every bounded wait is measured against, in milliseconds and microseconds,
 * and proto_ms_left, poll's timeout for what is left until a deadline.
 */
#include <criterion/criterion.h>

#include <limits.h>
#include <stdint.h>
#include <time.h>

#include "proto/clock.h"

static void
sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0)
		;
}

/* Both clocks are CLOCK_MONOTONIC: they never go back, they agree with each
 * other, and they measure a sleep as at least as long as it was. */
Test(clock, monotonic_and_agreeing)
{
	int64_t ms0 = proto_now_ms(), us0 = proto_now_us(), ms1, us1, prev = ms0;
	int i;

	cr_assert_gt(ms0, 0);
	cr_assert_geq(us0 / 1000, ms0);
	/* read one after the other: a second apart only on a stalled machine */
	cr_assert_leq(us0 / 1000 - ms0, 1000, "ms %lld, us %lld", (long long)ms0, (long long)us0);
	for (i = 0; i < 100000; i++) {
		int64_t now = proto_now_ms();

		cr_assert_geq(now, prev, "the clock went back");
		prev = now;
	}
	sleep_ms(30);
	ms1 = proto_now_ms();
	us1 = proto_now_us();
	cr_assert_geq(ms1 - ms0, 30, "slept 30 ms, measured %lld", (long long)(ms1 - ms0));
	cr_assert_geq(us1 - us0, 30000);
	cr_assert_lt(ms1 - ms0, 10000, "measured %lld ms", (long long)(ms1 - ms0));
}

Test(clock, ms_left)
{
	int64_t now = proto_now_ms();
	int left;

	cr_assert_eq(proto_ms_left(now - 1), 0, "a deadline past is 0, never negative");
	cr_assert_eq(proto_ms_left(INT64_MIN / 2), 0);
	cr_assert_eq(proto_ms_left(now), 0);
	left = proto_ms_left(now + 5000);
	cr_assert(left > 4000 && left <= 5000, "left %d", left);
	cr_assert_eq(proto_ms_left(now + (int64_t)INT_MAX * 4), INT_MAX, "clamped to INT_MAX");
	cr_assert_eq(proto_ms_left(INT64_MAX / 2), INT_MAX);
	/* It counts down with the clock. */
	left = proto_ms_left(now + 1000);
	sleep_ms(50);
	cr_assert_leq(proto_ms_left(now + 1000), left - 50);
}
