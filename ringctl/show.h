/*
 * show.h - ringctl's formatters: each turns one document of ringd's control
 * socket into the operator's text, and each verdict turns it into ringctl's exit
 * status.  A formatter copes with missing or mistyped fields by printing "-":
 * a daemon of another version must still give a readable answer.
 */
#ifndef RINGCTL_SHOW_H
#define RINGCTL_SHOW_H

#include <stdio.h>
#include <jansson.h>

/* ringctl's exit statuses (sysexits' EX_USAGE for a usage error). */
enum ctl_exit {
	CTL_EXIT_OK = 0,	/* answered; for status: the ring is ready */
	CTL_EXIT_UNHEALTHY = 1,	/* the ring is forming, degraded or stopped */
	CTL_EXIT_UNREACHABLE = 2,	/* no daemon, no answer in time, a bad answer or an error */
	CTL_EXIT_USAGE = 64,
};

/* `status`: header, peers joined with their links, jobs, counters. */
void show_status(json_t *doc, FILE *out);
/* CTL_EXIT_OK when "state" is "ready", CTL_EXIT_UNHEALTHY for another state,
 * CTL_EXIT_UNREACHABLE when the document has no state (not a status).  Every
 * document but ping's carries the state, so every command uses this verdict. */
int verdict_status(json_t *doc);

/* The pieces of `status`, for the commands that show one part alone. */
void show_peers(json_t *doc, FILE *out);
void show_jobs(json_t *doc, FILE *out);
void show_ops(json_t *doc, FILE *out);
/* `links`: every link's achieved rate and RTT the daemon knows, and the slow
 * ones named. */
void show_links(json_t *doc, FILE *out);

/* `ping`: one row per probe (next link, previous link, ring) with its round
 * trips in microseconds and what became of its pings. */
void show_ping(json_t *doc, FILE *out);
/* CTL_EXIT_OK when the ring is ready and every probe answered every ping,
 * CTL_EXIT_UNHEALTHY when not, CTL_EXIT_UNREACHABLE when it is no ping document. */
int verdict_ping(json_t *doc);

/* `metrics`: the exposition text the daemon rendered, as it is (control
 * characters but newlines replaced). */
void show_metrics(json_t *doc, FILE *out);

#endif /* RINGCTL_SHOW_H */
