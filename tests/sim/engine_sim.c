/*
 * engine_sim.c - the engine's deterministic simulation test.
 *
 *   engine-sim [--seeds N] [--from S] [--seed S] [--hosts-max H] [--streams] [-v]
 *
 * Each seed makes a ring of 2..H daemons' engines (ringd's engine and ring
 * floors, linked as they are) over the fake link floor, a few jobs of one
 * or two processes per host on some of the hosts, a script of collectives,
 * point-to-point messages, aborts and stalled ranks for each, and (on most
 * seeds) links cut and reconnected.  Then, one step at a time, the seed
 * decides what happens next: which link writes how many bytes, which end
 * reads them, which due timer fires, which process acts, when a link breaks,
 * when the clock moves.  On every third seed (on all with --streams) the
 * links are of several streams: a DATA frame may overtake any other frame,
 * or be overtaken, as it may over a link's several connections.  Every
 * result is checked against the ranks' data,
 * and so is every invariant: a failure only where the schedule gave a
 * reason, one reply per request and none after a process left, no frame of
 * an old formation taken for the current one, credit never overdrawn, no
 * frame the engine refuses, and at the end every job ran its script, every
 * operation ended, the engine holds no memory of any process and every job
 * dissolved.  A failing seed prints how to replay it, which replays exactly.
 * The seeds that once failed are in tests/sim/seeds and run every time.
 * Exit status: 0 every schedule passed, 1 one failed, 2 usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workload.h"
#include "../../proto/log.h"

#define MAX_STEPS 400000		/* a schedule that does not end by then hangs */
#define CUTS_MAX 3
#define EVENTS_MAX (4 * CUTS_MAX)

/* A link end that closes, or comes up, at a time. */
struct event_at {
	uint64_t at;
	struct sim_link *end;
	bool up;
	bool done;
};

struct schedule {
	uint64_t seed;
	int nhosts;
	bool faults;
	bool verbose;
	struct sim_rng rng, rng2;
	struct sim_net net;
	struct sim_world w;
	struct sim_report rep;
	struct event_at ev[EVENTS_MAX];
	int nev;
	int cuts;
	uint64_t steps, frames_cut;
};

enum act { A_XMIT, A_RECV, A_TIMER, A_PROC, A_EVENT, A_TURN };
struct cand {
	enum act a;
	int i;
	struct sim_link *end;
};
#define CANDS_MAX (5 * SIM_HOSTS_MAX + SIM_PROCS_MAX + EVENTS_MAX + 1)

static struct sim_link *
end_at(struct schedule *s, int i)
{
	return i % 2 == 0 ? &s->net.h[i / 2].next : &s->net.h[i / 2].prev;
}

/* Credit is never overdrawn: no job sent more than its next host granted. */
static void
check_credit(struct schedule *s)
{
	int h;

	for (h = 0; h < s->nhosts; h++) {
		const struct job *j;

		JOBS_FOREACH(j, &s->net.h[h].rd) {
			struct flow_counts fc;

			flow_counts(j, &fc);
			if (fc.overdrawn > 0)
				sim_fail(&s->rep,
					 "host %d job %08x sent %llu bytes on a credit of %llu", h,
					 job_id(j), (unsigned long long)fc.tx_used,
					 (unsigned long long)fc.tx_limit);
		}
	}
	if (s->net.engine_errors > 0)
		sim_fail(&s->rep, "an engine refused a frame of another: %s",
			 s->net.last_engine_error);
	if (s->net.stale_unseen > 0)
		sim_fail(&s->rep, "a frame of an old formation was taken for the current one");
}

/* Breaks a connection whose ends are both up; each end finds out a little
 * later, and they connect again later still. */
static void
cut_one(struct schedule *s)
{
	int h = (int)sim_below(&s->rng, (uint32_t)s->nhosts);
	struct sim_link *a = &s->net.h[h].next, *b = a->peer;
	uint64_t now = sim_now_ms(), up = now + 100 + sim_below(&s->rng, 400);

	if (a->l.state != LINK_UP || b->l.state != LINK_UP || a->cut || s->nev + 4 > EVENTS_MAX)
		return;
	if (s->verbose)
		fprintf(stderr, "  t=%llu cut host %d -> %d\n", (unsigned long long)now, h,
			(h + 1) % s->nhosts);
	sim_link_cut(a);
	s->cuts++;
	s->w.cuts++;
	s->w.healing += 2;
	s->ev[s->nev++] = (struct event_at){ now + sim_below(&s->rng, 30), a, false, false };
	s->ev[s->nev++] = (struct event_at){ now + sim_below(&s->rng, 30), b, false, false };
	s->ev[s->nev++] = (struct event_at){ up + sim_below(&s->rng, 20), a, true, false };
	s->ev[s->nev++] = (struct event_at){ up + sim_below(&s->rng, 20), b, true, false };
}

static void
run_event(struct schedule *s, struct event_at *e)
{
	e->done = true;
	if (e->up && s->w.healing > 0)
		s->w.healing--;
	if (e->up)
		sim_link_up(e->end);
	else
		sim_link_close(e->end, "connection reset by the simulation");
}

static int
candidates(struct schedule *s, struct cand *c)
{
	int n = 0, i, k, due = sim_timers_due();
	uint64_t now = sim_now_ms();

	for (i = 0; i < 2 * s->nhosts; i++) {
		struct sim_link *e = end_at(s, i);

		if (sim_can_xmit(e))
			c[n++] = (struct cand){ A_XMIT, i, e };
		if (sim_can_recv(e))
			c[n++] = (struct cand){ A_RECV, i, e };
	}
	for (k = 0; k < due && k < 4; k++)
		c[n++] = (struct cand){ A_TIMER, k, NULL };
	for (i = 0; i < s->w.nprocs; i++)
		if (sim_proc_ready(&s->w.proc[i]))
			c[n++] = (struct cand){ A_PROC, i, NULL };
	for (i = 0; i < s->nev; i++)
		if (!s->ev[i].done && s->ev[i].at <= now)
			c[n++] = (struct cand){ A_EVENT, i, NULL };
	/* a turn that left work (ringd's loop runs another at once) */
	for (i = 0; i < s->nhosts; i++)
		if (s->net.h[i].more)
			c[n++] = (struct cand){ A_TURN, i, NULL };
	return n;
}

/* When something can happen next, if nothing can now (UINT64_MAX: never). */
static uint64_t
next_time(const struct schedule *s)
{
	uint64_t t = sim_timer_next();
	int i;

	for (i = 0; i < s->w.nprocs; i++) {
		const struct sim_proc *p = &s->w.proc[i];

		if (!p->gone && !p->busy && p->wake_at < t && p->wake_at > sim_now_ms())
			t = p->wake_at;
	}
	for (i = 0; i < s->nev; i++)
		if (!s->ev[i].done && s->ev[i].at < t)
			t = s->ev[i].at;
	return t;
}

/* How many bytes one write or read moves: often a little, sometimes all. */
static size_t
chunk(struct schedule *s)
{
	static const size_t sizes[] = { 1, 7, 64, 1000, 4096, 20000, 1 << 20 };

	return sizes[sim_below(&s->rng, sizeof(sizes) / sizeof(sizes[0]))];
}

static void
act(struct schedule *s, const struct cand *c)
{
	int h;

	switch (c->a) {
	case A_XMIT:
		sim_xmit(c->end, chunk(s));
		break;
	case A_RECV:
		sim_recv(c->end, chunk(s));
		break;
	case A_TIMER:
		sim_timer_fire(c->i);
		break;
	case A_PROC:
		sim_proc_act(&s->w, &s->w.proc[c->i]);
		break;
	case A_EVENT:
		run_event(s, &s->ev[c->i]);
		break;
	case A_TURN:
		break;
	}
	/* what the step caused, run after it as ringd's loop does after each
	 * pass: never on the stack of the handler that asked for it */
	for (h = 0; h < s->nhosts; h++)
		s->net.h[h].more = engine_turn(&s->net.h[h].rd);
}

/* One step; false when nothing will ever happen again. */
static bool
step(struct schedule *s)
{
	struct cand c[CANDS_MAX];
	int n;
	uint64_t t;

	if (s->faults && s->cuts < CUTS_MAX && sim_below(&s->rng, 600) == 0)
		cut_one(s);
	if (sim_below(&s->rng, 40) == 0)
		sim_clock_advance(1 + sim_below(&s->rng, 10));
	n = candidates(s, c);
	if (n == 0) {
		if ((t = next_time(s)) == UINT64_MAX)
			return false;
		sim_clock_advance(t - sim_now_ms());
		return true;
	}
	act(s, &c[sim_below(&s->rng, (uint32_t)n)]);
	return true;
}

/* Settings a schedule's daemons share: small segments and windows, so that
 * the few kilobytes of a schedule's operations take many frames and much
 * waiting for credit and room, and a bound far above any schedule's delays. */
static void
schedule_config(struct schedule *s, struct config *cfg)
{
	static const uint32_t segs[] = { 4096, 8192, 65536 };
	static const uint32_t windows[] = { 65536, 262144, 1u << 20 };

	config_defaults(cfg);
	cfg->segment_bytes = segs[sim_below(&s->rng, 3)];
	cfg->window_bytes = windows[sim_below(&s->rng, 3)];
	if (cfg->window_bytes < 2 * cfg->segment_bytes)
		cfg->window_bytes = 2 * cfg->segment_bytes;
	cfg->op_timeout_ms = 5000;
	cfg->evict_after_ms = 0;	/* the ring's membership is not simulated */
}

/* The end of a schedule: what the engines must have let go of. */
static void
schedule_end(struct schedule *s)
{
	char why[256] = "";
	int h, busy;

	sim_world_end(&s->w);
	for (h = 0; h < s->nhosts; h++) {
		struct ringd *rd = &s->net.h[h].rd;

		if ((busy = job_table_busy(rd, why, sizeof(why))) > 0)
			sim_fail(&s->rep, "host %d: %d job(s) never dissolved (%s)", h, busy, why);
		job_table_free(rd);
	}
	if (sim_timers_live() != 0)
		sim_fail(&s->rep, "%d operation timer(s) outlived every operation",
			 sim_timers_live());
	sim_net_free(&s->net);
}

static void
dump_jobs(const struct ringd *rd)
{
	const struct job *j;
	char line[1024];

	JOBS_FOREACH(j, rd) {
		struct flow_counts fc;
		struct op *op = coll_active(j);

		job_describe(rd, j, line, sizeof(line));
		flow_counts(j, &fc);
		fprintf(stderr, "    %s credit tx %llu/%llu rx %llu/%llu stash %llu", line,
			(unsigned long long)fc.tx_used, (unsigned long long)fc.tx_limit,
			(unsigned long long)fc.rx_consumed, (unsigned long long)fc.rx_granted,
			(unsigned long long)fc.stash_bytes);
		if (op != NULL) {
			const struct op_ring *r = op_ring(op);

			fprintf(stderr, " active #%llu tx %d/%d+%llu rx %d/%d+%llu%s%s",
				(unsigned long long)op_fp(op)->seq, r->tx_i, r->plan.ntx,
				(unsigned long long)r->tx_off, r->rx_i, r->plan.nrx,
				(unsigned long long)r->rx_off, op_started(op) ? " started" : "",
				r->hdr_rx == r->plan.nhdr_from ? " hdr" : "");
		}
		fprintf(stderr, "\n");
	}
}

/* What each daemon and process was doing when a replayed schedule failed. */
static void
dump(const struct schedule *s)
{
	int h, i;

	for (h = 0; h < s->nhosts; h++) {
		const struct ringd *rd = &s->net.h[h].rd;

		fprintf(stderr, "  host %d: ring %s epoch %u, next %s, prev %s%s\n", h,
			ring_state_name(rd->state), rd->epoch, link_state_name(rd->next->state),
			link_state_name(rd->prev->state), rd->prev->rx_blocked ? " (blocked)" : "");
		fprintf(
		    stderr, "    next: out %zu wire %zu; prev: out %zu wire %zu in %zu\n",
		    evbuffer_get_length(rd->next->out), evbuffer_get_length(s->net.h[h].next.wire),
		    evbuffer_get_length(rd->prev->out), evbuffer_get_length(s->net.h[h].prev.wire),
		    evbuffer_get_length(s->net.h[h].prev.in));
		dump_jobs(rd);
	}
	for (i = 0; i < s->w.nprocs; i++) {
		const struct sim_proc *p = &s->w.proc[i];

		fprintf(stderr,
			"  job %s rank %d (host %d, local %d/%d): inc %d/%d step %d/%d wake "
			"%llu%s%s%s%s\n",
			p->job->name, p->rank, p->host, p->lr, p->lsize, p->inc, p->job->inc,
			p->step, p->job->nsteps, (unsigned long long)p->wake_at,
			p->attached ? " attached" : "", p->welcomed ? " welcomed" : "",
			p->busy ? " busy" : "", p->gone ? " gone" : "");
	}
}

/* streams: 1 links of several streams, 0 not, -1 the seed's choice (every
 * third seed: their own generator, so that the other seeds replay as they did
 * before streams) */
static int
run_schedule(uint64_t seed, int hosts_max, int streams, bool verbose)
{
	struct schedule *s = calloc(1, sizeof(*s));
	struct config cfg;
	int i, failures;

	if (s == NULL)
		abort();
	s->seed = seed;
	s->verbose = verbose;
	s->rng.s = seed * 0x2545f4914f6cdd1dull + 1;
	s->rng2.s = seed * 0x9e3779b97f4a7c15ull + 7;
	s->nhosts = 2 + (int)sim_below(&s->rng, (uint32_t)hosts_max - 1);
	s->faults = sim_below(&s->rng, 4) != 0;
	sim_clock_reset();
	schedule_config(s, &cfg);
	if (sim_net_init(&s->net, s->nhosts, &cfg) != 0)
		abort();
	s->net.trace = verbose;
	s->net.streams = streams >= 0 ? streams > 0 : seed % 3 == 2;
	s->net.srng.s = seed * 0xd1342543de82ef95ull + 3;
	s->w.net = &s->net;
	s->w.rng = &s->rng;
	s->w.rng2 = &s->rng2;
	s->w.rep = &s->rep;
	s->w.verbose = verbose;
	sim_world_make(&s->w, s->nhosts, s->faults);
	/* the connections come up one end at a time, in the seed's order */
	for (i = 0; i < 2 * s->nhosts; i++)
		s->ev[s->nev++] =
		    (struct event_at){ sim_below(&s->rng, 50), end_at(s, i), true, false };
	while (s->rep.failures == 0 && step(s)) {
		check_credit(s);
		if (++s->steps > MAX_STEPS) {
			sim_fail(&s->rep, "no end after %d steps (%llu virtual ms)", MAX_STEPS,
				 (unsigned long long)sim_now_ms());
			break;
		}
	}
	if (s->rep.failures == 0 && !sim_world_done(&s->w))
		sim_fail(&s->rep, "nothing more happens, and not every process is through "
				  "(stuck)");
	if (s->rep.failures > 0 && verbose)
		dump(s);
	if (s->rep.failures == 0)
		schedule_end(s);
	else
		sim_net_free(&s->net);	/* what a failed schedule holds is left */
	if (s->rep.failures > 0)
		printf(
		    "engine-sim: seed %llu FAILED (%d hosts, %d jobs, %s%s, step %llu, t=%llu ms): "
		    "%s\n  replay: engine-sim --seed %llu%s -v\n",
		    (unsigned long long)seed, s->nhosts, s->w.njobs,
		    s->faults ? "faults" : "no faults", s->net.streams ? ", streams" : "",
		    (unsigned long long)s->steps, (unsigned long long)sim_now_ms(), s->rep.first,
		    (unsigned long long)seed, s->net.streams && seed % 3 != 2 ? " --streams" : "");
	else if (verbose)
		printf("engine-sim: seed %llu passed: %d hosts, %d jobs, %d cuts, %llu steps, "
		       "%llu virtual ms%s (%llu frames overtaken)\n",
		       (unsigned long long)seed, s->nhosts, s->w.njobs, s->cuts,
		       (unsigned long long)s->steps, (unsigned long long)sim_now_ms(),
		       s->net.streams ? ", streams" : "", (unsigned long long)s->net.overtaken);
	failures = s->rep.failures;
	free(s);
	return failures > 0;
}

/* The seeds that failed once (tests/sim/seeds), next to this program's
 * source or given by ENGINE_SIM_SEEDS; "SEED streams" runs one with links of
 * several streams whatever the seed's own choice. */
static int
run_kept(int hosts_max, int *ran)
{
	const char *path = getenv("ENGINE_SIM_SEEDS");
	char line[128];
	FILE *f;
	int failed = 0;

	if ((f = fopen(path != NULL ? path : "tests/sim/seeds", "r")) == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		char *end;
		unsigned long long seed = strtoull(line, &end, 10);

		if (end == line || line[0] == '#')
			continue;
		while (*end == ' ' || *end == '\t')
			end++;
		failed +=
		    run_schedule(seed, hosts_max, strncmp(end, "streams", 7) == 0 ? 1 : -1, false);
		(*ran)++;
	}
	fclose(f);
	return failed;
}

static int
usage(FILE *f)
{
	fprintf(f, "usage: engine-sim [--seeds N] [--from S] [--seed S] [--hosts-max H] "
		   "[--streams] [-v]\n");
	return f == stderr ? 2 : 0;
}

int
main(int argc, char **argv)
{
	unsigned long long from = 1, seeds = 1000, one = 0;
	int hosts_max = 5, i, failed = 0, ran = 0;
	bool verbose = false, single = false;
	int streams = -1;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--seeds") == 0 && i + 1 < argc)
			seeds = strtoull(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--from") == 0 && i + 1 < argc)
			from = strtoull(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
			one = strtoull(argv[++i], NULL, 10), single = true;
		else if (strcmp(argv[i], "--hosts-max") == 0 && i + 1 < argc)
			hosts_max = atoi(argv[++i]);
		else if (strcmp(argv[i], "--streams") == 0)
			streams = 1;
		else if (strcmp(argv[i], "-v") == 0)
			verbose = true;
		else
			return usage(strcmp(argv[i], "-h") == 0 ? stdout : stderr);
	}
	if (hosts_max < 2 || hosts_max > SIM_HOSTS_MAX)
		return usage(stderr);
	log_init("engine-sim", verbose ? LOG_LVL_INFO : LOG_LVL_ERR - 1, 0);
	if (single)
		return run_schedule(one, hosts_max, streams, verbose);
	failed += run_kept(hosts_max, &ran);
	for (unsigned long long s = from; s < from + seeds; s++, ran++)
		failed += run_schedule(s, hosts_max, streams, verbose);
	printf("engine-sim: %d schedules, %d failed\n", ran, failed);
	return failed > 0;
}
