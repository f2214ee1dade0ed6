/*
 * ringctl.c - the operator's command-line tool for ringd.  It sends one command
 * line to the daemon's control socket, reads the JSON document the daemon
 * answers with, and prints it as text or (with --json) as JSON; the exit status
 * says whether the ring is healthy, so ringctl doubles as a health check.  Every
 * command is one entry of the table below: its name on the wire, its text
 * formatter and its verdict; adding a command is adding an entry.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "../libring/ring.h"
#include "ctlsock.h"
#include "show.h"

#ifndef RING_VERSION_STRING
#define RING_VERSION_STRING "unknown"
#endif

#define CTL_DEFAULT_TIMEOUT_MS 5000
#define CTL_MAX_TIMEOUT_MS 3600000
#define CTL_ARG_MAX 128		/* bytes of one command argument */
#define CTL_LINE_MAX 1024	/* bytes of the request line */

struct ctl_command {
	const char *name;	/* on the command line and on the wire */
	const char *args;	/* usage of its arguments ("" when none) */
	int max_args;		/* arguments it takes at most */
	const char *help;	/* one line for --help */
	void (*show)(json_t *doc, FILE *out);	/* the text formatter */
	int (*verdict)(json_t *doc);	/* the exit status; NULL: CTL_EXIT_OK */
};

static const struct ctl_command ctl_commands[] = {
	{ "status", "", 0, "state, peers and links, jobs, counters (exit 0: ring ready)",
	  show_status, verdict_status },
	{ "peers", "", 0, "the ring's hosts in ring order, with this daemon's links",
	  show_peers, NULL },
	{ "jobs", "", 0, "the jobs attached here and their operations in flight",
	  show_jobs, NULL },
	{ "ops", "", 0, "per job: each rank's last calls, what the op in flight waits for, "
	  "the last operations", show_ops, NULL },
};
#define CTL_NCOMMANDS (sizeof(ctl_commands) / sizeof(ctl_commands[0]))

static void usage(FILE *out)
{
	fprintf(out,
		"usage: ringctl [--control PATH] [--json] [--timeout MS] COMMAND [ARGS]\n"
		"\n"
		"Asks the local ringd, through its control socket, about the ring.\n"
		"\n"
		"Commands:\n");
	for (size_t i = 0; i < CTL_NCOMMANDS; i++)
		fprintf(out, "  %-8s %-10s %s\n", ctl_commands[i].name, ctl_commands[i].args,
			ctl_commands[i].help);
	fprintf(out,
		"\n"
		"Options:\n"
		"  -c, --control PATH  ringd's control socket (default: $RING_CONTROL,\n"
		"                      else %s.ctl)\n"
		"  -j, --json          print the daemon's JSON document (indented)\n"
		"  -t, --timeout MS    bound on the whole exchange (default %d)\n"
		"  -h, --help          this text\n"
		"  -V, --version       ringctl's version\n"
		"\n"
		"Exit status:\n"
		"  0   the daemon answered; for status: the ring is ready (healthy)\n"
		"  1   the ring is forming, degraded or stopped\n"
		"  2   the daemon is unreachable, did not answer in time, answered\n"
		"      something that is not a valid document, or answered with an error\n"
		"  64  usage error\n",
		RING_DEFAULT_SOCKET, CTL_DEFAULT_TIMEOUT_MS);
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "ringctl: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nusage: ringctl [--control PATH] [--json] [--timeout MS] COMMAND"
		" (see ringctl --help)\n");
	return CTL_EXIT_USAGE;
}

static const struct ctl_command *ctl_find(const char *name)
{
	for (size_t i = 0; i < CTL_NCOMMANDS; i++)
		if (strcmp(ctl_commands[i].name, name) == 0)
			return &ctl_commands[i];
	return NULL;
}

/* An argument goes on the request line: printable, no blanks, bounded. */
static int arg_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > CTL_ARG_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= 0x20 || s[i] == 0x7f)
			return 0;
	return 1;
}

static int parse_timeout(const char *s, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < 1 || v > CTL_MAX_TIMEOUT_MS)
		return -1;
	*out = (int)v;
	return 0;
}

/* Runs one command and returns the exit status. */
static int ctl_run(const struct ctl_command *cmd, const char *path, const char *line,
		   int timeout_ms, int json)
{
	char err[512], *answer = NULL;
	size_t len = 0;
	json_error_t jerr;
	json_t *doc, *error;
	int rc;

	if (ctlsock_request(path, line, timeout_ms, CTLSOCK_MAX_ANSWER, &answer, &len,
			    err, sizeof(err)) < 0) {
		fprintf(stderr, "ringctl: %s\n", err);
		return CTL_EXIT_UNREACHABLE;
	}
	doc = json_loadb(answer, len, JSON_REJECT_DUPLICATES, &jerr);
	free(answer);
	if (doc == NULL) {
		if (len == 0)
			fprintf(stderr, "ringctl: %s closed the connection without an answer\n",
				path);
		else
			fprintf(stderr, "ringctl: bad answer from %s: line %d: %s\n", path,
				jerr.line, jerr.text);
		return CTL_EXIT_UNREACHABLE;
	}
	if (!json_is_object(doc)) {
		fprintf(stderr, "ringctl: bad answer from %s: not a JSON object\n", path);
		json_decref(doc);
		return CTL_EXIT_UNREACHABLE;
	}

	if (json) {
		json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		fputc('\n', stdout);
	}
	error = json_object_get(doc, "error");
	if (error != NULL) {
		fprintf(stderr, "ringctl: %s: %s\n", cmd->name,
			json_is_string(error) ? json_string_value(error) : "(error without text)");
		rc = CTL_EXIT_UNREACHABLE;
	} else {
		rc = cmd->verdict != NULL ? cmd->verdict(doc) : CTL_EXIT_OK;
		if (rc == CTL_EXIT_UNREACHABLE)
			fprintf(stderr, "ringctl: bad answer from %s: not a %s document\n",
				path, cmd->name);
		else if (!json)
			cmd->show(doc, stdout);
	}
	json_decref(doc);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "ringctl: writing the output: %s\n", strerror(errno));
		if (rc == CTL_EXIT_OK)
			rc = CTL_EXIT_UNREACHABLE;
	}
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "control", required_argument, NULL, 'c' },
		{ "json", no_argument, NULL, 'j' },
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = NULL;
	char defpath[sizeof(RING_DEFAULT_SOCKET) + 4];
	char line[CTL_LINE_MAX];
	const struct ctl_command *cmd;
	int json = 0, timeout_ms = CTL_DEFAULT_TIMEOUT_MS, c;
	size_t off;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":c:jt:hV", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			path = optarg;
			break;
		case 'j':
			json = 1;
			break;
		case 't':
			if (parse_timeout(optarg, &timeout_ms) < 0)
				return usage_error("--timeout wants milliseconds, 1 to 3600000, "
						   "not '%s'", optarg);
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
	if (optind >= argc)
		return usage_error("no command given");
	cmd = ctl_find(argv[optind]);
	if (cmd == NULL)
		return usage_error("unknown command '%s'", argv[optind]);
	if (argc - optind - 1 > cmd->max_args)
		return usage_error("too many arguments for '%s'", cmd->name);

	off = (size_t)snprintf(line, sizeof(line), "%s", cmd->name);
	for (int i = optind + 1; i < argc; i++) {
		if (!arg_ok(argv[i]))
			return usage_error("bad argument '%s'", argv[i]);
		off += (size_t)snprintf(line + off, sizeof(line) - off, " %s", argv[i]);
		if (off + 2 > sizeof(line))
			return usage_error("arguments too long for '%s'", cmd->name);
	}
	snprintf(line + off, sizeof(line) - off, "\n");

	if (path == NULL) {
		path = getenv("RING_CONTROL");
		if (path == NULL || path[0] == '\0') {
			snprintf(defpath, sizeof(defpath), "%s.ctl", RING_DEFAULT_SOCKET);
			path = defpath;
		}
	}
	return ctl_run(cmd, path, line, timeout_ms, json);
}
