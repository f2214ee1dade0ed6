/*
 * unit_proto_log.c - unit tests of proto/log.c alone: the syslog-prefixed and
 * the plain line formats, JOURNAL_STREAM, the levels, the cut of long lines,
 * control characters that cannot forge a line, and fatal's exit status.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "proto/log.h"

/* Runs fn with stderr captured; returns what it wrote (static buffer). */
static const char *
capture_stderr(void (*fn)(void))
{
	static char out[16384];
	int fds[2], saved;
	ssize_t n;
	size_t got = 0;

	cr_assert_eq(pipe(fds), 0);
	saved = dup(STDERR_FILENO);
	dup2(fds[1], STDERR_FILENO);
	close(fds[1]);
	fn();
	dup2(saved, STDERR_FILENO);
	close(saved);
	while (got < sizeof(out) - 1 && (n = read(fds[0], out + got, sizeof(out) - 1 - got)) > 0)
		got += (size_t)n;
	close(fds[0]);
	out[got] = '\0';
	return out;
}

static void
log_some_prefixed(void)
{
	log_init("ringd", LOG_LVL_INFO, 1);
	log_err("e %d", 1);
	log_warn("w %s", "two");
	log_info("i");
	log_debug("hidden");
	log_set_level(LOG_LVL_DEBUG);
	log_debug("shown");
	log_set_level(LOG_LVL_ERR);
	log_warn("hidden too");
	log_info("peer said \"a\nb\x1b[31m\"");
}

Test(log, syslog_prefix)
{
	const char *out = capture_stderr(log_some_prefixed);

	cr_assert_str_eq(out, "<3>e 1\n<4>w two\n<6>i\n<7>shown\n");
}

static void
log_some_plain(void)
{
	unsetenv("JOURNAL_STREAM");
	log_init("/usr/sbin/ringd", LOG_LVL_DEBUG, 0);
	log_warn("link to %s down: %s", "b:1", "reset\r\nfake line");
	cr_assert_eq(log_get_level(), LOG_LVL_DEBUG);
}

Test(log, plain_format)
{
	const char *out = capture_stderr(log_some_plain);
	char want[64];
	int y, mo, d, h, mi, s, ms;

	cr_assert_eq(sscanf(out, "%4d-%2d-%2dT%2d:%2d:%2d.%3d ", &y, &mo, &d, &h, &mi, &s, &ms), 7,
		     "%s", out);
	cr_assert_eq(out[23], ' ');
	snprintf(want, sizeof(want), " ringd[%ld]: WARN link to b:1 down: ", (long)getpid());
	cr_assert(strstr(out, want) != NULL, "%s", out);
	/* Control characters from the message cannot forge a second line. */
	cr_assert(strstr(out, "reset??fake line\n") != NULL, "%s", out);
	cr_assert_eq(strchr(out, '\n'), out + strlen(out) - 1);
}

static void
log_journal(void)
{
	setenv("JOURNAL_STREAM", "8:1234", 1);
	log_init("ringd", LOG_LVL_INFO, 0);
	log_info("under systemd");
}

Test(log, journal_stream_env)
{
	cr_assert_str_eq(capture_stderr(log_journal), "<6>under systemd\n");
}

static void
log_long(void)
{
	static char big[10000];

	memset(big, 'x', sizeof(big) - 1);
	log_init("ringd", LOG_LVL_INFO, 1);
	log_info("%s", big);
	log_info("after");
}

Test(log, long_lines_are_cut)
{
	const char *out = capture_stderr(log_long);
	const char *nl = strchr(out, '\n');

	cr_assert_not_null(nl);
	cr_assert_leq((size_t)(nl - out), 4096);
	cr_assert_eq(memcmp(nl - 3, "...", 3), 0);
	cr_assert_str_eq(nl + 1, "<6>after\n");
}

Test(log, levels_clamp)
{
	log_init("ringd", 99, 1);
	cr_assert_eq(log_get_level(), LOG_LVL_DEBUG);
	log_set_level(-4);
	cr_assert_eq(log_get_level(), LOG_LVL_ERR);
}

Test(log, fatal_exits_1, .exit_code = 1)
{
	int devnull = open("/dev/null", O_WRONLY);

	dup2(devnull, STDERR_FILENO);
	log_init("ringd", LOG_LVL_ERR, 1);
	fatal("cannot %s", "start");
}
