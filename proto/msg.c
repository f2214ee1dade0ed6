/*
 * msg.c - the client protocol between libring and its local daemon: one message
 * per SOCK_SEQPACKET packet, a 12-byte header (magic, version, type, length of
 * the whole message) and a fixed body per type.  As with the peer frames, each
 * message has one canonical encoding: decoders check the header, the exact body
 * length, string limits and every field's range, and encoders refuse what the
 * decoder would refuse, so a bad value is caught on the side that made it.  Job
 * names and their wire ids are names.c's, which the peer frames check too.
 */
#include <string.h>

#include "proto.h"
#include "dtype.h"

#define VERSION_MAX	31	/* proto_welcome.version without NUL */

/* ---- header ---- */

/* Starts a message of the given type; the length is patched in by msg_finish. */
static void
msg_begin(struct pw *w, uint8_t *buf, size_t cap, uint16_t type)
{
	pw_init(w, buf, cap < PROTO_MSG_MAX ? cap : PROTO_MSG_MAX);
	pw_u32(w, PROTO_MSG_MAGIC);
	pw_u16(w, PROTO_VERSION);
	pw_u16(w, type);
	pw_u32(w, 0);
}

static int
msg_finish(struct pw *w)
{
	struct pw len;
	int n;

	if ((n = pw_done(w)) < 0)
		return n;
	pw_init(&len, w->p + 8, 4);
	pw_u32(&len, (uint32_t)n);
	return n;
}

int
proto_msg_peek(const uint8_t *buf, size_t len, uint16_t *type)
{
	struct pr r;
	uint32_t magic, length;
	uint16_t version, t;

	if (len < PROTO_MSG_HDR || len > PROTO_MSG_MAX)
		return RING_EPROTO;
	pr_init(&r, buf, len);
	magic = pr_u32(&r);
	version = pr_u16(&r);
	t = pr_u16(&r);
	length = pr_u32(&r);
	if (r.err || magic != PROTO_MSG_MAGIC || version != PROTO_VERSION || length != len)
		return RING_EPROTO;
	/* Unknown types pass: the dispatcher logs and ignores them. */
	if (type != NULL)
		*type = t;
	return 0;
}

/* Checks the header for the expected type and leaves r at the body. */
static int
msg_open(struct pr *r, const uint8_t *buf, size_t len, uint16_t want)
{
	uint16_t type;

	if (proto_msg_peek(buf, len, &type) != 0 || type != want)
		return RING_EPROTO;
	pr_init(r, buf, len);
	pr_bytes(r, NULL, PROTO_MSG_HDR);
	return 0;
}

/* ---- field checks ---- */

/* A count of ranks or processes: 1..PROTO_MAX_RANKS. */
static bool
size_ok(int32_t n)
{
	return n >= 1 && n <= PROTO_MAX_RANKS;
}

/* rank within a group of n */
static bool
rank_ok(int32_t rank, int32_t n)
{
	return rank >= 0 && rank < n;
}

/* ---- HELLO ---- */

static bool
hello_ok(const struct proto_hello *m)
{
	if (!proto_str_ok(m->job, sizeof(m->job)) || !proto_job_name_ok(m->job))
		return false;
	/* The launcher may give a rank, a size, both or neither (-1). */
	if (m->rank != -1 && !rank_ok(m->rank, PROTO_MAX_RANKS))
		return false;
	if (m->size != -1 && !size_ok(m->size))
		return false;
	if (m->rank != -1 && m->size != -1 && m->rank >= m->size)
		return false;
	if ((m->flags & ~PROTO_HELLO_ALL) != 0)
		return false;
	return size_ok(m->local_size) && rank_ok(m->local_rank, m->local_size);
}

int
proto_encode_hello(uint8_t *buf, size_t cap, const struct proto_hello *m)
{
	struct pw w;

	if (!hello_ok(m))
		return RING_EINVAL;
	msg_begin(&w, buf, cap, PROTO_M_HELLO);
	pw_str(&w, m->job, PROTO_JOB_MAX);
	pw_i32(&w, m->rank);
	pw_i32(&w, m->size);
	pw_i32(&w, m->local_rank);
	pw_i32(&w, m->local_size);
	pw_u32(&w, m->timeout_ms);
	pw_u32(&w, m->pid);
	pw_u64(&w, m->arena_bytes);
	pw_u32(&w, m->flags);
	return msg_finish(&w);
}

int
proto_decode_hello(const uint8_t *buf, size_t len, struct proto_hello *m)
{
	struct proto_hello t;
	struct pr r;

	if (msg_open(&r, buf, len, PROTO_M_HELLO) != 0)
		return RING_EPROTO;
	memset(&t, 0, sizeof(t));
	pr_str(&r, t.job, sizeof(t.job), PROTO_JOB_MAX);
	t.rank = pr_i32(&r);
	t.size = pr_i32(&r);
	t.local_rank = pr_i32(&r);
	t.local_size = pr_i32(&r);
	t.timeout_ms = pr_u32(&r);
	t.pid = pr_u32(&r);
	t.arena_bytes = pr_u64(&r);
	t.flags = pr_u32(&r);
	if (pr_done(&r) != 0 || !hello_ok(&t))
		return RING_EPROTO;
	*m = t;
	return 0;
}

/* ---- WELCOME ---- */

static bool
welcome_ok(const struct proto_welcome *m)
{
	if (!size_ok(m->size) || !rank_ok(m->rank, m->size))
		return false;
	if (!size_ok(m->local_size) || !rank_ok(m->local_rank, m->local_size))
		return false;
	if (!size_ok(m->nhosts) || !rank_ok(m->host_rank, m->nhosts))
		return false;
	/* libring divides operations by piece_bytes; job 0 is reserved for links. */
	if (m->job_id == 0 || m->piece_bytes == 0 ||
	    (m->flags & ~(PROTO_WELCOME_RS_INPLACE | PROTO_WELCOME_SHM | PROTO_WELCOME_PAGE)))
		return false;
	return proto_str_printable(m->version, sizeof(m->version));
}

int
proto_encode_welcome(uint8_t *buf, size_t cap, const struct proto_welcome *m)
{
	struct pw w;

	if (!welcome_ok(m))
		return RING_EINVAL;
	msg_begin(&w, buf, cap, PROTO_M_WELCOME);
	pw_i32(&w, m->rank);
	pw_i32(&w, m->size);
	pw_i32(&w, m->local_rank);
	pw_i32(&w, m->local_size);
	pw_i32(&w, m->host_rank);
	pw_i32(&w, m->nhosts);
	pw_u32(&w, m->job_id);
	pw_u32(&w, m->seg_bytes);
	pw_u64(&w, m->piece_bytes);
	pw_u32(&w, m->flags);
	pw_str(&w, m->version, VERSION_MAX);
	return msg_finish(&w);
}

int
proto_decode_welcome(const uint8_t *buf, size_t len, struct proto_welcome *m)
{
	struct proto_welcome t;
	struct pr r;

	if (msg_open(&r, buf, len, PROTO_M_WELCOME) != 0)
		return RING_EPROTO;
	memset(&t, 0, sizeof(t));
	t.rank = pr_i32(&r);
	t.size = pr_i32(&r);
	t.local_rank = pr_i32(&r);
	t.local_size = pr_i32(&r);
	t.host_rank = pr_i32(&r);
	t.nhosts = pr_i32(&r);
	t.job_id = pr_u32(&r);
	t.seg_bytes = pr_u32(&r);
	t.piece_bytes = pr_u64(&r);
	t.flags = pr_u32(&r);
	pr_str(&r, t.version, sizeof(t.version), VERSION_MAX);
	if (pr_done(&r) != 0 || !welcome_ok(&t))
		return RING_EPROTO;
	*m = t;
	return 0;
}

/* ---- ERROR ---- */

static bool
error_ok(const struct proto_error *m)
{
	return proto_code_is_error(m->code) && proto_str_ok(m->text, sizeof(m->text));
}

int
proto_encode_error(uint8_t *buf, size_t cap, const struct proto_error *m)
{
	struct pw w;

	if (!error_ok(m))
		return RING_EINVAL;
	msg_begin(&w, buf, cap, PROTO_M_ERROR);
	pw_i32(&w, m->code);
	pw_str(&w, m->text, PROTO_TEXT_MAX);
	return msg_finish(&w);
}

int
proto_decode_error(const uint8_t *buf, size_t len, struct proto_error *m)
{
	struct proto_error t;
	struct pr r;

	if (msg_open(&r, buf, len, PROTO_M_ERROR) != 0)
		return RING_EPROTO;
	memset(&t, 0, sizeof(t));
	t.code = pr_i32(&r);
	pr_str(&r, t.text, sizeof(t.text), PROTO_TEXT_MAX);
	if (pr_done(&r) != 0 || !error_ok(&t))
		return RING_EPROTO;
	*m = t;
	return 0;
}

/* ---- BYE: the header alone; the receiver checks it with proto_msg_peek ---- */

int
proto_encode_bye(uint8_t *buf, size_t cap)
{
	struct pw w;

	msg_begin(&w, buf, cap, PROTO_M_BYE);
	return msg_finish(&w);
}

/* ---- OP ---- */

static bool
op_ok(const struct proto_op *m)
{
	if (m->coll < 1 || m->coll > PROTO_COLL_MAX)
		return false;
	if (m->api != 0 && (m->api <= PROTO_COLL_MAX || proto_coll_base(m->api) != m->coll))
		return false;
	if (m->dtype >= RING_DTYPE_COUNT || m->redop >= RING_OP_COUNT)
		return false;
	if (m->ndim > PROTO_MAX_NDIM)
		return false;
	if ((m->flags & ~PROTO_OP_F_ALL) != 0 ||
	    ((m->flags & PROTO_OP_F_ABORT) &&
	     (m->coll == PROTO_COLL_SEND || m->coll == PROTO_COLL_RECV)) ||
	    ((m->flags & PROTO_OP_F_EXCHANGE) && m->coll != PROTO_COLL_SEND &&
	     m->coll != PROTO_COLL_RECV) ||
	    PROTO_OP_ALGO(m->flags) >= PROTO_ALGO_COUNT)
		return false;
	if (PROTO_OP_WIRE(m->flags) >= PROTO_WIRE_COUNT ||
	    (PROTO_OP_WIRE(m->flags) != PROTO_WIRE_F32 &&
	     !proto_wire_applies(m->coll, m->dtype, m->redop)))
		return false;
	return m->peer >= -1 && m->peer < PROTO_MAX_RANKS;
}

int
proto_encode_op(uint8_t *buf, size_t cap, const struct proto_op *m)
{
	struct pw w;

	if (!op_ok(m))
		return RING_EINVAL;
	msg_begin(&w, buf, cap, PROTO_M_OP);
	pw_u64(&w, m->reqid);
	pw_u8(&w, m->coll);
	pw_u8(&w, m->dtype);
	pw_u8(&w, m->redop);
	pw_u8(&w, m->ndim);
	pw_u8(&w, m->api);
	pw_bytes(&w, NULL, 3);	/* reserved */
	pw_i32(&w, m->peer);
	pw_u32(&w, m->comm);
	pw_u32(&w, m->timeout_ms);
	pw_u32(&w, m->flags);
	pw_u64(&w, m->count);
	pw_u64(&w, m->stride);
	pw_u64(&w, m->fp_count);
	pw_u32(&w, m->send_arena);
	pw_u32(&w, m->recv_arena);
	pw_u64(&w, m->send_off);
	pw_u64(&w, m->recv_off);
	pw_u64s(&w, m->shape, m->ndim);	/* only the dimensions in use travel */
	return msg_finish(&w);
}

int
proto_decode_op(const uint8_t *buf, size_t len, struct proto_op *m)
{
	static const uint8_t zero[3];
	uint8_t reserved[3];
	struct proto_op t;
	struct pr r;

	if (msg_open(&r, buf, len, PROTO_M_OP) != 0)
		return RING_EPROTO;
	memset(&t, 0, sizeof(t));
	t.reqid = pr_u64(&r);
	t.coll = pr_u8(&r);
	t.dtype = pr_u8(&r);
	t.redop = pr_u8(&r);
	t.ndim = pr_u8(&r);
	t.api = pr_u8(&r);
	pr_bytes(&r, reserved, sizeof(reserved));
	t.peer = pr_i32(&r);
	t.comm = pr_u32(&r);
	t.timeout_ms = pr_u32(&r);
	t.flags = pr_u32(&r);
	t.count = pr_u64(&r);
	t.stride = pr_u64(&r);
	t.fp_count = pr_u64(&r);
	t.send_arena = pr_u32(&r);
	t.recv_arena = pr_u32(&r);
	t.send_off = pr_u64(&r);
	t.recv_off = pr_u64(&r);
	pr_u64s(&r, t.shape, t.ndim, PROTO_MAX_NDIM);
	if (pr_done(&r) != 0 || !op_ok(&t) || memcmp(reserved, zero, sizeof(zero)) != 0)
		return RING_EPROTO;
	*m = t;
	return 0;
}

/* ---- DONE ---- */

static bool
done_ok(const struct proto_done *m)
{
	return proto_code_is_status(m->status) && proto_str_ok(m->text, sizeof(m->text));
}

int
proto_encode_done(uint8_t *buf, size_t cap, const struct proto_done *m)
{
	struct pw w;

	if (!done_ok(m))
		return RING_EINVAL;
	msg_begin(&w, buf, cap, PROTO_M_DONE);
	pw_u64(&w, m->reqid);
	pw_i32(&w, m->status);
	pw_str(&w, m->text, PROTO_TEXT_MAX);
	return msg_finish(&w);
}

int
proto_decode_done(const uint8_t *buf, size_t len, struct proto_done *m)
{
	struct proto_done t;
	struct pr r;

	if (msg_open(&r, buf, len, PROTO_M_DONE) != 0)
		return RING_EPROTO;
	memset(&t, 0, sizeof(t));
	t.reqid = pr_u64(&r);
	t.status = pr_i32(&r);
	pr_str(&r, t.text, sizeof(t.text), PROTO_TEXT_MAX);
	if (pr_done(&r) != 0 || !done_ok(&t))
		return RING_EPROTO;
	*m = t;
	return 0;
}

/* ---- SHRINK, REVOKE: the header alone ---- */

int
proto_encode_empty(uint8_t *buf, size_t cap, uint16_t type)
{
	struct pw w;

	msg_begin(&w, buf, cap, type);
	return msg_finish(&w);
}

/* ---- SHRINK_INFO ---- */

static bool
shrink_info_ok(const struct proto_shrink_info *m)
{
	uint32_t i, shown = m->nhosts < PROTO_SHRINK_HOSTS ? m->nhosts : PROTO_SHRINK_HOSTS;

	if (!proto_code_is_status(m->status) || !proto_str_ok(m->text, sizeof(m->text)))
		return false;
	if (m->failed != 0 && m->failed != RING_EPEER && m->failed != RING_EABORTED &&
	    m->failed != RING_EREVOKED)
		return false;
	if (m->status != 0)
		return true;
	if (m->world < 1 || m->world > PROTO_MAX_RANKS || m->nlost >= m->world ||
	    m->size != (int32_t)(m->world - m->nlost) || m->rank < 0 || m->rank >= m->size ||
	    m->nhosts > PROTO_MAX_RANKS)
		return false;
	for (i = 0; i < shown; i++)
		if (m->hosts[i] > PROTO_MAX_RANKS || (i > 0 && m->hosts[i] <= m->hosts[i - 1]))
			return false;
	return true;
}

int
proto_encode_shrink_info(uint8_t *buf, size_t cap, const struct proto_shrink_info *m)
{
	uint32_t shown = m->nhosts < PROTO_SHRINK_HOSTS ? m->nhosts : PROTO_SHRINK_HOSTS;
	struct pw w;

	if (!shrink_info_ok(m))
		return RING_EINVAL;
	msg_begin(&w, buf, cap, PROTO_M_SHRINK_INFO);
	pw_i32(&w, m->status);
	pw_i32(&w, m->failed);
	pw_i32(&w, m->rank);
	pw_i32(&w, m->size);
	pw_u32(&w, m->world);
	pw_u32(&w, m->gen);
	pw_u32(&w, m->nlost);
	pw_u64(&w, m->hash);
	pw_u32(&w, m->nhosts);
	pw_u32s(&w, m->hosts, shown);
	pw_str(&w, m->text, PROTO_TEXT_MAX);
	return msg_finish(&w);
}

int
proto_decode_shrink_info(const uint8_t *buf, size_t len, struct proto_shrink_info *m)
{
	struct proto_shrink_info t;
	struct pr r;

	if (msg_open(&r, buf, len, PROTO_M_SHRINK_INFO) != 0)
		return RING_EPROTO;
	memset(&t, 0, sizeof(t));
	t.status = pr_i32(&r);
	t.failed = pr_i32(&r);
	t.rank = pr_i32(&r);
	t.size = pr_i32(&r);
	t.world = pr_u32(&r);
	t.gen = pr_u32(&r);
	t.nlost = pr_u32(&r);
	t.hash = pr_u64(&r);
	t.nhosts = pr_u32(&r);
	pr_u32s(&r, t.hosts, t.nhosts < PROTO_SHRINK_HOSTS ? t.nhosts : PROTO_SHRINK_HOSTS,
		PROTO_SHRINK_HOSTS);
	pr_str(&r, t.text, sizeof(t.text), PROTO_TEXT_MAX);
	if (pr_done(&r) != 0 || !shrink_info_ok(&t))
		return RING_EPROTO;
	*m = t;
	return 0;
}

/* ---- ring_comm_grow: GROW and GROW_INFO ---- */

int
proto_encode_grow_ask(uint8_t *buf, size_t cap, const struct proto_grow_ask *m)
{
	struct pw w;

	if (!proto_job_name_ok(m->base) || m->add < 1 || m->add > PROTO_MAX_RANKS)
		return RING_EINVAL;
	msg_begin(&w, buf, cap, PROTO_M_GROW);
	pw_str(&w, m->base, PROTO_JOB_MAX);
	pw_u32(&w, m->add);
	return msg_finish(&w);
}

int
proto_decode_grow_ask(const uint8_t *buf, size_t len, struct proto_grow_ask *m)
{
	struct pr r;

	if (msg_open(&r, buf, len, PROTO_M_GROW) != 0)
		return RING_EPROTO;
	memset(m, 0, sizeof(*m));
	pr_str(&r, m->base, sizeof(m->base), PROTO_JOB_MAX);
	m->add = pr_u32(&r);
	if (pr_done(&r) != 0 || !proto_job_name_ok(m->base) || m->add < 1 ||
	    m->add > PROTO_MAX_RANKS)
		return RING_EPROTO;
	return 0;
}

/* An answer is a refusal (status, text), a count of newcomers so far, or an
 * offer; a newcomer's place, when given, is inside the offer's new ranks. */
static bool
grow_info_ok(const struct proto_grow_info *m)
{
	if (!proto_code_is_status(m->status) || !proto_str_ok(m->text, sizeof(m->text)) ||
	    m->came > PROTO_MAX_RANKS)
		return false;
	if (m->offer.nhosts == 0)
		return m->rank == -1;
	if (!proto_grow_ok(&m->offer))
		return false;
	if (m->rank == -1)
		return true;
	return m->rank >= (int32_t)m->offer.old && m->rank < (int32_t)m->offer.world &&
	       m->local_size >= 1 && m->local_size <= PROTO_JOIN_MAX && m->local_rank >= 0 &&
	       m->local_rank < m->local_size;
}

int
proto_encode_grow_info(uint8_t *buf, size_t cap, const struct proto_grow_info *m)
{
	struct pw w;

	if (!grow_info_ok(m))
		return RING_EINVAL;
	msg_begin(&w, buf, cap, PROTO_M_GROW_INFO);
	pw_i32(&w, m->status);
	pw_u32(&w, m->came);
	pw_i32(&w, m->rank);
	pw_i32(&w, m->local_rank);
	pw_i32(&w, m->local_size);
	pw_u32(&w, m->offer.nhosts != 0);
	if (m->offer.nhosts != 0)
		proto_grow_write(&w, &m->offer);
	pw_str(&w, m->text, PROTO_TEXT_MAX);
	return msg_finish(&w);
}

int
proto_decode_grow_info(const uint8_t *buf, size_t len, struct proto_grow_info *m)
{
	struct proto_grow_info t;
	struct pr r;
	uint32_t has;

	if (msg_open(&r, buf, len, PROTO_M_GROW_INFO) != 0)
		return RING_EPROTO;
	memset(&t, 0, sizeof(t));
	t.status = pr_i32(&r);
	t.came = pr_u32(&r);
	t.rank = pr_i32(&r);
	t.local_rank = pr_i32(&r);
	t.local_size = pr_i32(&r);
	has = pr_u32(&r);
	if (has > 1)
		return RING_EPROTO;
	if (has)
		proto_grow_read(&r, &t.offer);
	pr_str(&r, t.text, sizeof(t.text), PROTO_TEXT_MAX);
	if (pr_done(&r) != 0 || !grow_info_ok(&t) || (has && t.offer.nhosts == 0))
		return RING_EPROTO;
	*m = t;
	return 0;
}
