/*
 * log.c - the one logging module of ringd and ringctl.  Each line is formatted
 * into a local buffer and written to stderr with a single write(2), so lines from
 * different threads never interleave and no lock is needed.  Under systemd
 * (JOURNAL_STREAM set, or when told) a line is "<N>message" and the journal adds
 * the time and the program; otherwise it carries its own timestamp, program, pid
 * and level word.  Control characters are replaced before writing, since messages
 * quote text from peers and clients that must not forge log lines.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

#define LOG_LINE_MAX	4096	/* longer messages are cut, marked with "..." */
#define LOG_TRUNC	"..."

static struct {
	char progname[64];	/* in the plain format's "prog[pid]:" */
	bool syslog_prefix;	/* "<N>message" instead of the plain format */
	atomic_int level;	/* lines above this level are dropped */
} log_state;

static pthread_once_t log_once = PTHREAD_ONCE_INIT;

static int
log_clamp(int level)
{
	if (level < LOG_LVL_ERR)
		return LOG_LVL_ERR;
	if (level > LOG_LVL_DEBUG)
		return LOG_LVL_DEBUG;
	return level;
}

/* Defaults for a program that logs before (or without) calling log_init. */
static void
log_defaults(void)
{
	const char *env = getenv("JOURNAL_STREAM");

	snprintf(log_state.progname, sizeof(log_state.progname), "%s",
	    program_invocation_short_name);
	log_state.syslog_prefix = env != NULL && env[0] != '\0';
	atomic_store(&log_state.level, LOG_LVL_INFO);
}

/* Called once at start-up, before threads that log are started. */
void
log_init(const char *progname, int level, int syslog_prefix)
{
	const char *env = getenv("JOURNAL_STREAM");

	pthread_once(&log_once, log_defaults);
	if (progname != NULL) {
		const char *slash = strrchr(progname, '/');

		snprintf(log_state.progname, sizeof(log_state.progname), "%s",
		    slash != NULL ? slash + 1 : progname);
	}
	log_state.syslog_prefix = syslog_prefix || (env != NULL && env[0] != '\0');
	atomic_store(&log_state.level, log_clamp(level));
}

void
log_set_level(int level)
{
	pthread_once(&log_once, log_defaults);
	atomic_store(&log_state.level, log_clamp(level));
}

int
log_get_level(void)
{
	pthread_once(&log_once, log_defaults);
	return atomic_load(&log_state.level);
}

static const char *
log_word(int level, bool is_fatal)
{
	if (is_fatal)
		return "FATAL";
	switch (level) {
	case LOG_LVL_ERR:
		return "ERROR";
	case LOG_LVL_WARN:
		return "WARN";
	case LOG_LVL_INFO:
		return "INFO";
	default:
		return "DEBUG";
	}
}

/* Writes all of buf, retrying after signals and short writes. */
static void
log_write_all(const char *buf, size_t len)
{
	ssize_t n;

	while (len > 0) {
		n = write(STDERR_FILENO, buf, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return;		/* nowhere left to report it */
		}
		buf += n;
		len -= (size_t)n;
	}
}

static void log_vline(int, bool, const char *, va_list)
    __attribute__((format(printf, 3, 0)));

static void
log_vline(int level, bool is_fatal, const char *fmt, va_list ap)
{
	char line[LOG_LINE_MAX];
	int saved_errno = errno;
	size_t n = 0, room, i;
	struct timespec ts;
	struct tm tm;
	int m;

	pthread_once(&log_once, log_defaults);
	if (!is_fatal && level > atomic_load(&log_state.level))
		return;

	if (log_state.syslog_prefix) {
		n = (size_t)snprintf(line, sizeof(line), "<%d>", level);
	} else {
		clock_gettime(CLOCK_REALTIME, &ts);
		localtime_r(&ts.tv_sec, &tm);
		n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
		n += (size_t)snprintf(line + n, sizeof(line) - n, ".%03ld %s[%ld]: %s ",
		    ts.tv_nsec / 1000000, log_state.progname, (long)getpid(),
		    log_word(level, is_fatal));
	}
	if (n >= sizeof(line))
		n = 0;

	/* Room for the message, leaving one byte for the newline. */
	room = sizeof(line) - n - 1;
	errno = saved_errno;	/* for %m */
	m = vsnprintf(line + n, room + 1, fmt, ap);
	if (m < 0)
		m = 0;
	if ((size_t)m > room) {
		/* Cut: vsnprintf kept room bytes; end them with the marker. */
		m = (int)room;
		memcpy(line + n + (size_t)m - strlen(LOG_TRUNC), LOG_TRUNC,
		    strlen(LOG_TRUNC));
	}
	for (i = n; i < n + (size_t)m; i++) {
		unsigned char c = (unsigned char)line[i];

		if ((c < 0x20 && c != '\t') || c == 0x7f)
			line[i] = '?';
	}
	n += (size_t)m;
	line[n++] = '\n';
	log_write_all(line, n);
	errno = saved_errno;
}

void
log_err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vline(LOG_LVL_ERR, false, fmt, ap);
	va_end(ap);
}

void
log_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vline(LOG_LVL_WARN, false, fmt, ap);
	va_end(ap);
}

void
log_info(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vline(LOG_LVL_INFO, false, fmt, ap);
	va_end(ap);
}

void
log_debug(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vline(LOG_LVL_DEBUG, false, fmt, ap);
	va_end(ap);
}

void
fatal(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vline(LOG_LVL_ERR, true, fmt, ap);
	va_end(ap);
	exit(1);
}

void
fatal_config(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vline(LOG_LVL_ERR, true, fmt, ap);
	va_end(ap);
	exit(LOG_EXIT_CONFIG);
}
