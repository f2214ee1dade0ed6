/*
 * bench_cost.c - ring-bench -v: what an operation costs besides its time, the
 * hand-offs and the processor.  Around a timed loop it samples, for this rank,
 * its context switches (getrusage: voluntary ones are sleeps and wake-ups,
 * involuntary ones preemptions) and its processor time (CLOCK_PROCESS_CPUTIME_ID),
 * and for the daemons of scripts/ring-local (RING_LOCAL_DIR/pids) the same from
 * /proc, summed over their threads: each /proc/PID/task/TID/status's
 * voluntary and nonvoluntary switches and schedstat's time on a processor
 * (nanoseconds, where /proc/PID/stat would give 10 ms ticks).  A daemon not of
 * ring-local (no RING_LOCAL_DIR) counts as zero: the client's side is still
 * measured.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>

#include "bench.h"

#define MAX_DAEMONS 64

/* One thread's counters from /proc. */
static void
task_add(const char *dir, struct bench_cost *c)
{
	char path[512], line[256];
	unsigned long long run = 0, v;
	FILE *f;

	snprintf(path, sizeof(path), "%s/status", dir);
	if ((f = fopen(path, "r")) != NULL) {
		while (fgets(line, sizeof(line), f)) {
			if (sscanf(line, "voluntary_ctxt_switches: %llu", &v) == 1)
				c->d_vcs += (double)v;
			else if (sscanf(line, "nonvoluntary_ctxt_switches: %llu", &v) == 1)
				c->d_ivcs += (double)v;
		}
		fclose(f);
	}
	snprintf(path, sizeof(path), "%s/schedstat", dir);
	if ((f = fopen(path, "r")) != NULL) {
		if (fscanf(f, "%llu", &run) == 1)
			c->d_cpu_us += (double)run / 1e3;
		fclose(f);
	}
}

/* Every thread of every daemon listed in RING_LOCAL_DIR/pids. */
static void
daemons_add(struct bench_cost *c)
{
	const char *dir = getenv("RING_LOCAL_DIR");
	char path[512];
	FILE *f;
	int pid, n = 0;

	if (dir == NULL)
		return;
	snprintf(path, sizeof(path), "%s/pids", dir);
	if ((f = fopen(path, "r")) == NULL)
		return;
	while (n < MAX_DAEMONS && fscanf(f, "%d", &pid) == 1) {
		char tdir[64], sub[320];
		struct dirent *e;
		DIR *d;

		snprintf(tdir, sizeof(tdir), "/proc/%d/task", pid);
		if ((d = opendir(tdir)) == NULL)
			continue;
		while ((e = readdir(d)) != NULL) {
			if (e->d_name[0] == '.')
				continue;
			snprintf(sub, sizeof(sub), "%s/%s", tdir, e->d_name);
			task_add(sub, c);
		}
		closedir(d);
		n++;
	}
	fclose(f);
	c->ndaemons = n;
}

void
bench_cost_sample(struct bench_cost *c, bool daemons)
{
	struct rusage ru;
	struct timespec ts;

	memset(c, 0, sizeof(*c));
	if (getrusage(RUSAGE_SELF, &ru) == 0) {
		c->vcs = (double)ru.ru_nvcsw;
		c->ivcs = (double)ru.ru_nivcsw;
	}
	if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0)
		c->cpu_us = (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
	if (daemons)
		daemons_add(c);
}

void
bench_cost_since(struct bench_cost *c, const struct bench_cost *before, int iters)
{
	struct bench_cost now;
	double k = iters > 0 ? 1.0 / iters : 0;

	bench_cost_sample(&now, before->ndaemons > 0);
	c->vcs = (now.vcs - before->vcs) * k;
	c->ivcs = (now.ivcs - before->ivcs) * k;
	c->cpu_us = (now.cpu_us - before->cpu_us) * k;
	c->d_vcs = (now.d_vcs - before->d_vcs) * k;
	c->d_ivcs = (now.d_ivcs - before->d_ivcs) * k;
	c->d_cpu_us = (now.d_cpu_us - before->d_cpu_us) * k;
	c->ndaemons = now.ndaemons;
}
