/*
 * ringctl.c - the operator's command-line tool for ringd.  It sends one command
 * line to the daemon's control socket, reads the JSON document the daemon
 * answers with, and prints it as text or (with --json) as JSON; the exit status
 * says whether the ring is healthy, so ringctl doubles as a health check.  Every
 * command is one entry of the table below: its name on the wire, its text
 * formatter and its verdict; adding a command is adding an entry.  --watch runs
 * the same command again every period until SIGINT or SIGTERM.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "../proto/ring_types.h"
#include "ctlsock.h"
#include "show.h"
#include "../proto/clock.h"

#ifndef RING_VERSION_STRING
#define RING_VERSION_STRING "unknown"
#endif

#define CTL_DEFAULT_TIMEOUT_MS 5000
#define CTL_MAX_TIMEOUT_MS 3600000
#define CTL_LINE_MAX 1024	/* bytes of the request line */
#define CTL_WATCH_DEFAULT 2.0	/* seconds between rounds of --watch */
#define CTL_WATCH_MIN 0.1
#define CTL_WATCH_MAX 86400.0
#define CTL_PING_DEFAULT 5	/* pings per probe */
#define CTL_PING_MAX 1000	/* as ringd allows */
#define CTL_PING_WAIT_MAX 60000	/* ms, as ringd allows */
#define CTL_HOST_MAX 4095       /* ping --host: the highest rank ringd takes */

struct ctl_command {
	const char *name;	/* on the command line and on the wire */
	const char *args;	/* usage of its options ("" when none) */
	const char *help;	/* one line for --help */
	void (*show)(json_t *doc, FILE *out);	/* the text formatter */
	int (*verdict)(json_t *doc);	/* the exit status */
};

static const struct ctl_command ctl_commands[] = {
	{ "status", "", "state, peers and links, jobs, counters", show_status, verdict_status },
	{ "peers", "", "the ring's hosts in ring order, with this daemon's links", show_peers,
	  verdict_status },
	{ "links", "", "each link's achieved rate and RTT; a link well below the others named",
	  show_links, verdict_status },
	{ "jobs", "", "the jobs attached here and their operations in flight", show_jobs,
	  verdict_status },
	{ "ops", "",
	  "per job: each rank's last calls, what the op in flight waits for, "
	  "the last operations",
	  show_ops, verdict_status },
	{ "ping", "[-c N] [--host H]",
	  "round trips to the next and previous host and around "
	  "the ring (N pings each, default 5), or to host H over a direct link",
	  show_ping, verdict_ping },
	{ "metrics", "", "the daemon's metrics, Prometheus text format 0.0.4", show_metrics,
	  verdict_status },
};
#define CTL_NCOMMANDS (sizeof(ctl_commands) / sizeof(ctl_commands[0]))

/* What the command line asked for. */
struct ctl_opts {
	const char *path;	/* control socket */
	int json;		/* print JSON */
	int timeout_ms;		/* bound on one exchange */
	double watch_s;		/* > 0: run every watch_s seconds */
	int count;		/* ping: pings per probe */
	int host;               /* ping --host: the host's rank (-1: the ring's probes) */
};

static void
usage(FILE *out)
{
	fprintf(out,
		"usage: ringctl [--control PATH] [--json] [--timeout MS] [--watch[=SECONDS]]\n"
		"               COMMAND [OPTIONS]\n"
		"\n"
		"Asks the local ringd, through its control socket, about the ring.\n"
		"\n"
		"Commands:\n");
	for (size_t i = 0; i < CTL_NCOMMANDS; i++)
		fprintf(out, "  %-8s %-7s %s\n", ctl_commands[i].name, ctl_commands[i].args,
			ctl_commands[i].help);
	fprintf(out,
		"\n"
		"Options (before or after the command):\n"
		"  -c, --control PATH  ringd's control socket (default: $RING_CONTROL,\n"
		"                      else %s.ctl)\n"
		"  -j, --json          print the daemon's JSON document (indented; one\n"
		"                      compact document a line with --watch)\n"
		"  -t, --timeout MS    bound on each exchange with the daemon (default %d)\n"
		"  -w, --watch[=SECS]  run the command again every SECS seconds (default %g)\n"
		"                      until SIGINT or SIGTERM\n"
		"  -h, --help          this text\n"
		"  -V, --version       ringctl's version\n"
		"ping:\n"
		"  -c, --count N       pings per probe, 1 to %d (after the command, -c is\n"
		"                      the count; write --control for the socket)\n"
		"  --host H            ping host H (its rank) over a direct link instead,\n"
		"                      opened for it when there is none\n"
		"\n"
		"Exit status (with --watch: of the last round):\n"
		"  0   the daemon answered and the ring is ready (ping: every probe answered)\n"
		"  1   the ring is forming, degraded or stopped (ping: a link or the ring\n"
		"      did not answer every ping in time)\n"
		"  2   the daemon is unreachable, did not answer in time, answered\n"
		"      something that is not a valid document, or answered with an error\n"
		"  64  usage error\n",
		RING_DEFAULT_SOCKET, CTL_DEFAULT_TIMEOUT_MS, CTL_WATCH_DEFAULT, CTL_PING_MAX);
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int
usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "ringctl: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nusage: ringctl [--control PATH] [--json] [--timeout MS] "
		"[--watch[=SECONDS]] COMMAND (see ringctl --help)\n");
	return CTL_EXIT_USAGE;
}

static const struct ctl_command *
ctl_find(const char *name)
{
	for (size_t i = 0; i < CTL_NCOMMANDS; i++)
		if (strcmp(ctl_commands[i].name, name) == 0)
			return &ctl_commands[i];
	return NULL;
}

static int
parse_long(const char *s, long min, long max, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
		return -1;
	*out = (int)v;
	return 0;
}

static int
parse_seconds(const char *s, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' || !isfinite(v) || v < CTL_WATCH_MIN ||
	    v > CTL_WATCH_MAX)
		return -1;
	*out = v;
	return 0;
}

/*
 * One pass of getopt over argv.  Global options are read before the command
 * (pass 1, stopping at the command) and after it (pass 2, with the command's
 * own options: for ping, -c is the count).  Returns -1 when parsing went fine,
 * else the exit status.
 */
static int
parse_opts(int argc, char **argv, bool before_cmd, bool ping, struct ctl_opts *o)
{
	/* ping takes -c for its count, so --control is 'C' (never -c's letter);
	 * --count, the last entry, is cut off for the other commands. */
	static const struct option longopts[] = {
		{ "control", required_argument, NULL, 'C' },
		{ "json", no_argument, NULL, 'j' },
		{ "timeout", required_argument, NULL, 't' },
		{ "watch", optional_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ "host", required_argument, NULL, 'H' },
		{ "count", required_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};
	enum { PING_OPTS = sizeof(longopts) / sizeof(longopts[0]) - 3 };
	struct option opts[sizeof(longopts) / sizeof(longopts[0])];
	int c;

	memcpy(opts, longopts, sizeof(opts));
	if (!ping) /* --host and --count are ping's: cut off for the others */
		memset(&opts[PING_OPTS], 0, sizeof(opts[PING_OPTS]));
	opterr = 0;
	optind = 0;	/* glibc: start over, as for a new argv */
	while ((c = getopt_long(argc, argv, before_cmd ? "+:c:jt:w::hV" : ":c:jt:w::hV",
				opts, NULL)) != -1) {
		if (c == 'c')
			c = ping ? 'n' : 'C';
		switch (c) {
		case 'C':
			o->path = optarg;
			break;
		case 'j':
			o->json = 1;
			break;
		case 't':
			if (parse_long(optarg, 1, CTL_MAX_TIMEOUT_MS, &o->timeout_ms) < 0)
				return usage_error("--timeout wants milliseconds, 1 to %d, not '%s'",
						   CTL_MAX_TIMEOUT_MS, optarg);
			break;
		case 'w':
			o->watch_s = CTL_WATCH_DEFAULT;
			if (optarg != NULL && parse_seconds(optarg, &o->watch_s) < 0)
				return usage_error("--watch wants seconds, %g to %g (--watch=2.5), "
						   "not '%s'", CTL_WATCH_MIN, CTL_WATCH_MAX, optarg);
			break;
		case 'n':
			if (parse_long(optarg, 1, CTL_PING_MAX, &o->count) < 0)
				return usage_error("ping: --count wants 1 to %d pings, not '%s'",
						   CTL_PING_MAX, optarg);
			break;
		case 'H':
			if (parse_long(optarg, 0, CTL_HOST_MAX, &o->host) < 0)
				return usage_error("ping: --host wants a host's rank, 0 to %d, not "
						   "'%s'",
						   CTL_HOST_MAX, optarg);
			break;
		case 'h':
			usage(stdout);
			return CTL_EXIT_OK;
		case 'V':
			printf("ringctl %s\n", RING_VERSION_STRING);
			return CTL_EXIT_OK;
		case ':':
			return usage_error("option '%s' needs an argument", argv[optind - 1]);
		default:
			if (optopt != 0)
				return usage_error("unknown option '-%c'", optopt);
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	return -1;
}

/* The request line for a command. */
static void
request_line(const struct ctl_command *cmd, const struct ctl_opts *o, char *line,
	     size_t cap)
{
	if (strcmp(cmd->name, "ping") == 0) {
		/* the daemon's own bound on the pings leaves time for the answer to
		 * travel within ours */
		int margin = o->timeout_ms / 4 < 1000 ? o->timeout_ms / 4 : 1000;
		int wait = o->timeout_ms - margin;

		if (wait < 1)
			wait = 1;
		if (wait > CTL_PING_WAIT_MAX)
			wait = CTL_PING_WAIT_MAX;
		if (o->host >= 0)
			snprintf(line, cap, "ping %d %d %d\n", o->count, wait, o->host);
		else
			snprintf(line, cap, "ping %d %d\n", o->count, wait);
	} else {
		snprintf(line, cap, "%s\n", cmd->name);
	}
}

/* --json: one compact document a line with --watch, else indented. */
static void
print_json(json_t *doc, const struct ctl_opts *o)
{
	json_dumpf(doc, stdout, (o->watch_s > 0 ? JSON_COMPACT : JSON_INDENT(2)) |
		   JSON_PRESERVE_ORDER);
}

/* Runs one command and returns the exit status. */
static int
ctl_run(const struct ctl_command *cmd, const struct ctl_opts *o, const char *line)
{
	char err[512], *answer = NULL;
	size_t len = 0;
	json_error_t jerr;
	json_t *doc, *error;
	int rc;

	if (ctlsock_request(o->path, line, o->timeout_ms, CTLSOCK_MAX_ANSWER, &answer, &len,
			    err, sizeof(err)) < 0) {
		fprintf(stderr, "ringctl: %s\n", err);
		return CTL_EXIT_UNREACHABLE;
	}
	doc = json_loadb(answer, len, JSON_REJECT_DUPLICATES, &jerr);
	free(answer);
	if (doc == NULL) {
		if (len == 0)
			fprintf(stderr, "ringctl: %s closed the connection without an answer\n",
				o->path);
		else
			fprintf(stderr, "ringctl: bad answer from %s: line %d: %s\n", o->path,
				jerr.line, jerr.text);
		return CTL_EXIT_UNREACHABLE;
	}
	if (!json_is_object(doc)) {
		fprintf(stderr, "ringctl: bad answer from %s: not a JSON object\n", o->path);
		json_decref(doc);
		return CTL_EXIT_UNREACHABLE;
	}

	error = json_object_get(doc, "error");
	if (error != NULL) {
		fprintf(stderr, "ringctl: %s: %s\n", cmd->name,
			json_is_string(error) ? json_string_value(error) : "(error without text)");
		rc = CTL_EXIT_UNREACHABLE;
		if (o->json)
			print_json(doc, o);
	} else {
		rc = cmd->verdict(doc);
		if (rc == CTL_EXIT_UNREACHABLE) {
			fprintf(stderr, "ringctl: bad answer from %s: not a %s document\n",
				o->path, cmd->name);
		} else if (o->json) {
			/* metrics: the model; its text form is for the text output */
			if (cmd->show == show_metrics)
				json_object_del(doc, "text");
			print_json(doc, o);
		} else {
			cmd->show(doc, stdout);
		}
	}
	if (o->json && (error != NULL || rc != CTL_EXIT_UNREACHABLE))
		fputc('\n', stdout);
	json_decref(doc);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "ringctl: writing the output: %s\n", strerror(errno));
		if (rc == CTL_EXIT_OK)
			rc = CTL_EXIT_UNREACHABLE;
	}
	return rc;
}

/* ---- --watch ---- */

static volatile sig_atomic_t watch_signal;

static void
watch_signal_cb(int sig)
{
	watch_signal = sig;
}

/*
 * Runs the command every watch_s seconds (from the start of one round to the
 * start of the next) until SIGINT or SIGTERM, and returns the last round's
 * status.  The signals are blocked while a round runs (each round is bounded
 * by --timeout) and let in only while waiting, so a round is never cut in the
 * middle of its output and a signal is never missed.
 */
static int
ctl_watch(const struct ctl_command *cmd, const struct ctl_opts *o, const char *line)
{
	struct sigaction sa;
	sigset_t block, waitmask;
	bool tty = isatty(STDOUT_FILENO) == 1;
	int rc = CTL_EXIT_UNREACHABLE;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = watch_signal_cb;	/* no SA_RESTART: the wait must end */
	sigemptyset(&sa.sa_mask);
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigprocmask(SIG_BLOCK, &block, &waitmask);
	sigdelset(&waitmask, SIGINT);
	sigdelset(&waitmask, SIGTERM);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	while (!watch_signal) {
		double start = proto_now_us() / 1e6, left;

		if (!o->json) {
			char when[64];
			time_t now = time(NULL);
			struct tm tm;

			if (tty)
				fputs("\033[H\033[2J", stdout);	/* home, clear screen */
			strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime_r(&now, &tm));
			printf("every %gs: ringctl %s  %s\n\n", o->watch_s, cmd->name, when);
		}
		rc = ctl_run(cmd, o, line);
		if (!o->json && !tty)
			fputc('\n', stdout);
		if (fflush(stdout) != 0 || ferror(stdout))
			break;	/* nobody reads us any more */
		while (!watch_signal && (left = start + o->watch_s - proto_now_us() / 1e6) > 0) {
			struct timespec ts = { (time_t)left,
					       (long)((left - floor(left)) * 1e9) };

			ppoll(NULL, 0, &ts, &waitmask);
		}
	}
	return rc;
}

int
main(int argc, char **argv)
{
	struct ctl_opts o = { .timeout_ms = CTL_DEFAULT_TIMEOUT_MS,
			      .count = CTL_PING_DEFAULT,
			      .host = -1 };
	char defpath[sizeof(RING_DEFAULT_SOCKET) + 4];
	char line[CTL_LINE_MAX];
	const struct ctl_command *cmd;
	int rc, first;

	if ((rc = parse_opts(argc, argv, true, false, &o)) >= 0)
		return rc;
	if (optind >= argc)
		return usage_error("no command given");
	first = optind;
	cmd = ctl_find(argv[first]);
	if (cmd == NULL)
		return usage_error("unknown command '%s'", argv[first]);
	/* the command's own options and the global ones, after the command */
	if ((rc = parse_opts(argc - first, argv + first, false,
			     strcmp(cmd->name, "ping") == 0, &o)) >= 0)
		return rc;
	if (optind < argc - first)
		return usage_error("'%s' takes no argument '%s'", cmd->name, argv[first + optind]);

	if (o.path == NULL) {
		o.path = getenv("RING_CONTROL");
		if (o.path == NULL || o.path[0] == '\0') {
			snprintf(defpath, sizeof(defpath), "%s.ctl", RING_DEFAULT_SOCKET);
			o.path = defpath;
		}
	}
	request_line(cmd, &o, line, sizeof(line));
	if (o.watch_s > 0)
		return ctl_watch(cmd, &o, line);
	return ctl_run(cmd, &o, line);
}
