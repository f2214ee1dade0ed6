/*
 * jobgrow.c - ring_comm_grow on the daemon's side: newcomers wait in their
 * base job's lobby, a job that never forms ("<base>:join", world
 * PROTO_MAX_RANKS, each host claiming its newcomers as ranks host x
 * PROTO_JOIN_MAX + local rank), so that every daemon records, as it records
 * every claim, which hosts have how many newcomers waiting and under which
 * claim.  The growing job's rank 0 asks its daemon (GROW) until whole hosts'
 * groups of them, taken in ring order, make the number it wants; that daemon
 * then makes the offer (the grown job's name and world, each newcomer host's
 * first rank and its count of old ranks), keeps it on the lobby's record,
 * answers with it and sends it once round the ring (GROW frame); each daemon
 * with newcomers of it tells them their place (GROW_INFO), by the claim the
 * offer names, so a newcomer that came later is never taken for one counted.
 * Everything after is an ordinary formation (job.c), which the old ranks and
 * the newcomers open explicitly.  One of the job's own files (jobrec.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobrec.h"
#include "../proto/log.h"

/* The lobby's name for base (false: it does not fit a job name). */
static bool
grow_lobby_name(const char *base, char *out, size_t cap)
{
	int n = snprintf(out, cap, "%s%s", base, PROTO_GROW_LOBBY);

	return n > 0 && n <= PROTO_JOB_MAX && (size_t)n < cap;
}

bool
job_grow_newcomer_place(struct ringd *rd, const char *base, int lr, char *name, size_t cap,
			int *rank, int *world, char *err, size_t errlen)
{
	if (!grow_lobby_name(base, name, cap)) {
		snprintf(err, errlen,
			 "job name \"%s\" is too long for a newcomer (at most %d characters "
			 "with the lobby's \"%s\")",
			 base, PROTO_JOB_MAX, PROTO_GROW_LOBBY);
		return false;
	}
	if ((rd->rank + 1) * PROTO_JOIN_MAX > PROTO_MAX_RANKS) {
		snprintf(err, errlen,
			 "a newcomer (RING_JOIN) waits only on the ring's first %d hosts; "
			 "this is host %d",
			 PROTO_MAX_RANKS / PROTO_JOIN_MAX, rd->rank);
		return false;
	}
	*rank = rd->rank * PROTO_JOIN_MAX + lr;
	*world = PROTO_MAX_RANKS;
	return true;
}

static struct job *
grow_lobby(struct ringd *rd, const char *base)
{
	char name[PROTO_JOB_MAX + 1];
	struct job *lb;

	if (!grow_lobby_name(base, name, sizeof(name)))
		return NULL;
	lb = job_lookup(rd, proto_job_id(name));
	return lb != NULL && strcmp(lb->name, name) == 0 ? lb : NULL;
}

/* Host h's newcomers waiting in lobby l (its claim in *claim), 0: none. */
static int
grow_waiting(const struct job *lb, int h, uint32_t *claim)
{
	int r, n = 0;

	if (lb->world != PROTO_MAX_RANKS || lb->host_of == NULL)
		return 0;
	for (r = h * PROTO_JOIN_MAX; r < (h + 1) * PROTO_JOIN_MAX && r < lb->world; r++)
		if (lb->host_of[r] == h)
			n++;
	*claim = lb->host[h].claim_gen;
	/* an offer took them already: they are on their way to it */
	if (lb->grow_offer != NULL)
		for (r = 0; r < (int)lb->grow_offer->nhosts; r++)
			if ((int)lb->grow_offer->hosts[r].host == h &&
			    lb->grow_offer->hosts[r].claim == *claim)
				return 0;
	return n;
}

/* Tells this host's newcomers of lobby l their place in the offer o. */
static void
grow_tell(struct ringd *rd, struct job *lb, const struct proto_grow *o)
{
	struct proto_grow_info info;
	uint32_t i;
	int k;

	for (i = 0; i < o->nhosts; i++)
		if ((int)o->hosts[i].host == rd->rank)
			break;
	if (i == o->nhosts || !lb->joined || lb->host[rd->rank].claim_gen != o->hosts[i].claim)
		return;
	for (k = 0; k < lb->local_size; k++) {
		struct client *s = lb->loc[k].sess;

		if (s == NULL || s->ev->grow == NULL)
			continue;
		memset(&info, 0, sizeof(info));
		info.came = o->world - o->old;
		info.rank = (int32_t)(o->hosts[i].first + (uint32_t)k);
		info.local_rank = (int32_t)(o->hosts[i].old_here + (uint32_t)k);
		info.local_size = (int32_t)(o->hosts[i].old_here + o->hosts[i].new_here);
		info.offer = *o;
		s->ev->grow(s, &info);
	}
	log_info("job %s: %d newcomer%s here admitted to job %s (world %u)", o->base,
		 lb->local_size, lb->local_size == 1 ? "" : "s", o->job, o->world);
}

/* Keeps offer o on lobby l (the latest) and tells the newcomers here. */
static void
grow_keep(struct ringd *rd, struct job *lb, const struct proto_grow *o)
{
	if (lb->grow_offer == NULL && (lb->grow_offer = malloc(sizeof(*lb->grow_offer))) == NULL)
		return;
	*lb->grow_offer = *o;
	grow_tell(rd, lb, o);
}

static void
grow_send(struct ringd *rd, const struct proto_grow *o)
{
	static uint8_t buf[2048];
	struct proto_frame f = { .type = PROTO_F_GROW,
				 .epoch = rd->epoch,
				 .route = PROTO_ROUTE(rd->rank, rd->rank) };
	int n;

	if (rd->world < 2 || rd->next == NULL || rd->next->state != LINK_UP)
		return;
	if ((n = proto_encode_grow(buf, sizeof(buf), o)) <= 0)
		return;
	f.job = proto_job_id(o->base);
	f.length = (uint32_t)n;
	link_send(rd->next, &f, buf);
}

/* Why job j cannot grow now, into out->text (status set); false: it can. */
static bool
grow_refused(struct ringd *rd, const struct job *j, const struct client *s, uint32_t add,
	     struct proto_grow_info *out)
{
	const char *why = NULL;

	if (j == NULL || !j->formed || s->job != j)
		why = "this process is no rank of a formed job: only the ranks of a running "
		      "job grow it";
	else if (j->revoked)
		why = "the job was revoked: shrink it or reopen, then grow";
	else if (j->broken || !j->ready)
		why = "the job is not healthy (a host or a process of it was lost): shrink it "
		      "first, then grow the survivors";
	else if (rd->state != RING_READY)
		why = "the ring is not whole (ringctl status): grow once it is ready again";
	else if ((uint64_t)j->world + add > PROTO_MAX_RANKS)
		why = "the grown world would not fit (at most 65535 ranks)";
	else if (rd->world * PROTO_JOIN_MAX > PROTO_MAX_RANKS)
		why = "newcomers wait only on rings of at most 63 hosts";
	if (why == NULL)
		return false;
	out->status = RING_EINVAL;
	snprintf(out->text, sizeof(out->text), "job %s cannot grow by %u: %s",
		 j != NULL ? j->name : "?", add, why);
	return true;
}

/* The grown job's name: the base's, and a hash of this grow. */
static void
grow_name(const struct job *j, const char *base, uint32_t add, char *out, size_t cap)
{
	uint64_t h = 0xcbf29ce484222325ull, v[4] = { j->id, j->fgen, add, (uint64_t)now_ms() };
	int i;

	for (i = 0; i < 4; i++) {
		h ^= v[i];
		h *= 0x100000001b3ull;
	}
	snprintf(out, cap, "%.*s:g%012llx", PROTO_JOB_MAX - 14, base,
		 (unsigned long long)(h & 0xffffffffffffull));
}

void
job_grow_ask(struct ringd *rd, const struct client *s, const struct proto_grow_ask *a,
	     struct proto_grow_info *out)
{
	struct job *j = s->job, *lb;
	struct proto_grow o;
	uint32_t taken = 0, claim;
	int h, n, pos;

	memset(out, 0, sizeof(*out));
	out->rank = -1;
	if (grow_refused(rd, j, s, a->add, out))
		return;
	if ((lb = grow_lobby(rd, a->base)) == NULL)
		return; /* nobody waits yet */
	memset(&o, 0, sizeof(o));
	for (h = 0; h < rd->world; h++) {
		if ((n = grow_waiting(lb, h, &claim)) == 0)
			continue;
		out->came += (uint32_t)n;
		if (taken + (uint32_t)n > a->add || o.nhosts == PROTO_GROW_HOSTS)
			continue;
		pos = job_host_pos(j, h);
		o.hosts[o.nhosts] = (struct proto_grow_host){
			.host = (uint32_t)h,
			.old_here = pos < 0 ? 0 : (uint32_t)j->nhranks[pos],
			.new_here = (uint32_t)n,
			.first = (uint32_t)j->world + taken,
			.claim = claim,
		};
		o.nhosts++;
		taken += (uint32_t)n;
	}
	if (taken != a->add)
		return; /* not enough yet, or groups that do not add up: asked again */
	snprintf(o.base, sizeof(o.base), "%s", a->base);
	grow_name(j, a->base, a->add, o.job, sizeof(o.job));
	o.world = (uint32_t)j->world + a->add;
	o.old = (uint32_t)j->world;
	if (!proto_grow_ok(&o)) {
		out->status = RING_EINVAL;
		snprintf(out->text, sizeof(out->text),
			 "job %s cannot grow by %u: the newcomers' hosts hold more than %d "
			 "processes of it each",
			 j->name, a->add, PROTO_JOIN_MAX);
		return;
	}
	log_info("job %s grows by %u to %u as job %s (%u host%s with newcomers)", j->name, a->add,
		 o.world, o.job, o.nhosts, o.nhosts == 1 ? "" : "s");
	out->offer = o;
	grow_send(rd, &o);
	grow_keep(rd, lb, &o);
}

int
job_grow_rx(struct ringd *rd, struct link *l, const struct proto_frame *f, const uint8_t *pl)
{
	static struct proto_grow o;
	int origin = PROTO_ROUTE_SRC(f->route);
	struct job *lobby;

	if (l->dir != LINK_PREV || PROTO_ROUTE_DST(f->route) != origin || origin >= rd->world ||
	    proto_decode_grow(pl, f->length, &o) != 0 || proto_job_id(o.base) != f->job) {
		snprintf(l->last_error, sizeof(l->last_error), "malformed grow frame");
		return RX_ERROR;
	}
	if (origin == rd->rank)
		return RX_DONE; /* it went all the way round */
	if (ring_passes_on(rd, origin) && rd->next != NULL)
		link_send(rd->next, f, pl);
	if ((lobby = grow_lobby(rd, o.base)) != NULL)
		grow_keep(rd, lobby, &o);
	return RX_DONE;
}
