/*
 * harness_netns.c - clusters whose hosts live in network namespaces behind a
 * bridge (scripts/netns-cluster), for the tests that cut, partition and slow
 * links.  The cluster's directory then holds netns.env, and stopping it, by
 * the test or by the watchdog (harness_cluster.c), removes the namespaces
 * too.  Where namespaces cannot be made (not root, no ip command) the start
 * says why and the test skips.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/harness_priv.h"

/* The namespace names netns-cluster wrote into DIR/netns.env. */
static int read_netns_env(struct ring_cluster *c)
{
	char path[PATH_MAX], buf[16384], *line, *save;
	int i, found = 0;

	snprintf(path, sizeof(path), "%s/netns.env", c->dir);
	if (harness_read_small(path, buf, sizeof(buf)) < 0)
		return -1;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char val[64];

		if (sscanf(line, "NETNS_NS_%d=%63s", &i, val) == 2 && i >= 0 && i < c->n) {
			snprintf(c->ns[i], sizeof(c->ns[i]), "%s", val);
			found++;
		}
	}
	return found == c->n ? 0 : -1;
}

/* netns-cluster up: the namespaces, the bridge and the links.  0, -1, or
 * CLUSTER_NOTSUP with c->why. */
static int netns_up(struct ring_cluster *c, const char *script, const char *netns_args)
{
	char nstr[16], abuf[512], *argv[80], *out, *why;
	int argc = 0, rc;

	out = malloc(65536);
	if (!out)
		return -1;
	snprintf(nstr, sizeof(nstr), "%d", c->n);
	argv[argc++] = (char *)(uintptr_t)script;
	argv[argc++] = "--dir";
	argv[argc++] = c->dir;
	argv[argc++] = "up";
	argv[argc++] = nstr;
	harness_split_args(abuf, sizeof(abuf), netns_args, argv, &argc, 70);
	argv[argc] = NULL;
	rc = harness_exec_capture(argv, NULL, out, 65536, 60, true);
	if (rc == CLUSTER_NOTSUP) {
		size_t l;

		/* the script's one line of why, without its name */
		why = strstr(out, "netns-cluster: ");
		snprintf(c->why, sizeof(c->why), "%s", why ? why + 15 : out);
		l = strlen(c->why);
		while (l && c->why[l - 1] == '\n')
			c->why[--l] = 0;
	} else if (rc != 0) {
		fprintf(stderr, "harness: netns-cluster up %d %s exited %d:\n%s\n", c->n,
			netns_args ? netns_args : "", rc, out);
		rc = -1;
	} else if (read_netns_env(c)) {
		fprintf(stderr, "harness: %s/netns.env does not name %d namespaces\n", c->dir,
			c->n);
		rc = -1;
	}
	free(out);
	return rc;
}

int cluster_start_netns(struct ring_cluster *c, int n, const char *netns_args,
			const char *extra_ringd_args)
{
	char script[PATH_MAX + 32], rbuf[512], what[600], *argv[80];
	int argc = 0, rc;

	if (cluster_prepare(c, n))
		return -1;
	c->netns = true;
	snprintf(script, sizeof(script), "%s/scripts/netns-cluster", c->root);
	if ((rc = netns_up(c, script, netns_args)))
		return rc;
	argv[argc++] = script;
	argv[argc++] = "--dir";
	argv[argc++] = c->dir;
	argv[argc++] = "ring";
	argv[argc++] = "--";
	harness_split_args(rbuf, sizeof(rbuf), extra_ringd_args, argv, &argc, 78);
	argv[argc] = NULL;
	snprintf(what, sizeof(what), "netns-cluster ring %s",
		 extra_ringd_args ? extra_ringd_args : "");
	return cluster_launch(c, argv, NULL, what);
}

int
cluster_netns_args(struct ring_cluster *c, ...)
{
	char script[PATH_MAX + 32];
	char *argv[16] = { script, "--dir", c->dir };
	const char *a;
	va_list ap;
	int n = 3, rc;

	if (!c->started || !c->netns)
		return -1;
	snprintf(script, sizeof(script), "%s/scripts/netns-cluster", c->root);
	va_start(ap, c);
	while ((a = va_arg(ap, const char *)) != NULL && n < 15)
		argv[n++] = (char *)(uintptr_t)a;
	va_end(ap);
	argv[n] = NULL;
	rc = harness_exec(argv, NULL, NULL, 0, 30);
	if (rc)
		fprintf(stderr, "harness: netns-cluster %s ... exited %d\n", argv[3], rc);
	return rc;
}

int cluster_netns(struct ring_cluster *c, const char *verb, int host)
{
	char script[PATH_MAX + 32], h[16];
	char *argv[] = { script, "--dir", c->dir, (char *)(uintptr_t)verb, h, NULL };
	int rc;

	if (!c->started || !c->netns)
		return -1;
	snprintf(script, sizeof(script), "%s/scripts/netns-cluster", c->root);
	snprintf(h, sizeof(h), "%d", host);
	rc = harness_exec(argv, NULL, NULL, 0, 30);
	if (rc)
		fprintf(stderr, "harness: netns-cluster %s %d exited %d\n", verb, host, rc);
	return rc;
}
