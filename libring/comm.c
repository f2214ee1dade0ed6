/*
 * comm.c - the communicator: ring_open (environment, arena, the session's
 * connect and HELLO, WELCOME), ring_close (every request still running fails,
 * then the session says BYE), what a communicator says of itself, and the
 * arena's public face (ring_alloc, ring_free, ring_arena_keep).  It sits above
 * the requests (req.c, group.c), since closing fails them, and above the
 * session (sess.c), which it opens and closes.
 *
 * With no daemon socket at the default path and nothing that says the world is
 * larger than one process, ring_open gives a size-1 group (MLX's non-strict
 * init) and says so on stderr; RING_STRICT=1 refuses instead.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "internal.h"
#include "../proto/clock.h"
#include "../proto/dtype.h"

static void
comm_free(struct ring_comm *c)
{
	if (c->fd >= 0)
		close(c->fd);
	if (c->wakefd >= 0)
		close(c->wakefd);
	if (c->bell >= 0)
		close(c->bell);
	lr_fast_close(c);
	lr_stage_release(c);
	lr_arena_destroy(&c->arena);
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

/* The mutex, the condition variable (on the monotonic clock, as every bound in
 * libring) and the eventfd that wakes a thread asleep on the socket. */
static int
comm_sync_init(struct ring_comm *c)
{
	pthread_condattr_t ca;

	c->wakefd = -1;
	c->bell = -1;
	c->page_fd = -1;
	if (pthread_mutex_init(&c->mu, NULL) != 0)
		return RING_ENOMEM;
	if (pthread_condattr_init(&ca) != 0 ||
	    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 ||
	    pthread_cond_init(&c->cv, &ca) != 0) {
		pthread_mutex_destroy(&c->mu);
		return RING_ENOMEM;
	}
	pthread_condattr_destroy(&ca);
	TAILQ_INIT(&c->reqs);
	TAILQ_INIT(&c->active);
	c->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->wakefd < 0) {
		pthread_cond_destroy(&c->cv);
		pthread_mutex_destroy(&c->mu);
		return RING_ENOMEM;
	}
	return 0;
}

/* A size-1 group: no daemon, every collective a copy. */
static void
comm_single(struct ring_comm *c)
{
	c->single = true;
	c->rank = c->local_rank = c->host_rank = 0;
	c->size = c->local_size = c->nhosts = 1;
	c->piece_bytes = UINT64_MAX;
}

/* Where c's daemon is, its job, and the name its newcomers open with. */
static void
comm_names(struct ring_comm *c, const struct lr_env *env)
{
	memcpy(c->sock, env->socket, sizeof(c->sock));
	memcpy(c->job, env->job, sizeof(c->job));
	memcpy(c->base, env->base[0] ? env->base : env->job, sizeof(c->base));
}

int
lr_comm_open(const struct lr_env *env, ring_comm **out)
{
	struct ring_comm *c = NULL;
	char err[LR_ERR_MAX];
	int64_t start;
	int rc, bound, why = 0;

	*out = NULL;
	if (!proto_job_name_ok(env->job))
		return lr_fail(NULL, RING_EINVAL, "ring_open: job name \"%s\" must be 1..%d of "
			       "letters, digits and . _ - :", env->job, PROTO_JOB_MAX);
	c = calloc(1, sizeof(*c));
	if (!c)
		return lr_fail(NULL, RING_ENOMEM, "ring_open: out of memory");
	if (comm_sync_init(c) != 0) {
		free(c);
		return lr_fail(NULL, RING_ENOMEM, "ring_open: cannot make the communicator's "
			       "mutex and eventfd: %s", strerror(errno));
	}
	c->fd = -1;
	c->debug = env->debug;
	c->timeout_ms = env->timeout_ms;
	c->poll_us = env->poll_us;
	c->no_shm = env->no_shm;
	c->no_fast = env->no_fast;
	c->algo = env->algo;
	c->wire = env->wire;
	c->next_reqid = 1;
	comm_names(c, env);

	rc = lr_arena_create(&c->arena, env->arena_bytes, err, sizeof(err));
	if (rc) {
		lr_fail(c, rc, "ring_open: %s", err);
		goto fail;
	}
	if (env->single) {
		/* Asked for explicitly (RING_SINGLE=1, no socket configured). */
		comm_single(c);
		*out = c;
		return 0;
	}

	bound = env->timeout_ms < LR_CONNECT_MAX_MS ? env->timeout_ms : LR_CONNECT_MAX_MS;
	start = proto_now_ms();
	rc = lr_sess_connect(c, env->socket_set, start + bound, &why);
	if (rc && why == ENOENT && lr_env_single_default(env)) {
		/* No daemon here and nobody said there are other ranks: a program
		 * run on its own works as a size-1 group, as under MLX. */
		fprintf(stderr, "libring: no ringd at %s; running as a size-1 group (set "
			"RING_STRICT=1 to refuse, RING_SINGLE=1 to ask for it)\n", c->sock);
		close(c->fd);
		c->fd = -1;
		comm_single(c);
		*out = c;
		return 0;
	}
	if (rc)
		goto fail;
	rc = lr_sess_hello(c, env, start + bound);
	if (rc == 0 && c->page_fd >= 0)
		rc = lr_fast_open(c);
	if (rc)
		goto fail;
	if (c->debug)
		fprintf(stderr,
			"libring: joined job %s (id %u) at %s: rank %d of %d, local "
			"%d of %d, host %d of %d, piece %llu bytes, operations over %s%s\n",
			c->job, c->job_id, c->sock, c->rank, c->size, c->local_rank, c->local_size,
			c->host_rank, c->nhosts, (unsigned long long)c->piece_bytes,
			c->shm ? "the arena's rings" : "the socket",
			c->fast.page ? ", small all-reduces over the job page" : "");
	*out = c;
	return 0;
fail:
	if (rc == LR_GROW_ADMITTED) /* a newcomer told its place goes on */
		lr_sess_bye(c);
	/* The comm goes away; its message survives for ring_last_error(NULL). */
	lr_fail(NULL, rc, "%s", c->err);
	comm_free(c);
	return rc;
}

/* A newcomer (RING_JOIN): waits in its base job's lobby until a grow tells
 * it its place (LR_GROW_ADMITTED), then opens the grown job there
 * (ring_comm_grow: grow.c, ringd/jobgrow.c). */
static int
comm_open_newcomer(const struct lr_env *env, ring_comm **out)
{
	struct proto_grow_info m;
	struct lr_env lobby = *env, g;
	int rc;

	lobby.grow = &m;
	rc = lr_comm_open(&lobby, out);
	if (rc == 0) { /* a lobby never forms */
		ring_close(*out);
		*out = NULL;
		return lr_fail(NULL, RING_EPROTO, "ring_open: the lobby of job %s formed",
			       env->job);
	}
	if (rc != LR_GROW_ADMITTED)
		return rc;
	g = *env;
	g.join = false;
	g.grow = NULL;
	g.socket_set = true;
	memcpy(g.base, env->job, sizeof(g.base));
	memcpy(g.job, m.offer.job, sizeof(g.job));
	g.rank = m.rank;
	g.size = (int)m.offer.world;
	g.local_rank = m.local_rank;
	g.local_size = m.local_size;
	g.source = "ring_comm_grow";
	if (env->debug)
		fprintf(stderr, "libring: newcomer of job %s admitted: rank %d of %u in job %s\n",
			env->job, m.rank, m.offer.world, m.offer.job);
	if ((rc = lr_comm_open(&g, out)) != 0)
		return lr_fail(NULL, rc,
			       "ring_open: a newcomer of job %s, admitted as rank %d of "
			       "%u in job %s: %s",
			       env->job, m.rank, m.offer.world, m.offer.job, ring_last_error(NULL));
	return 0;
}

int
ring_open(ring_comm **out, const struct ring_options *opts)
{
	struct lr_env env;
	char err[LR_ERR_MAX];
	int rc;

	if (!out)
		return lr_fail(NULL, RING_EINVAL, "ring_open: the comm pointer is NULL");
	*out = NULL;
	rc = lr_env_resolve(opts, &env, err, sizeof(err));
	if (rc)
		return lr_fail(NULL, rc, "ring_open: %s", err);
	if (env.join)
		return comm_open_newcomer(&env, out);
	return lr_comm_open(&env, out);
}

int
ring_close(ring_comm *c)
{
	if (!c)
		return 0;
	/* Requests still running fail; every request stays readable until freed. */
	lr_comm_lock(c);
	lr_req_close_all(c);
	lr_group_free(c);
	lr_comm_unlock(c);
	lr_sess_bye(c);
	comm_free(c);
	return 0;
}

int
ring_rank(const ring_comm *c)
{
	return c ? c->rank : RING_EINVAL;
}

int
ring_size(const ring_comm *c)
{
	return c ? c->size : RING_EINVAL;
}

int
ring_local_rank(const ring_comm *c)
{
	return c ? c->local_rank : RING_EINVAL;
}

int
ring_local_size(const ring_comm *c)
{
	return c ? c->local_size : RING_EINVAL;
}

int
ring_host_rank(const ring_comm *c)
{
	return c ? c->host_rank : RING_EINVAL;
}

int
ring_host_count(const ring_comm *c)
{
	return c ? c->nhosts : RING_EINVAL;
}

void *
ring_alloc(ring_comm *c, size_t bytes)
{
	void *p;

	if (!c) {
		lr_fail(NULL, RING_EINVAL, "ring_alloc: comm is NULL");
		return NULL;
	}
	lr_comm_lock(c);
	p = lr_arena_alloc(&c->arena, bytes);
	if (!p)
		lr_fail(c, RING_ENOMEM, "ring_alloc(%zu): the arena has no free block that "
			"large (%zu of %zu bytes free, largest block %zu); raise RING_ARENA_MB "
			"or ring_options.arena_bytes", bytes, c->arena.free_bytes,
			lr_arena_usable(&c->arena), lr_arena_largest(&c->arena));
	lr_comm_unlock(c);
	return p;
}

void
ring_free(ring_comm *c, void *p)
{
	if (!p)
		return;
	if (!c) {
		lr_fail(NULL, RING_EINVAL, "ring_free(%p): comm is NULL (ignored)", p);
		return;
	}
	lr_comm_lock(c);
	if (lr_arena_free(&c->arena, p) != 0)
		lr_fail(c, RING_EINVAL, "ring_free(%p): not a live ring_alloc block of this "
			"communicator (ignored)", p);
	lr_comm_unlock(c);
}

void *
ring_arena_keep(ring_comm *c, size_t *bytes)
{
	void *base;

	if (!c || !bytes) {
		lr_fail(c, RING_EINVAL, "ring_arena_keep: comm or bytes is NULL");
		return NULL;
	}
	lr_comm_lock(c);
	base = c->arena.base;
	*bytes = c->arena.bytes;
	if (base)
		c->arena.kept = true;
	else
		lr_fail(c, RING_EINVAL, "ring_arena_keep: the communicator has no arena");
	lr_comm_unlock(c);
	return base;
}

size_t
ring_dtype_size(enum ring_dtype dtype)
{
	return proto_dtype_size(dtype);
}

const char *
ring_dtype_name(enum ring_dtype dtype)
{
	return proto_dtype_name(dtype);
}

const char *
ring_op_name(enum ring_op op)
{
	return proto_op_name(op);
}
