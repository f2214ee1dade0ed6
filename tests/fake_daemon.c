/*
 * fake_daemon.c - the fake ringd of libring's unit tests (fake_daemon.h): a
 * listener thread that serves the first session as its mode says and later
 * sessions (sub-communicators) as a well-behaved daemon, carrying out each
 * operation on the shared arena as if the other ranks had contributed the
 * same data.
 */
#include <criterion/criterion.h>

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "proto/dtype.h"
#include "tests/fake_daemon.h"

struct fake F;

void
fake_scrub_env(void)
{
	static const char *const prefixes[] = { "RING_", "OMPI_",  "PMI_", "PMIX_",
						"MPI_",  "SLURM_", "MLX_", "TORCHELASTIC_" };
	static const char *const names[] = { "RANK", "WORLD_SIZE", "LOCAL_RANK",
					     "LOCAL_WORLD_SIZE" };
	char name[256];
	bool again = true;
	size_t i, k, n;

	/* unsetenv changes environ: start over after each. */
	while (again) {
		again = false;
		for (i = 0; environ[i] != NULL && !again; i++) {
			n = strcspn(environ[i], "=");
			if (n >= sizeof(name))
				continue;
			memcpy(name, environ[i], n);
			name[n] = '\0';
			for (k = 0; k < sizeof(prefixes) / sizeof(prefixes[0]) && !again; k++)
				again = strncmp(name, prefixes[k], strlen(prefixes[k])) == 0;
			for (k = 0; k < sizeof(names) / sizeof(names[0]) && !again; k++)
				again = strcmp(name, names[k]) == 0;
			if (again)
				cr_assert_eq(unsetenv(name), 0, "%s", name);
		}
	}
}

static void
fake_problem(const char *what, const struct proto_op *op)
{
	if (!F.problem[0])
		snprintf(F.problem, sizeof(F.problem),
			 "%s (op %llu: %s count %llu stride "
			 "%llu send_off %llu recv_off %llu)",
			 what, (unsigned long long)op->reqid, proto_coll_name(op->coll),
			 (unsigned long long)op->count, (unsigned long long)op->stride,
			 (unsigned long long)op->send_off, (unsigned long long)op->recv_off);
}

static bool
fake_extent_ok(uint64_t off, uint64_t bytes, uint64_t arena)
{
	return off >= PROTO_ARENA_CTL && off <= arena && bytes <= arena - off;
}

/* A split's all-gather (int64 x LR_SPLIT_COLS): the other ranks' rows come from
 * F.split_rows, this rank's from libring. */
static void
fake_split_rows(const struct proto_op *op, uint8_t *arena, int rank, int size)
{
	int64_t *s = (int64_t *)(arena + op->send_off), *d = (int64_t *)(arena + op->recv_off);
	uint64_t stride = op->stride ? op->stride : op->count;
	int r;

	for (r = 0; r < size && r < 8; r++)
		memcpy(d + (size_t)r * stride, r == rank ? s : F.split_rows[r],
		       LR_SPLIT_COLS * sizeof(*d));
}

/* Checks the op's extents and carries it out as if size-1 other ranks had
 * contributed the same data (uint32 data only; other dtypes are not touched).
 * Where WELCOME said PROTO_WELCOME_RS_INPLACE, reduce-scatter must be in place
 * (ringd's rule), and it scribbles over the other blocks as ringd may. */
static void
fake_execute(const struct proto_op *op, uint8_t *arena, uint64_t abytes, int rank, int size,
	     bool inplace)
{
	size_t es = proto_dtype_size(op->dtype), n = op->count, i, r;
	uint64_t stride = op->stride ? op->stride : op->count;
	uint64_t big = ((uint64_t)(size - 1) * stride + n) * es;
	uint64_t sbytes = n * es, rbytes = n * es;
	uint32_t *s, *d, *tmp;

	if (op->coll == PROTO_COLL_ALLGATHER)
		rbytes = big;
	if (op->coll == PROTO_COLL_REDUCE_SCATTER)
		sbytes = big;
	if (op->coll == PROTO_COLL_BARRIER) {
		if (op->count)
			fake_problem("barrier with a count", op);
		return;
	}
	if (!fake_extent_ok(op->send_off, sbytes, abytes) ||
	    !fake_extent_ok(op->recv_off, rbytes, abytes)) {
		fake_problem("operand outside the arena", op);
		return;
	}
	if (op->fp_count < op->count && op->coll != PROTO_COLL_SEND && op->coll != PROTO_COLL_RECV)
		fake_problem("piece larger than the whole", op);
	if (op->coll == PROTO_COLL_REDUCE_SCATTER && inplace &&
	    op->recv_off != op->send_off + (uint64_t)rank * stride * es)
		fake_problem("reduce-scatter with local ranks not in place", op);
	if (op->coll == PROTO_COLL_ALLGATHER && op->dtype == RING_INT64 &&
	    op->fp_count == LR_SPLIT_COLS) {
		fake_split_rows(op, arena, rank, size);
		return;
	}
	if (es != 4 || n == 0)
		return;
	s = (uint32_t *)(arena + op->send_off);
	d = (uint32_t *)(arena + op->recv_off);
	switch (op->coll) {
	case PROTO_COLL_ALLREDUCE:
		for (i = 0; i < n; i++)
			d[i] = s[i] * (uint32_t)size;
		break;
	case PROTO_COLL_ALLGATHER:
		tmp = malloc(n * 4);
		memcpy(tmp, s, n * 4);
		for (r = 0; r < (size_t)size; r++)
			for (i = 0; i < n; i++)
				d[r * stride + i] = tmp[i] + (uint32_t)r * FAKE_TAG;
		free(tmp);
		break;
	case PROTO_COLL_REDUCE_SCATTER:
		for (i = 0; i < n; i++)
			d[i] = s[(size_t)rank * stride + i] * (uint32_t)size;
		if (inplace)
			for (r = 0; r < (size_t)size; r++)
				for (i = 0; r != (size_t)rank && i < n; i++)
					s[r * stride + i] = FAKE_SCRATCH_FILL;
		break;
	case PROTO_COLL_BROADCAST:
		if (op->send_off != op->recv_off)
			fake_problem("broadcast not in place", op);
		if (op->peer != rank)
			for (i = 0; i < n; i++)
				d[i] = FAKE_BCAST_FILL;
		else
			for (i = 0; i < n; i++) /* what the root sends */
				F.send_sum += s[i];
		break;
	case PROTO_COLL_SEND:
		for (i = 0; i < n; i++)
			F.send_sum += s[i];
		break;
	case PROTO_COLL_RECV:
		for (i = 0; i < n; i++)
			d[i] = FAKE_RECV_FILL;
		break;
	}
}

static void
fake_send(int fd, const uint8_t *buf, int n)
{
	if (n <= 0 || send(fd, buf, (size_t)n, MSG_NOSIGNAL) != n)
		snprintf(F.problem, sizeof(F.problem), "fake could not send (%d)", n);
}

/* One session being served. */
struct fake_session {
	int cfd;
	struct fake_sub *sub;      /* NULL for the first session (F itself) */
	struct proto_hello *hello; /* where its HELLO goes */
	enum fake_mode mode;       /* F.mode for the first, else FAKE_OK */
	int afd;                   /* the arena's memfd, or -1 */
	uint8_t *arena;            /* mapped, or NULL */
	struct proto_welcome w;    /* what it was told */
};

/* Reads the HELLO and maps the arena it came with; false (F.problem says
 * why) when either is bad. */
static bool
fake_hello(struct fake_session *s)
{
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	uint8_t buf[PROTO_MSG_MAX];
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = cbuf.b,
			     .msg_controllen = sizeof(cbuf.b) };
	struct cmsghdr *cm;
	struct stat st;
	ssize_t n;

	n = recvmsg(s->cfd, &mh, 0);
	cm = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL;
	if (cm && cm->cmsg_type == SCM_RIGHTS)
		memcpy(&s->afd, CMSG_DATA(cm), sizeof(int));
	if (n <= 0 || proto_decode_hello(buf, (size_t)n, s->hello) != 0 || s->afd < 0) {
		snprintf(F.problem, sizeof(F.problem), "bad HELLO (%zd bytes, fd %d)", n, s->afd);
		return false;
	}
	fstat(s->afd, &st);
	if (!s->sub) {
		F.arena_size = st.st_size;
		F.arena_seals = fcntl(s->afd, F_GET_SEALS);
	}
	s->arena = mmap(NULL, s->hello->arena_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, s->afd, 0);
	if (s->arena == MAP_FAILED) {
		s->arena = NULL;
		snprintf(F.problem, sizeof(F.problem), "cannot map the arena");
		return false;
	}
	if (!s->sub)
		F.arena_magic = ((struct proto_arena_ctl *)s->arena)->magic;
	return true;
}

/* Answers the HELLO as the mode says; false when the session ends there.  A
 * later session takes its place from its HELLO, as ringd does for launcher
 * ranks. */
static bool
fake_welcome(struct fake_session *s)
{
	uint8_t buf[PROTO_MSG_MAX];
	struct proto_welcome *w = &s->w;
	struct proto_error e;

	if (s->mode == FAKE_REFUSE_HELLO) {
		memset(&e, 0, sizeof(e));
		e.code = RING_EPERM;
		snprintf(e.text, sizeof(e.text), "job %s: uid 1234 is not allowed (fake)",
			 s->hello->job);
		fake_send(s->cfd, buf, proto_encode_error(buf, sizeof(buf), &e));
		return false;
	}
	if (s->mode == FAKE_NO_WELCOME) {
		/* Until libring gives up and hangs up. */
		while (recv(s->cfd, buf, sizeof(buf), 0) > 0)
			;
		return false;
	}
	if (s->mode == FAKE_LATE_WELCOME)
		usleep((useconds_t)F.welcome_delay_ms * 1000);
	memset(w, 0, sizeof(*w));
	w->rank = s->sub ? s->hello->rank : F.rank;
	w->size = s->sub ? s->hello->size : F.size;
	w->local_rank = s->hello->local_rank;
	w->local_size = s->hello->local_size;
	w->host_rank = 0;
	w->nhosts = 1;
	w->job_id = proto_job_id(s->hello->job);
	w->seg_bytes = 4096;
	w->piece_bytes = F.piece;
	w->flags = s->sub ? 0 : F.welcome_flags;
	if (w->local_size > 1)
		w->flags |= PROTO_WELCOME_RS_INPLACE;
	snprintf(w->version, sizeof(w->version), "fake");
	fake_send(s->cfd, buf, proto_encode_welcome(buf, sizeof(buf), w));
	return true;
}

/* Answers every op until BYE or a hang-up; the mode's misbehaviour is on the
 * first op (FAKE_SILENT: on all of them). */
static void
fake_ops(struct fake_session *s)
{
	uint8_t buf[PROTO_MSG_MAX];
	struct proto_done d;
	struct proto_op op;
	uint16_t type;
	bool first = true;
	ssize_t n;

	while ((n = recv(s->cfd, buf, sizeof(buf), 0)) > 0) {
		if (proto_msg_peek(buf, (size_t)n, &type) != 0) {
			snprintf(F.problem, sizeof(F.problem), "malformed message from libring");
			return;
		}
		if (type == PROTO_M_BYE) {
			*(s->sub ? &s->sub->bye : &F.bye) = true;
			return;
		}
		if (proto_decode_op(buf, (size_t)n, &op) != 0) {
			snprintf(F.problem, sizeof(F.problem), "malformed OP (type %u)", type);
			return;
		}
		if (s->sub)
			s->sub->nops++;
		else if (F.nops < FAKE_MAX_OPS)
			F.ops[F.nops++] = op;
		memset(&d, 0, sizeof(d));
		d.reqid = op.reqid;
		if (first && s->mode == FAKE_CLOSE_ON_OP)
			return;
		if (first && s->mode == FAKE_GARBAGE_ON_OP) {
			first = false;
			fake_send(s->cfd, (const uint8_t *)"garbage!", 8);
			continue;
		}
		if (s->mode == FAKE_SILENT)
			continue;
		if (first && s->mode == FAKE_WRONG_REQID)
			d.reqid += 7;
		if (first && s->mode == FAKE_STATUS_ONCE) {
			d.status = RING_EMISMATCH;
			snprintf(d.text, sizeof(d.text),
				 "rank 0 called allgather, rank 1 called allreduce (fake)");
		} else {
			fake_execute(&op, s->arena, s->hello->arena_bytes, s->w.rank, s->w.size,
				     s->w.flags & PROTO_WELCOME_RS_INPLACE);
		}
		first = false;
		fake_send(s->cfd, buf, proto_encode_done(buf, sizeof(buf), &d));
	}
}

/* Serves one session to its end.  sub is NULL for the first session (whose
 * details go to F itself), else the record of a later one, which always
 * behaves (FAKE_OK). */
static void
fake_serve(int cfd, struct fake_sub *sub)
{
	struct fake_session s = { .cfd = cfd, .sub = sub, .afd = -1 };

	s.hello = sub ? &sub->hello : &F.hello;
	s.mode = sub ? FAKE_OK : F.mode;
	if (fake_hello(&s) && fake_welcome(&s))
		fake_ops(&s);
	if (s.arena)
		munmap(s.arena, s.hello->arena_bytes);
	if (s.afd >= 0)
		close(s.afd);
	close(cfd);
}

static void *
fake_accept_main(void *arg)
{
	struct pollfd p = { .fd = F.lfd, .events = POLLIN };
	int cfd;

	(void)arg;
	while (!F.stop && F.nsubs < FAKE_MAX_SUBS) {
		if (poll(&p, 1, 20) != 1)
			continue;
		cfd = accept(F.lfd, NULL, NULL);
		if (cfd < 0)
			continue;
		fake_serve(cfd, &F.subs[F.nsubs]);
		F.nsubs++;
	}
	return NULL;
}

static void *
fake_main(void *arg)
{
	int cfd;

	(void)arg;
	cfd = accept(F.lfd, NULL, NULL);
	if (cfd < 0)
		return NULL;
	F.accepting = pthread_create(&F.acceptor, NULL, fake_accept_main, NULL) == 0;
	fake_serve(cfd, NULL);
	/* A sub-communicator still open keeps its session (and us) going. */
	F.stop = true;
	if (F.accepting)
		pthread_join(F.acceptor, NULL);
	return NULL;
}

void
fake_start(int rank, int size, uint64_t piece, enum fake_mode mode)
{
	struct sockaddr_un sa;

	fake_scrub_env();
	memset(&F, 0, sizeof(F));
	F.rank = rank;
	F.size = size;
	F.piece = piece;
	F.mode = mode;
	snprintf(F.dir, sizeof(F.dir), "/tmp/ring-unit-XXXXXX");
	cr_assert_not_null(mkdtemp(F.dir));
	snprintf(F.path, sizeof(F.path), "%s/ringd.sock", F.dir);
	F.lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	cr_assert_geq(F.lfd, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", F.path);
	cr_assert_eq(bind(F.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(F.lfd, 4), 0);
	cr_assert_eq(pthread_create(&F.thread, NULL, fake_main, NULL), 0);
	F.running = true;
}

void
fake_stop(void)
{
	if (!F.running)
		return;
	pthread_join(F.thread, NULL);
	F.running = false;
	close(F.lfd);
	unlink(F.path);
	rmdir(F.dir);
	cr_assert_eq(F.problem[0], '\0', "fake ringd: %s", F.problem);
}

void
fake_op_counts(size_t from, char *out, size_t cap)
{
	size_t i, off = 0;

	out[0] = '\0';
	for (i = from; i < F.nops && off < cap; i++)
		off += (size_t)snprintf(
		    out + off, cap - off, "%s:%llu/%llu ", proto_coll_name(F.ops[i].coll),
		    (unsigned long long)F.ops[i].count, (unsigned long long)F.ops[i].fp_count);
}

/* local_size 0: what the environment says (nothing: one process). */
static ring_comm *
fake_open_as(size_t arena_bytes, int timeout_ms, int local_rank, int local_size)
{
	struct ring_options o;
	ring_comm *c = NULL;

	memset(&o, 0, sizeof(o));
	o.socket = F.path;
	o.job = "unit";
	o.timeout_ms = timeout_ms;
	o.arena_bytes = arena_bytes;
	o.local_rank = local_rank;
	o.local_size = local_size;
	cr_assert_eq(ring_open(&c, &o), 0, "%s", ring_last_error(NULL));
	return c;
}

ring_comm *
fake_open(size_t arena_bytes, int timeout_ms)
{
	return fake_open_as(arena_bytes, timeout_ms, 0, 0);
}

ring_comm *
fake_open_local(int local_rank, int local_size)
{
	ring_comm *c = fake_open_as(1 << 20, 5000, local_rank, local_size);

	cr_assert_eq(c->local_size, local_size);
	return c;
}
