/*
 * harness_priv.h - what the harness's own files share and the tests do not
 * see: the build directory, running a program with its stderr captured, small
 * file reads, and the steps of starting a cluster that the loopback and the
 * namespace clusters have in common.  Tests include harness.h only.
 */
#ifndef TESTS_HARNESS_PRIV_H
#define TESTS_HARNESS_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "tests/harness.h"

/* ---- harness_run.c ---- */

/* The build directory the test binary lives in: <root>/<build>/tests/it_x. */
const char *harness_build_dir(void);
/* harness_exec, and with err_too the child's stderr goes into out as well. */
int harness_exec_capture(char *const argv[], const char *const env[], char *out, size_t cap,
			 int timeout_s, bool err_too);
/* Reads a small file whole into buf (NUL-terminated); its length or -1. */
ssize_t harness_read_small(const char *path, char *buf, size_t cap);
/* Splits a copy of args (may be NULL) at blanks into argv[*argc..max). */
void harness_split_args(char *buf, size_t cap, const char *args, char **argv, int *argc,
			int max);

/* ---- harness_cluster.c ---- */

/* Resets c, makes its private directory and starts its watchdog: the first
 * steps of every start, so even a crash during the start is cleaned up. */
int cluster_prepare(struct ring_cluster *c, int n);
/* Runs argv (argv[0] ring-local or netns-cluster), which starts the daemons of
 * this build and prints the RING_* variables that name them; env0 (may be
 * NULL) goes into its environment.  Takes in what it announced and notes each
 * daemon's address and command line.  what names the command in messages. */
int cluster_launch(struct ring_cluster *c, char *const argv[], const char *env0,
		   const char *what);

#endif /* TESTS_HARNESS_PRIV_H */
