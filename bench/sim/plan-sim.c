/*
 * plan-sim - ringd's real plans (ringd/plan.c, chosen as ringd/coll.c
 * chooses them) walked in the executor's semantics over a model of links,
 * for 2 to 4096 hosts: per collective, size and host count, the plan, the
 * hops on the critical path, the payload bytes on the busiest link and the
 * modelled time.  How, and why the plans are walked rather than run by the
 * executor over tests/sim's fake link floor: bench/sim/plansim.c.
 *
 *   plan-sim [-n HOSTS] [-s SIZES] [-c COLLS] [--hop-us US] [--gbps G]
 *            [--segment BYTES] [--doubling yes|no|auto|both|all] [--no-direct | --first]
 *            [--untimed] [--table]
 *
 * HOSTS: a list of counts and ranges, "2,3,5-9", or "pow2" (2, 4, ..., 4096;
 * the default).  SIZES: bytes with K, M or G (1024s), default "8,64M": the
 * buffer of an all-reduce or broadcast, the result of an all-gather and the
 * input of a reduce-scatter, whose rows show one rank's block of it.
 * COLLS: allreduce, allgather, reduce_scatter, broadcast, barrier, alltoall
 * (default all).  The model's defaults: 45 us a hop (8-byte all-reduce on
 * loopback, issue 24), 10 Gb/s a link, ringd's 1 MiB segment, direct links to
 * hosts that are no neighbours, each row with latency_doubling no and yes.
 * --first: a job's first operation, before its direct links are up: a host
 * whose plan sends to a host that is no neighbour waits for the direct link
 * (its set-up: 3 round trips, 6 hops) and then sends over it, as ringd does
 * (ringd/execwait.c).  --no-direct: every frame to a host that is no
 * neighbour goes round the ring, as it does where that wait runs out (direct
 * links off or refused) and did before the wait.
 * --untimed: hops and bytes only, the frames taken in the order sent.
 * --table prints docs/scale.md's table instead: all-reduce of 8 bytes under
 * both latency paths, all-gather and reduce-scatter of 8 bytes a rank, and
 * all-reduce of the largest size on the ring and as auto picks, per host
 * count.
 * Exit status: 0, 1 a plan did not match itself, 2 usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plansim.h"
#include "proto/proto.h"

static const struct {
	const char *name;
	int coll;			/* 0: no plan */
} colls[] = {
	{ "allreduce", PROTO_COLL_ALLREDUCE },
	{ "allgather", PROTO_COLL_ALLGATHER },
	{ "reduce_scatter", PROTO_COLL_REDUCE_SCATTER },
	{ "broadcast", PROTO_COLL_BROADCAST },
	{ "barrier", PROTO_COLL_BARRIER },
	{ "alltoall", 0 },
};
#define NCOLLS	 (int)(sizeof(colls) / sizeof(colls[0]))
#define LIST_MAX 4096

static int
usage(FILE *f)
{
	fprintf(f, "usage: plan-sim [-n HOSTS] [-s SIZES] [-c COLLS] [--hop-us US] [--gbps G]\n"
		   "                [--segment BYTES] [--doubling yes|no|auto|both|all]\n"
		   "                [--no-direct | --first] [--untimed] [--table]\n");
	return f == stderr ? 2 : 0;
}

static int
parse_size(const char *s, uint64_t *v)
{
	char *end;
	unsigned long long x = strtoull(s, &end, 10);

	if (end == s)
		return -1;
	if (*end == 'K' || *end == 'k')
		x <<= 10, end++;
	else if (*end == 'M' || *end == 'm')
		x <<= 20, end++;
	else if (*end == 'G' || *end == 'g')
		x <<= 30, end++;
	if (*end != '\0' && *end != ',')
		return -1;
	*v = x;
	return (int)(end - s);
}

/* "2,3,5-9" or "pow2" into v[]; how many, or -1. */
static int
parse_hosts(const char *s, int *v)
{
	int k = 0, a, b, used;

	if (strcmp(s, "pow2") == 0) {
		for (a = 2; a <= PSIM_HOSTS_MAX; a *= 2)
			v[k++] = a;
		return k;
	}
	while (*s != '\0') {
		if (sscanf(s, "%d-%d%n", &a, &b, &used) == 2 ||
		    (sscanf(s, "%d%n", &a, &used) == 1 && (b = a, 1))) {
			if (a < 2 || b > PSIM_HOSTS_MAX || a > b)
				return -1;
			for (; a <= b && k < LIST_MAX; a++)
				v[k++] = a;
			s += used;
		} else {
			return -1;
		}
		if (*s == ',')
			s++;
		else if (*s != '\0')
			return -1;
	}
	return k;
}

static int
parse_sizes(const char *s, uint64_t *v)
{
	int k = 0, used;

	while (*s != '\0' && k < 64) {
		if ((used = parse_size(s, &v[k])) < 0 || v[k] > 0xffffffffull)
			return -1;
		k++;
		s += used;
		if (*s == ',')
			s++;
	}
	return k;
}

static void
fmt_size(uint64_t b, char *out, size_t len)
{
	if (b >= (1u << 20) && b % (1u << 20) == 0)
		snprintf(out, len, "%lluM", (unsigned long long)(b >> 20));
	else if (b >= 1024 && b % 1024 == 0)
		snprintf(out, len, "%lluK", (unsigned long long)(b >> 10));
	else
		snprintf(out, len, "%llu", (unsigned long long)b);
}

static int
run_one(int coll, int n, uint64_t size, const struct psim_model *m, struct psim_result *r)
{
	if (psim_run(coll, n, size, m, r) != 0 || r->error[0] != '\0' || r->stuck > 0 ||
	    r->unmatched > 0) {
		fprintf(stderr, "plan-sim: %d hosts, %llu bytes: %s\n", n, (unsigned long long)size,
			r->error[0] ? r->error : "frames no step took");
		return 1;
	}
	return 0;
}

static void
time_cell(double us, char *out, size_t len)
{
	if (us >= 10000.0)
		snprintf(out, len, "%.1f ms", us / 1000.0);
	else
		snprintf(out, len, "%.0f us", us);
}

/* docs/scale.md's table: 8-byte all-reduce, ring path and doubling; 8-byte
 * all-gather and reduce-scatter as auto picks them; the large all-reduce on
 * the ring and as auto picks it. */
static int
table(const int *hosts, int nh, uint64_t big, const struct psim_model *base)
{
	struct psim_model ring = *base, dbl = *base, aut = *base;
	char bs[32], t1[32], t2[32], t3[32], t4[32];
	int i, bad = 0;

	ring.doubling = false;
	dbl.doubling = true;
	aut.doubling = false;
	aut.model = true;
	fmt_size(big, bs, sizeof(bs));
	printf("| hosts | 8 B, ring path: hops | time | 8 B, latency_doubling: plan | hops | "
	       "time | 8 B a rank, all-gather: hops | reduce-scatter: hops | %s, ring: time | "
	       "%s, auto: plan | hops | busiest link / buffer | time |\n",
	       bs, bs);
	printf("|---:|---:|---:|:--|---:|---:|---:|---:|---:|:--|---:|---:|---:|\n");
	for (i = 0; i < nh; i++) {
		struct psim_result a, b, g, s, c, d;

		bad |= run_one(PROTO_COLL_ALLREDUCE, hosts[i], 8, &ring, &a);
		bad |= run_one(PROTO_COLL_ALLREDUCE, hosts[i], 8, &dbl, &b);
		bad |= run_one(PROTO_COLL_ALLGATHER, hosts[i], 8, &aut, &g);
		bad |= run_one(PROTO_COLL_REDUCE_SCATTER, hosts[i], 8, &aut, &s);
		bad |= run_one(PROTO_COLL_ALLREDUCE, hosts[i], big, &ring, &c);
		bad |= run_one(PROTO_COLL_ALLREDUCE, hosts[i], big, &aut, &d);
		time_cell(a.time_us, t1, sizeof(t1));
		time_cell(b.time_us, t2, sizeof(t2));
		time_cell(c.time_us, t3, sizeof(t3));
		time_cell(d.time_us, t4, sizeof(t4));
		printf("| %d | %d | %s | %s | %d | %s | %d | %d | %s | %s | %d | %.4f | %s |\n",
		       hosts[i], a.hops, t1, b.plan, b.hops, t2, g.hops, s.hops, t3, d.plan, d.hops,
		       (double)d.busiest_bytes / (double)d.bytes, t4);
		fflush(stdout);
	}
	return bad;
}

/* What the command line asks for. */
struct args {
	int hosts[LIST_MAX], nh;
	uint64_t sizes[64];
	int ns;
	bool want[NCOLLS], table;
	const char *dbl; /* --doubling: yes, no, auto, both or all */
	struct psim_model m;
};

/* 0, or -1 on a bad option (and, for -h, 1). */
static int
parse_args(int argc, char **argv, struct args *o)
{
	int i, c;

	o->nh = parse_hosts("pow2", o->hosts);
	o->sizes[0] = 8;
	o->sizes[1] = 64u << 20;
	o->ns = 2;
	o->dbl = "both";
	psim_model_defaults(&o->m);
	for (c = 0; c < NCOLLS; c++)
		o->want[c] = true;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		uint64_t x;

		if (strcmp(a, "-n") == 0 && v && (o->nh = parse_hosts(v, o->hosts)) > 0)
			i++;
		else if (strcmp(a, "-s") == 0 && v && (o->ns = parse_sizes(v, o->sizes)) > 0)
			i++;
		else if (strcmp(a, "-c") == 0 && v) {
			for (c = 0; c < NCOLLS; c++)
				o->want[c] = strstr(v, colls[c].name) != NULL;
			i++;
		} else if (strcmp(a, "--hop-us") == 0 && v && (o->m.hop_us = atof(v)) >= 0)
			i++;
		else if (strcmp(a, "--gbps") == 0 && v && atof(v) > 0)
			o->m.byte_ns = 8.0 / atof(argv[++i]);
		else if (strcmp(a, "--segment") == 0 && v && parse_size(v, &x) > 0 && x >= 4096 &&
			 x <= (16u << 20))
			o->m.segment_bytes = (uint32_t)x, i++;
		else if (strcmp(a, "--doubling") == 0 && v &&
			 (!strcmp(v, "yes") || !strcmp(v, "no") || !strcmp(v, "auto") ||
			  !strcmp(v, "both") || !strcmp(v, "all")))
			o->dbl = argv[++i];
		else if (strcmp(a, "--no-direct") == 0)
			o->m.direct = false;
		else if (strcmp(a, "--first") == 0)
			o->m.first = true;
		else if (strcmp(a, "--untimed") == 0)
			o->m.untimed = true;
		else if (strcmp(a, "--table") == 0)
			o->table = true;
		else
			return strcmp(a, "-h") == 0 ? 1 : -1;
	}
	return o->nh > 0 && o->ns > 0 ? 0 : -1;
}

/* One row per collective, size, host count and doubling asked for. */
static int
listing(const struct args *o, int c, int k, int i)
{
	bool many = !strcmp(o->dbl, "both") || !strcmp(o->dbl, "all");
	int d, bad = 0;

	for (d = 0; d < 3; d++) {
		static const char *const dname[] = { "no", "yes", "auto" };
		struct psim_model mm = o->m;
		struct psim_result r;
		const char *dcol = dname[d];
		char sz[32];

		if (many ? (d == 2 && strcmp(o->dbl, "all")) : strcmp(o->dbl, dname[d]))
			continue;
		mm.doubling = d == 1;
		mm.model = d == 2;
		bad |= run_one(colls[c].coll, o->hosts[i], o->sizes[k], &mm, &r);
		fmt_size(r.bytes, sz, sizeof(sz));
		printf("%-15s %9s %6d %-16s %9s %6d %14llu %10llu %12.1f\n", colls[c].name, sz,
		       o->hosts[i], r.plan, dcol, r.hops, (unsigned long long)r.busiest_bytes,
		       (unsigned long long)r.frames, r.time_us);
		fflush(stdout);
	}
	return bad;
}

int
main(int argc, char **argv)
{
	static struct args o;
	int i, k, c, bad = 0, rc;

	psim_init();
	if ((rc = parse_args(argc, argv, &o)) != 0)
		return usage(rc > 0 ? stdout : stderr);
	printf("# plan-sim: %.1f us a hop, %.3f ns a byte (%.1f Gb/s), segment %u B, %s links\n",
	       o.m.hop_us, o.m.byte_ns, 8.0 / o.m.byte_ns, o.m.segment_bytes,
	       o.m.first  ? "first operation: direct, once set up" :
	       o.m.direct ? "direct" :
			    "ring-only");
	if (o.table) {
		uint64_t big = 0;

		for (k = 0; k < o.ns; k++)
			if (o.sizes[k] > big)
				big = o.sizes[k];
		return table(o.hosts, o.nh, big, &o.m);
	}
	printf("%-15s %9s %6s %-16s %9s %6s %14s %10s %12s\n", "collective", "size", "hosts",
	       "plan", "doubling", "hops", "busiest_link_B", "frames", "time_us");
	for (c = 0; c < NCOLLS; c++) {
		if (!o.want[c])
			continue;
		if (colls[c].coll == 0) {
			printf("%-15s  no plan in ringd/plan.c: libring runs it as a barrier, then "
			       "pairwise send/recv (ringd/p2p.c)\n",
			       colls[c].name);
			continue;
		}
		for (k = 0; k < o.ns; k++)
			for (i = 0; i < o.nh; i++)
				bad |= listing(&o, c, k, i);
	}
	return bad;
}
