/*
 * it_ringctl.c - integration tests of ringctl, the operator's tool, against real
 * daemons: `ringctl status --json` on a ready 3-daemon ring is a valid JSON
 * document that lists the 3 peers and says "ready", and exits 0 (it doubles as
 * a health check); against a socket where no daemon listens it exits 2, and a
 * usage error exits 64, so scripts can tell the three apart.
 */
#include <criterion/criterion.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/harness.h"

#define OUT_CAP (1u << 20)

static struct ring_cluster cluster;

static void teardown(void)
{
	cluster_stop(&cluster);
}

/* Runs ringctl with the given arguments; returns its exit status and its
 * stdout in out. */
static int ringctl(char *out, const char *a1, const char *a2, const char *a3,
		   const char *a4)
{
	char bin[512];
	char *argv[] = { bin, (char *)a1, (char *)a2, (char *)a3, (char *)a4, NULL };

	harness_bin(bin, sizeof(bin), "ringctl");
	cr_assert(access(bin, X_OK) == 0, "%s is not built", bin);
	return harness_exec(argv, NULL, out, OUT_CAP, 30);
}

Test(ringctl, status_json_on_three_daemons, .fini = teardown, .timeout = 120)
{
	char *out = malloc(OUT_CAP);
	int rc = -1;

	cr_assert_not_null(out);
	cr_assert_eq(cluster_start(&cluster, 3, NULL), 0, "could not start 3 daemons");

	/* The ring may still be forming right after the start: exit 1 until
	 * ready.  Forming on loopback takes well under the 30 s allowed. */
	for (int i = 0; i < 300; i++) {
		rc = ringctl(out, "--control", cluster.controls[0], "status", "--json");
		if (rc != 1)
			break;
		usleep(100 * 1000);
	}
	cr_assert_eq(rc, 0, "ringctl status --json exited %d; it printed:\n%s", rc, out);

	for (int d = 0; d < 3; d++) {
		json_error_t err;
		json_t *doc, *peers, *peer;
		bool seen[3] = { false, false, false };
		size_t i;

		cr_assert(cluster.controls[d][0], "ring-local announced no RING_CONTROL_%d", d);
		rc = ringctl(out, "--control", cluster.controls[d], "status", "--json");
		cr_assert_eq(rc, 0, "ringctl status --json on daemon %d exited %d:\n%s", d, rc,
			     out);
		doc = json_loads(out, 0, &err);
		cr_assert_not_null(doc, "daemon %d: not valid JSON (line %d: %s):\n%s", d,
				   err.line, err.text, out);
		cr_assert(json_is_object(doc), "daemon %d: the document is not an object", d);
		cr_assert_str_eq(json_string_value(json_object_get(doc, "state")) ?
				 json_string_value(json_object_get(doc, "state")) : "(none)",
				 "ready", "daemon %d: state is not ready:\n%s", d, out);
		peers = json_object_get(doc, "peers");
		cr_assert(json_is_array(peers), "daemon %d: no peers array:\n%s", d, out);
		cr_assert_eq(json_array_size(peers), 3, "daemon %d: %zu peers, expected 3:\n%s",
			     d, json_array_size(peers), out);
		json_array_foreach(peers, i, peer) {
			json_t *r = json_object_get(peer, "rank");

			cr_assert(json_is_integer(r), "daemon %d: peer %zu has no rank", d, i);
			cr_assert(json_integer_value(r) >= 0 && json_integer_value(r) < 3,
				  "daemon %d: peer rank %lld", d,
				  (long long)json_integer_value(r));
			cr_assert(!seen[json_integer_value(r)], "daemon %d: rank %lld listed "
				  "twice", d, (long long)json_integer_value(r));
			seen[json_integer_value(r)] = true;
		}
		if (json_is_integer(json_object_get(doc, "rank")))
			cr_assert_eq(json_integer_value(json_object_get(doc, "rank")), d,
				     "daemon %d reports rank %lld", d,
				     (long long)json_integer_value(json_object_get(doc, "rank")));
		json_decref(doc);
	}

	/* the text form agrees */
	rc = ringctl(out, "--control", cluster.controls[1], "status", NULL);
	cr_assert_eq(rc, 0, "ringctl status exited %d:\n%s", rc, out);
	cr_assert(strstr(out, "ready") != NULL, "the text status does not say ready:\n%s", out);
	free(out);
}

Test(ringctl, unreachable_daemon_exits_2, .timeout = 60)
{
	char *out = malloc(OUT_CAP);
	char dir[] = "/tmp/it_ringctl.XXXXXX", path[sizeof(dir) + 16];
	int rc;

	cr_assert_not_null(out);
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/none.ctl", dir);
	rc = ringctl(out, "--control", path, "status", NULL);
	cr_expect_eq(rc, 2, "ringctl on a missing socket exited %d, expected 2", rc);
	rc = ringctl(out, "--control", path, "status", "--json");
	cr_expect_eq(rc, 2, "ringctl --json on a missing socket exited %d, expected 2", rc);
	rc = ringctl(out, "--control", path, "no-such-command", NULL);
	cr_expect_eq(rc, 64, "ringctl with an unknown command exited %d, expected 64", rc);
	rmdir(dir);
	free(out);
}
