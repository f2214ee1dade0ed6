/*
 * frame.c - the peer protocol between daemons: the 48-byte frame header and the
 * payloads that have a structure (handshake hello, collective fingerprint, reject
 * and abort reasons, point-to-point RTS/CTS, a formation's JOIN and its
 * CONFIRM), plus the fingerprint's comparison and text form (the collectives'
 * names are names.c's).  Every payload has one
 * canonical encoding: decoders insist on exact lengths, zero reserved bytes and
 * in-range fields, so a payload that decodes re-encodes to the same bytes, and
 * each encoder refuses what its decoder would refuse.
 */
#include <stdio.h>
#include <string.h>

#include "proto.h"
#include "dtype.h"

/* Payload cap of the frames whose payload is a small structure. */
#define FRAME_CTL_MAX		2048
#define FRAME_JOIN_MAX		(96 + 4 * PROTO_JOIN_MAX)
#define FRAME_VIEW_MAX		(4 + 4 * PROTO_VIEW_MAX)
#define PEER_VERSION_MAX	31	/* proto_peer_hello.version without NUL */

void
proto_fp_of_op(struct proto_fp *fp, const struct proto_op *m)
{
	memset(fp, 0, sizeof(*fp));
	fp->coll = m->coll;
	fp->algo = (uint8_t)PROTO_OP_ALGO(m->flags);
	fp->api = m->api;
	fp->dtype = m->dtype;
	fp->redop = m->redop;
	fp->wire = (uint8_t)PROTO_OP_WIRE(m->flags);
	fp->root = proto_coll_rooted(PROTO_FP_API(m)) ? m->peer : -1;
	fp->count = m->fp_count ? m->fp_count : m->count;
}

/* ---- the frame header ---- */

void
proto_frame_encode(uint8_t out[PROTO_FRAME_HDR], const struct proto_frame *f)
{
	struct pw w;

	pw_init(&w, out, PROTO_FRAME_HDR);
	pw_u32(&w, PROTO_FRAME_MAGIC);
	pw_u16(&w, PROTO_VERSION);
	pw_u16(&w, f->type);
	pw_u32(&w, f->job);
	pw_u32(&w, f->aux);
	pw_u32(&w, f->epoch);
	pw_u32(&w, f->route);
	pw_u64(&w, f->seq);
	pw_u64(&w, f->offset);
	pw_u32(&w, f->length);
	pw_u32(&w, f->gen);
}

/*
 * The largest payload a frame of this type may announce, or -1 for a type that
 * does not exist.  The reader allocates or waits for this many bytes, so the cap
 * is what bounds a peer's claim on our memory.
 */
static int64_t
frame_type_max(int type, uint32_t max_payload)
{
	switch (type) {
	case PROTO_F_HEARTBEAT:
	case PROTO_F_CREDIT:
	case PROTO_F_RING:
	case PROTO_F_PING:
	case PROTO_F_PONG:
	case PROTO_F_LINKRATE:
		return 0;
	case PROTO_F_VIEW:
		return FRAME_VIEW_MAX;
	case PROTO_F_OPHDR:
		return PROTO_FP_LEN;
	case PROTO_F_HELLO:
	case PROTO_F_HELLO_ACK:
	case PROTO_F_HELLO_AUTH:
	case PROTO_F_REJECT:
	case PROTO_F_ABORT:
	case PROTO_F_REVOKE:
	case PROTO_F_P2P_RTS:
	case PROTO_F_P2P_CTS:
	case PROTO_F_EVICT:
	case PROTO_F_GROW:
		return FRAME_CTL_MAX;
	case PROTO_F_JOIN:
	case PROTO_F_LEAVE:
		return FRAME_JOIN_MAX;
	case PROTO_F_CONFIRM:
		return PROTO_CONFIRM_LEN;
	case PROTO_F_DATA:
	case PROTO_F_P2P_DATA:
		return max_payload < PROTO_FRAME_MAX_PAYLOAD ? max_payload :
		    PROTO_FRAME_MAX_PAYLOAD;
	default:
		return -1;
	}
}

int
proto_frame_decode(const uint8_t in[PROTO_FRAME_HDR], struct proto_frame *f,
		   uint32_t max_payload)
{
	struct pr r;
	uint32_t magic;
	uint16_t version;
	int64_t max;

	pr_init(&r, in, PROTO_FRAME_HDR);
	magic = pr_u32(&r);
	version = pr_u16(&r);
	/* Filled in even when refused, so the caller can log what arrived. */
	f->type = pr_u16(&r);
	f->job = pr_u32(&r);
	f->aux = pr_u32(&r);
	f->epoch = pr_u32(&r);
	f->route = pr_u32(&r);
	f->seq = pr_u64(&r);
	f->offset = pr_u64(&r);
	f->length = pr_u32(&r);
	f->gen = pr_u32(&r);
	if (r.err || magic != PROTO_FRAME_MAGIC || version != PROTO_VERSION)
		return RING_EPROTO;
	if ((max = frame_type_max(f->type, max_payload)) < 0)
		return RING_EPROTO;
	if (f->type == PROTO_F_OPHDR || f->type == PROTO_F_CONFIRM ? f->length != (uint32_t)max :
								     f->length > max)
		return RING_EPROTO;
	return 0;
}

const char *
proto_frame_type_name(int type)
{
	switch (type) {
	case PROTO_F_HELLO:
		return "hello";
	case PROTO_F_HELLO_ACK:
		return "hello_ack";
	case PROTO_F_HELLO_AUTH:
		return "hello_auth";
	case PROTO_F_REJECT:
		return "reject";
	case PROTO_F_HEARTBEAT:
		return "heartbeat";
	case PROTO_F_CREDIT:
		return "credit";
	case PROTO_F_OPHDR:
		return "ophdr";
	case PROTO_F_DATA:
		return "data";
	case PROTO_F_ABORT:
		return "abort";
	case PROTO_F_JOIN:
		return "join";
	case PROTO_F_RING:
		return "ring";
	case PROTO_F_EVICT:
		return "evict";
	case PROTO_F_VIEW:
		return "view";
	case PROTO_F_LEAVE:
		return "leave";
	case PROTO_F_REVOKE:
		return "revoke";
	case PROTO_F_CONFIRM:
		return "confirm";
	case PROTO_F_GROW:
		return "grow";
	case PROTO_F_P2P_RTS:
		return "p2p_rts";
	case PROTO_F_P2P_CTS:
		return "p2p_cts";
	case PROTO_F_P2P_DATA:
		return "p2p_data";
	case PROTO_F_PING:
		return "ping";
	case PROTO_F_PONG:
		return "pong";
	case PROTO_F_LINKRATE:
		return "linkrate";
	default:
		return "?";
	}
}

/* ---- handshake hello ---- */

static bool
peer_hello_ok(const struct proto_peer_hello *h)
{
	if (h->cluster[0] == '\0' || !proto_str_printable(h->cluster, sizeof(h->cluster)) ||
	    !proto_str_printable(h->version, sizeof(h->version)))
		return false;
	if (h->world < 1 || h->world > PROTO_MAX_RANKS)
		return false;
	return h->from_rank < h->world && h->to_rank < h->world && h->stream < PROTO_STREAMS_MAX;
}

int
proto_encode_peer_hello(uint8_t *buf, size_t cap, const struct proto_peer_hello *h)
{
	struct pw w;

	if (!peer_hello_ok(h))
		return RING_EINVAL;
	pw_init(&w, buf, cap);
	pw_str(&w, h->cluster, PROTO_NAME_MAX);
	pw_u32(&w, h->world);
	pw_u32(&w, h->from_rank);
	pw_u32(&w, h->to_rank);
	pw_u32(&w, h->flags);
	pw_bytes(&w, h->nonce, PROTO_NONCE_LEN);
	pw_bytes(&w, h->mac, PROTO_MAC_LEN);
	pw_str(&w, h->version, PEER_VERSION_MAX);
	pw_u64(&w, h->link_id);
	pw_u32(&w, h->stream);
	return pw_done(&w);
}

int
proto_decode_peer_hello(const uint8_t *buf, size_t len, struct proto_peer_hello *h)
{
	struct proto_peer_hello t;
	struct pr r;

	memset(&t, 0, sizeof(t));
	pr_init(&r, buf, len);
	pr_str(&r, t.cluster, sizeof(t.cluster), PROTO_NAME_MAX);
	t.world = pr_u32(&r);
	t.from_rank = pr_u32(&r);
	t.to_rank = pr_u32(&r);
	t.flags = pr_u32(&r);
	pr_bytes(&r, t.nonce, PROTO_NONCE_LEN);
	pr_bytes(&r, t.mac, PROTO_MAC_LEN);
	pr_str(&r, t.version, sizeof(t.version), PEER_VERSION_MAX);
	t.link_id = pr_u64(&r);
	t.stream = pr_u32(&r);
	if (pr_done(&r) != 0 || !peer_hello_ok(&t))
		return RING_EPROTO;
	*h = t;
	return 0;
}

/* ---- collective fingerprint (OPHDR payload) ---- */

static bool
fp_ok(const struct proto_fp *fp)
{
	if (fp->coll < 1 || fp->coll > PROTO_COLL_MAX)
		return false;
	if (fp->api != 0 && (fp->api <= PROTO_COLL_MAX || proto_coll_base(fp->api) != fp->coll))
		return false;
	if (fp->dtype >= RING_DTYPE_COUNT || fp->redop >= RING_OP_COUNT ||
	    fp->algo >= PROTO_ALGO_COUNT || fp->wire >= PROTO_WIRE_COUNT ||
	    (fp->wire != PROTO_WIRE_F32 && !proto_wire_applies(fp->coll, fp->dtype, fp->redop)))
		return false;
	return fp->root >= -1 && fp->root < PROTO_MAX_RANKS;
}

int
proto_encode_fp(uint8_t *buf, size_t cap, const struct proto_fp *fp)
{
	struct pw w;

	if (!fp_ok(fp))
		return RING_EINVAL;
	pw_init(&w, buf, cap);
	pw_u8(&w, fp->coll);
	pw_u8(&w, fp->dtype);
	pw_u8(&w, fp->redop);
	pw_u8(&w, fp->api);
	pw_i32(&w, fp->root);
	pw_u64(&w, fp->count);
	pw_u8(&w, fp->algo);
	pw_u8(&w, fp->wire);
	pw_bytes(&w, NULL, 6); /* reserved */
	return pw_done(&w);
}

int
proto_decode_fp(const uint8_t *buf, size_t len, struct proto_fp *fp)
{
	struct proto_fp t;
	uint8_t reserved[6];
	static const uint8_t zero[6];
	struct pr r;

	memset(&t, 0, sizeof(t));
	pr_init(&r, buf, len);
	t.coll = pr_u8(&r);
	t.dtype = pr_u8(&r);
	t.redop = pr_u8(&r);
	t.api = pr_u8(&r);
	t.root = pr_i32(&r);
	t.count = pr_u64(&r);
	t.algo = pr_u8(&r);
	t.wire = pr_u8(&r);
	pr_bytes(&r, reserved, sizeof(reserved));
	/* Reserved bytes must be zero so that a later version can give them a
	 * meaning without an old peer misreading them. */
	if (pr_done(&r) != 0 || memcmp(reserved, zero, sizeof(zero)) != 0 ||
	    !fp_ok(&t))
		return RING_EPROTO;
	t.seq = 0;	/* it travels in the frame header */
	*fp = t;
	return 0;
}

bool
proto_fp_equal(const struct proto_fp *a, const struct proto_fp *b)
{
	return a->coll == b->coll && a->api == b->api && a->dtype == b->dtype &&
	       a->redop == b->redop && a->algo == b->algo && a->wire == b->wire &&
	       a->root == b->root && a->count == b->count && a->seq == b->seq;
}

/*
 * "allreduce(float32, count=1024, sum) #7", "broadcast(int32, count=8, root=2) #3",
 * "barrier() #9".  The reduce op is shown where it matters and the root for
 * broadcast; either is also shown wherever it is set unexpectedly, and so is a
 * barrier's count, so that two fingerprints that differ never print alike (the
 * dtype of a barrier means nothing and is left out).  The API collective is
 * named, not the algorithm it runs as: "reduce(float32, count=8, sum, root=0)";
 * the -v ones show the hash of their counts, "alltoallv(int32, counts#...)".
 */
char *
proto_fp_format(const struct proto_fp *fp, char *buf, size_t cap)
{
	bool reduces = fp->coll == PROTO_COLL_ALLREDUCE ||
	    fp->coll == PROTO_COLL_REDUCE_SCATTER;
	const char *name = proto_coll_name(PROTO_FP_API(fp));
	char args[128];
	size_t n = 0;

	args[0] = '\0';
	if (fp->api == PROTO_COLL_ALLGATHERV || fp->api == PROTO_COLL_ALLTOALLV) {
		if (cap > 0)
			snprintf(buf, cap, "%s(%s, counts#%016llx) #%llu", name,
			    proto_dtype_name(fp->dtype), (unsigned long long)fp->count,
			    (unsigned long long)fp->seq);
		return buf;
	}
	if (fp->count & PROTO_FP_GROUP) {
		if (cap > 0)
			snprintf(buf, cap, "%s group of %u (%s, %s, hash %012llx) #%llu",
			    proto_coll_name(fp->coll), PROTO_FP_GROUP_N(fp->count),
			    proto_dtype_name(fp->dtype), proto_op_name(fp->redop),
			    (unsigned long long)PROTO_FP_GROUP_HASH(fp->count),
			    (unsigned long long)fp->seq);
		return buf;
	}
	if (fp->coll != PROTO_COLL_BARRIER || fp->api != 0)
		n += snprintf(args + n, sizeof(args) - n, "%s, count=%llu",
		    proto_dtype_name(fp->dtype), (unsigned long long)fp->count);
	else if (fp->count != 0)
		n += snprintf(args + n, sizeof(args) - n, "count=%llu",
		    (unsigned long long)fp->count);
	if (reduces || fp->redop != 0)
		n += snprintf(args + n, sizeof(args) - n, "%s%s", n > 0 ? ", " : "",
		    proto_op_name(fp->redop));
	if (proto_coll_rooted(PROTO_FP_API(fp)) || fp->root != -1)
		n += snprintf(args + n, sizeof(args) - n, "%sroot=%d", n > 0 ? ", " : "",
			      (int)fp->root);
	if (fp->algo != PROTO_ALGO_AUTO && n < sizeof(args))
		n += snprintf(args + n, sizeof(args) - n, "%salgo=%s", n > 0 ? ", " : "",
			      proto_algo_name(fp->algo));
	if (fp->wire != PROTO_WIRE_F32 && n < sizeof(args))
		snprintf(args + n, sizeof(args) - n, "%swire=%s", n > 0 ? ", " : "",
			 proto_wire_name(fp->wire));
	if (cap > 0)
		snprintf(buf, cap, "%s(%s) #%llu", name, args,
		    (unsigned long long)fp->seq);
	return buf;
}

/* ---- VIEW ---- */

int
proto_encode_view(uint8_t *buf, size_t cap, const uint32_t *inc, uint32_t n)
{
	struct pw w;
	uint32_t i;

	if (n == 0 || n > PROTO_VIEW_MAX)
		return RING_EINVAL;
	pw_init(&w, buf, cap);
	pw_u32(&w, n);
	for (i = 0; i < n; i++)
		pw_u32(&w, inc[i]);
	return pw_done(&w);
}

int
proto_decode_view(const uint8_t *buf, size_t len, struct proto_view *v)
{
	struct pr r;
	uint32_t i;

	pr_init(&r, buf, len);
	v->n = pr_u32(&r);
	if (v->n == 0 || v->n > PROTO_VIEW_MAX)
		return RING_EPROTO;
	for (i = 0; i < v->n; i++)
		v->inc[i] = pr_u32(&r);
	return pr_done(&r) != 0 ? RING_EPROTO : 0;
}

uint64_t
proto_view_digest(const uint32_t *inc, uint32_t n)
{
	uint64_t h = 1469598103934665603ull;	/* FNV-1a */
	bool any = false;
	uint32_t i;

	for (i = 0; i < n; i++) {
		any |= inc[i] != 0;
		for (int b = 0; b < 4; b++) {
			h ^= (inc[i] >> (8 * b)) & 0xffu;
			h *= 1099511628211ull;
		}
	}
	return any ? (h == 0 ? 1 : h) : 0;
}

/* ---- REJECT / ABORT reason ---- */

int
proto_encode_reason(uint8_t *buf, size_t cap, int32_t code, const char *text)
{
	struct pw w;

	if (!proto_code_is_error(code))
		return RING_EINVAL;
	pw_init(&w, buf, cap);
	pw_i32(&w, code);
	pw_str(&w, text, PROTO_TEXT_MAX);
	return pw_done(&w);
}

int
proto_decode_reason(const uint8_t *buf, size_t len, int32_t *code, char *text, size_t cap)
{
	char t[PROTO_TEXT_MAX + 1];
	int32_t c;
	struct pr r;

	pr_init(&r, buf, len);
	c = pr_i32(&r);
	pr_str(&r, t, sizeof(t), PROTO_TEXT_MAX);
	if (pr_done(&r) != 0 || !proto_code_is_error(c))
		return RING_EPROTO;
	*code = c;
	/* The caller's buffer may be smaller: a reason is for humans, truncate it
	 * (between characters), and a peer's bytes become text ringctl and the
	 * logs can carry. */
	if (text != NULL && cap > 0)
		proto_text_clean(text, cap, t);
	return 0;
}

/* The length of the UTF-8 character at s (RFC 3629: no overlong form, no
 * surrogate, nothing above U+10FFFF), or 0 when the bytes there are none. */
static size_t
utf8_char_len(const unsigned char *s)
{
	size_t n, i;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2, cp = s[0] & 0x1fu;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3, cp = s[0] & 0x0fu;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4, cp = s[0] & 0x07u;
	else
		return 0;
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xc0u) != 0x80u)
			return 0; /* a NUL ends it here too */
		cp = cp << 6 | (s[i] & 0x3fu);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

char *
proto_text_clean(char *out, size_t cap, const char *in)
{
	const unsigned char *s = (const unsigned char *)in;
	size_t o = 0, n;

	if (cap == 0)
		return out;
	while (*s != '\0') {
		n = utf8_char_len(s);
		if (n == 0 || (n == 1 && (*s < 0x20 || *s == 0x7f))) {
			n = 1;
			if (o + 1 >= cap)
				break;
			out[o++] = '?';
		} else {
			if (o + n >= cap)
				break;
			memcpy(out + o, s, n);
			o += n;
		}
		s += n;
	}
	out[o] = '\0';
	return out;
}

/* ---- point-to-point rendezvous ---- */

static bool
rts_ok(const struct proto_rts *m)
{
	return m->src < PROTO_MAX_RANKS && m->dst < PROTO_MAX_RANKS &&
	    m->dtype < RING_DTYPE_COUNT && m->ndim <= PROTO_MAX_NDIM;
}

int
proto_encode_rts(uint8_t *buf, size_t cap, const struct proto_rts *m)
{
	struct pw w;

	if (!rts_ok(m))
		return RING_EINVAL;
	pw_init(&w, buf, cap);
	pw_u32(&w, m->src);
	pw_u32(&w, m->dst);
	pw_u32(&w, m->comm);
	pw_u8(&w, m->dtype);
	pw_u8(&w, m->ndim);
	pw_u64(&w, m->bytes);
	pw_u64s(&w, m->shape, m->ndim);	/* only the dimensions in use travel */
	return pw_done(&w);
}

int
proto_decode_rts(const uint8_t *buf, size_t len, struct proto_rts *m)
{
	struct proto_rts t;
	struct pr r;

	memset(&t, 0, sizeof(t));
	pr_init(&r, buf, len);
	t.src = pr_u32(&r);
	t.dst = pr_u32(&r);
	t.comm = pr_u32(&r);
	t.dtype = pr_u8(&r);
	t.ndim = pr_u8(&r);
	t.bytes = pr_u64(&r);
	pr_u64s(&r, t.shape, t.ndim, PROTO_MAX_NDIM);
	if (pr_done(&r) != 0 || !rts_ok(&t))
		return RING_EPROTO;
	*m = t;
	return 0;
}

static bool
cts_ok(const struct proto_cts *m)
{
	return m->src < PROTO_MAX_RANKS && m->dst < PROTO_MAX_RANKS &&
	    proto_code_is_status(m->status) && proto_str_ok(m->text, sizeof(m->text));
}

int
proto_encode_cts(uint8_t *buf, size_t cap, const struct proto_cts *m)
{
	struct pw w;

	if (!cts_ok(m))
		return RING_EINVAL;
	pw_init(&w, buf, cap);
	pw_u32(&w, m->src);
	pw_u32(&w, m->dst);
	pw_i32(&w, m->status);
	pw_str(&w, m->text, PROTO_TEXT_MAX);
	return pw_done(&w);
}

int
proto_decode_cts(const uint8_t *buf, size_t len, struct proto_cts *m)
{
	struct proto_cts t;
	struct pr r;

	memset(&t, 0, sizeof(t));
	pr_init(&r, buf, len);
	t.src = pr_u32(&r);
	t.dst = pr_u32(&r);
	t.status = pr_i32(&r);
	pr_str(&r, t.text, sizeof(t.text), PROTO_TEXT_MAX);
	if (pr_done(&r) != 0 || !cts_ok(&t))
		return RING_EPROTO;
	*m = t;
	return 0;
}

/* ---- a host's part of a job (JOIN, LEAVE) ---- */

static bool
join_ok(const struct proto_join *m)
{
	uint32_t i;

	if (!proto_job_name_ok(m->job) || m->nranks > PROTO_JOIN_MAX || m->world < 1 ||
	    m->world > PROTO_MAX_RANKS || m->host >= PROTO_MAX_RANKS)
		return false;
	for (i = 0; i < m->nranks; i++)
		if (m->ranks[i] >= m->world)
			return false;
	return true;
}

int
proto_encode_join(uint8_t *buf, size_t cap, const struct proto_join *m)
{
	struct pw w;

	if (!join_ok(m))
		return RING_EINVAL;
	pw_init(&w, buf, cap);
	pw_str(&w, m->job, PROTO_JOB_MAX);
	pw_u32(&w, m->world);
	pw_u32(&w, m->host);
	pw_u32(&w, m->gen);
	pw_u32(&w, m->nranks);
	pw_u32s(&w, m->ranks, m->nranks);
	pw_u32(&w, m->hop_us);
	pw_u32(&w, m->link_mbps);
	return pw_done(&w);
}

int
proto_decode_join(const uint8_t *buf, size_t len, struct proto_join *m)
{
	struct pr r;

	memset(m, 0, sizeof(*m));
	pr_init(&r, buf, len);
	pr_str(&r, m->job, sizeof(m->job), PROTO_JOB_MAX);
	m->world = pr_u32(&r);
	m->host = pr_u32(&r);
	m->gen = pr_u32(&r);
	m->nranks = pr_u32(&r);
	pr_u32s(&r, m->ranks, m->nranks, PROTO_JOIN_MAX);
	m->hop_us = pr_u32(&r);
	m->link_mbps = pr_u32(&r);
	if (pr_done(&r) != 0 || !join_ok(m))
		return RING_EPROTO;
	return 0;
}

/* ---- a formation's confirmation ---- */

static bool
confirm_ok(const struct proto_confirm *m)
{
	return m->claim != 0 && m->nhosts >= 2 && m->nhosts <= PROTO_MAX_RANKS;
}

int
proto_encode_confirm(uint8_t *buf, size_t cap, const struct proto_confirm *m)
{
	struct pw w;

	if (!confirm_ok(m))
		return RING_EINVAL;
	pw_init(&w, buf, cap);
	pw_u32(&w, m->claim);
	pw_u32(&w, m->nhosts);
	pw_u64(&w, m->digest);
	return pw_done(&w);
}

int
proto_decode_confirm(const uint8_t *buf, size_t len, struct proto_confirm *m)
{
	struct pr r;

	memset(m, 0, sizeof(*m));
	pr_init(&r, buf, len);
	m->claim = pr_u32(&r);
	m->nhosts = pr_u32(&r);
	m->digest = pr_u64(&r);
	if (pr_done(&r) != 0 || !confirm_ok(m))
		return RING_EPROTO;
	return 0;
}

uint64_t
proto_confirm_digest(uint64_t h, uint32_t v)
{
	int i;

	for (i = 0; i < 4; i++) {
		h ^= (v >> (8 * i)) & 0xffu;
		h *= 0x100000001b3ull;
	}
	return h;
}
