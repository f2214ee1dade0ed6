/*
 * proto.h - everything that crosses a process boundary in ringd: the peer frames
 * between daemons, the client messages between libring and its daemon, the
 * collective fingerprint and the arena control page.  ringd, libring and ringctl
 * all compile this module, so the two sides of every boundary share one encoder
 * and one decoder.  All integers on the wire are fixed-width little-endian.  Every
 * decoder checks magic, version, exact lengths against limits and enum ranges, and
 * returns RING_EPROTO for anything malformed without touching memory beyond `len`.
 *
 * Message and frame types are numbered in blocks and a number is never reused.
 */
#ifndef PROTO_PROTO_H
#define PROTO_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#include "ring_types.h"

/* 2: OP carries flags; 3: job frames carry the formation generation, LEAVE
 * the ranks that stay; 4: OP and the fingerprint carry the API collective; 5:
 * PROTO_OP_F_EXCHANGE, and RTS's comm is the matching context; 6: OP and the
 * fingerprint carry the algorithm asked for (RING_ALGO); 7: JOIN carries the
 * cost model's inputs; 8: REVOKE frames, REVOKE and SHRINK messages, HELLO
 * carries flags; 9: EVICT and VIEW frames (membership); 10: OP and the
 * fingerprint carry the wire format, and DATA frames of a compressed operation
 * carry 2-byte elements (PROTO_OP_F_WIRE); 11: HELLO carries the link's id and
 * its stream (a link of several TCP connections); 12: an RTS carries its
 * message's number, a CTS with aux 1 says the other side gave up, EVICT is a
 * census of any incarnation (gen) and carries its asker's key, SHRINK_INFO
 * carries what failed the formation, LEAVE's aux says the ring broke under
 * it; 13: the local hop's `looking` word (the doorbell is rung only while the
 * daemon sleeps), and the arena's control page without the progress counters
 * no one read; 14: the job page (WELCOME's PROTO_WELCOME_PAGE and its memfd
 * beside the doorbell, HELLO's PROTO_HELLO_NOFAST, struct proto_page); 15:
 * CONFIRM frames, a formation's agreement round (a host forms only once every
 * member host has confirmed the same claims), and a LEAVE's offset names the
 * formation its host confirmed; 16: an EVICT's yes with its veto bit set says
 * the host holds the incarnation already; 17: LINKRATE frames, each host's
 * achieved rate on its links told round the ring, the algorithm 2l (the
 * two-level all-reduce), GROW frames and GROW and GROW_INFO messages, HELLO's
 * PROTO_HELLO_JOIN (ring_comm_grow) */
#define PROTO_VERSION 17

/* ---- limits shared by both sides ---- */
#define PROTO_JOB_MAX		63	/* bytes of a job name, without NUL */
#define PROTO_NAME_MAX		63	/* cluster name */
#define PROTO_TEXT_MAX		1023	/* an error message */
#define PROTO_MSG_MAX		4096	/* one client message (SOCK_SEQPACKET packet) */
#define PROTO_MAX_NDIM		RING_MAX_NDIM
#define PROTO_MAX_RANKS		65535	/* global ranks and hosts fit in 16 bits */
#define PROTO_FRAME_HDR		48	/* bytes of a peer frame header */
#define PROTO_FRAME_MAX_PAYLOAD	(16u << 20)	/* hard cap; segments are smaller */
#define PROTO_NONCE_LEN		32
#define PROTO_MAC_LEN		32

/* ---- bounded little-endian writer and reader ----
 * Errors are sticky: after the first overrun every call is a no-op and err is set,
 * so an encoder/decoder checks once at the end. */
struct pw {
	uint8_t *p;		/* output buffer */
	size_t cap;		/* its capacity */
	size_t off;		/* bytes written so far */
	int err;		/* nonzero once anything did not fit */
};
struct pr {
	const uint8_t *p;	/* input buffer */
	size_t len;		/* its length */
	size_t off;		/* bytes consumed so far */
	int err;		/* nonzero once a read ran past len or a check failed */
};
void pw_init(struct pw *w, void *buf, size_t cap);
void pw_u8(struct pw *w, uint8_t v);
void pw_u16(struct pw *w, uint16_t v);
void pw_u32(struct pw *w, uint32_t v);
void pw_u64(struct pw *w, uint64_t v);
void pw_i32(struct pw *w, int32_t v);
void pw_u32s(struct pw *w, const uint32_t *v, size_t n);	/* arrays: n elements */
void pw_u64s(struct pw *w, const uint64_t *v, size_t n);
void pw_bytes(struct pw *w, const void *b, size_t n);
void pw_str(struct pw *w, const char *s, size_t max);	/* u16 length + bytes */
void pr_init(struct pr *r, const void *buf, size_t len);
uint8_t pr_u8(struct pr *r);
uint16_t pr_u16(struct pr *r);
uint32_t pr_u32(struct pr *r);
uint64_t pr_u64(struct pr *r);
int32_t pr_i32(struct pr *r);
/* n elements into v; fails when n > cap (n came off the wire). */
void pr_u32s(struct pr *r, uint32_t *v, size_t n, size_t cap);
void pr_u64s(struct pr *r, uint64_t *v, size_t n, size_t cap);
void pr_bytes(struct pr *r, void *b, size_t n);
/* Reads a u16-length string into out (cap bytes incl. NUL); fails when it is longer
 * than max, does not fit, or holds a NUL byte. */
void pr_str(struct pr *r, char *out, size_t cap, size_t max);
/* Finish an encoder: the length written, or RING_EINVAL when it did not fit. */
int pw_done(const struct pw *w);
/* Finish a decoder: 0 when every byte was consumed and no read or check failed,
 * else RING_EPROTO. */
int pr_done(const struct pr *r);

/* Field checks that encoders (refusing with RING_EINVAL) and decoders (refusing
 * with RING_EPROTO) share, so both sides of a boundary refuse alike. */
bool proto_str_ok(const char *s, size_t size);	/* NUL within size bytes */
bool proto_str_printable(const char *s, size_t size);	/* and printable ASCII: it is logged */
bool proto_code_is_error(int32_t code);		/* one of the RING_E* codes */
bool proto_code_is_status(int32_t code);	/* 0 or a RING_E* code */

/* =================================================================== */
/* Collectives and their fingerprint                                   */
/* =================================================================== */
enum proto_coll {
	PROTO_COLL_ALLREDUCE = 1,
	PROTO_COLL_ALLGATHER = 2,
	PROTO_COLL_REDUCE_SCATTER = 3,
	PROTO_COLL_BROADCAST = 4,
	PROTO_COLL_BARRIER = 5,
	PROTO_COLL_SEND = 6,
	PROTO_COLL_RECV = 7,
	PROTO_COLL_MAX = 7,	/* the daemon's algorithms end here */
	/* The collectives of the API that ringd runs as one of the above (their
	 * base): they travel as the fingerprint's `api`, so that a rank calling
	 * one and a rank calling another never agree, and ringctl, the logs
	 * and the metrics name them. */
	PROTO_COLL_REDUCE = 8,		/* allreduce whose result only the root keeps */
	PROTO_COLL_GATHER = 9,		/* allgather whose result only the root keeps */
	PROTO_COLL_SCATTER = 10,	/* broadcast of the root's blocks, each kept by one */
	PROTO_COLL_ALLGATHERV = 11,	/* allgather of blocks padded to the largest */
	PROTO_COLL_ALLTOALL = 12,	/* a barrier that checks the fingerprint, then
					 * sends and receives (libring) */
	PROTO_COLL_ALLTOALLV = 13,
	PROTO_API_MAX = 13
};
/* "allreduce", ..., "alltoallv"; "?" when out of range (1..PROTO_API_MAX). */
const char *proto_coll_name(int coll);
/* The algorithm an API collective runs as (itself for 1..PROTO_COLL_MAX); 0
 * when out of range. */
int proto_coll_base(int api);
/* Whether the API collective has a root (the OP's peer). */
bool proto_coll_rooted(int api);

/* The algorithm a rank asks for (RING_ALGO, ring_options.algo): the daemon's
 * choice, the ring's, or recursive doubling's where the daemon has such a
 * plan for the operation (the latency path: small all-reduces and barriers),
 * the ring's elsewhere.  Part of the fingerprint, so that ranks asking for
 * different ones get RING_EMISMATCH instead of plans that do not meet. */
enum proto_algo {
	PROTO_ALGO_AUTO = 0,
	PROTO_ALGO_RING = 1,
	PROTO_ALGO_RD = 2,
	PROTO_ALGO_2L = 3, /* the two-level all-reduce where the hosts form groups */
	PROTO_ALGO_COUNT
};
const char *proto_algo_name(int algo); /* "auto", "ring", "rd", "2l" */
int proto_algo_parse(const char *s);   /* an enum proto_algo, or -1 */

/* What every rank must agree on for one collective; compared hop by hop. */
struct proto_fp {
	uint8_t coll;		/* enum proto_coll: the algorithm */
	uint8_t algo;		/* enum proto_algo */
	uint8_t api;		/* the API collective when not coll itself, else 0 */
	uint8_t dtype;		/* enum ring_dtype */
	uint8_t redop;		/* enum ring_op (0 where none) */
	uint8_t wire;		/* enum proto_wire (dtype.h): how its float32
				 * data travels */
	int32_t root;		/* root of broadcast and the rooted API ones, else -1 */
	uint64_t count;		/* elements per rank, as the API counts them */
	uint64_t seq;		/* the job's collective sequence number */
};
#define PROTO_FP_LEN 24
/* A fingerprint count with this bit set is no element count (those stay below
 * 2^63): libring packed the small all-reduces of a group (ring_group_end) into
 * one, and the count names the group instead, so ranks that grouped different
 * all-reduces that happen to pack to the same total still disagree: bits 48-62
 * the number of all-reduces, bits 0-47 a hash of their counts in call order. */
#define PROTO_FP_GROUP		(1ull << 63)
#define PROTO_FP_GROUP_N(c)	((unsigned)(((c) >> 48) & 0x7fffu))
#define PROTO_FP_GROUP_HASH(c)	((c) & 0xffffffffffffull)
bool proto_fp_equal(const struct proto_fp *a, const struct proto_fp *b);
/* The collective a rank asked for (api, else coll). */
#define PROTO_FP_API(fp)	((fp)->api ? (fp)->api : (fp)->coll)
/* "allreduce(float32, count=1024, sum) #7" into buf; returns buf. */
char *proto_fp_format(const struct proto_fp *fp, char *buf, size_t cap);

/* =================================================================== */
/* Peer frames (daemon <-> daemon, over a link)                        */
/* =================================================================== */
#define PROTO_FRAME_MAGIC	0x504e4752u	/* "RGNP" little-endian on the wire */

enum proto_frame_type {
	/* 1..7: link handshake */
	PROTO_F_HELLO = 1,      /* connector -> acceptor: struct proto_peer_hello */
	PROTO_F_HELLO_ACK = 2,  /* acceptor -> connector: struct proto_peer_hello */
	PROTO_F_REJECT = 3,     /* either way: a reason string, then close */
	PROTO_F_HELLO_AUTH = 4, /* connector -> acceptor, with a cluster secret only:
				 * struct proto_peer_hello whose mac is the connector's
				 * proof over both nonces (after HELLO_ACK's) */
	/* 8..15: link upkeep */
	PROTO_F_HEARTBEAT = 8, /* no payload; offset = sender's monotonic ms (echo for rtt) */
	PROTO_F_CREDIT = 9,    /* job's flow control: offset = cumulative bytes granted */
	PROTO_F_RING = 10,     /* goes round: aux 0 = is the ring whole? (offset = highest
				 * epoch seen), aux 1 = it is, epoch = offset */
	PROTO_F_EVICT = 11,    /* membership's census (ringd/census.c): aux 0 going
				 * round, 1 home; seq = the host asked about, gen =
				 * the incarnation asked about, offset = the
				 * census's number, route (asker, asker); payload:
				 * the asker's u64 key, then three bitmaps of the
				 * hosts: passed, said yes, vetoed (yes and veto:
				 * held it already) */
	PROTO_F_VIEW = 12,     /* the sender's membership view: struct proto_view */
	/* 16..31: collectives, always next-ward; seq = job's sequence number */
	PROTO_F_OPHDR = 16,   /* first frame of an operation: struct proto_fp */
	PROTO_F_DATA = 17,    /* aux = step, offset = byte offset within the step */
	PROTO_F_ABORT = 18,   /* the op failed: i32 code + reason string; forwarded round */
	PROTO_F_JOIN = 19,    /* struct proto_join: a host's ranks of a job, sent round */
	PROTO_F_LEAVE = 20,   /* struct proto_join (no ranks): the host's clients left;
			      * aux PROTO_LEAVE_BROKE: the ring broke under the
			      * formation there, its clients are still there;
			      * offset: the digest of the formation the host
			      * confirmed on the claim (struct proto_confirm),
			      * 0: none */
	PROTO_F_REVOKE = 21,  /* a rank revoked the job's formation (gen): i32 code +
				 * reason; straight to each of its hosts, route =
				 * (origin, that host), never passed on round */
	PROTO_F_GROW = 23,    /* struct proto_grow: a grow's offer, from the host
				 * of the growing job's rank 0, once round the
				 * ring (route (origin, origin)) */
	PROTO_F_CONFIRM = 22, /* struct proto_confirm: the sender holds the
				 * formation gen complete on these claims; goes
				 * as a JOIN goes (round, and straight while the
				 * ring is broken) */
	/* 32..47: point-to-point; seq = message id (the sender's), offset (RTS,
	 * CTS) = the message's number in its pair of ranks, counted from 1 per
	 * formation: the nth send from src to dst meets the nth recv */
	PROTO_F_P2P_RTS = 32,  /* struct proto_rts: a send is waiting */
	PROTO_F_P2P_CTS = 33,  /* struct proto_cts: the recv is posted (or refused);
				 * aux 1: one side gave up on the message (status
				 * < 0 and why), sender to receiver or receiver
				 * answering the RTS: the other side fails too */
	PROTO_F_P2P_DATA = 34, /* payload bytes at offset */
	/* 48..63: diagnostics (ringctl ping); no payload.  seq = the prober's probe
	 * id, offset = its monotonic us when sent (echoed, for the logs). */
	PROTO_F_PING = 48,     /* aux 0: answer with PONG on the same link (route 0);
				 * aux 1: goes round the ring, route = (origin, origin),
				 * only next-ward; the origin's round trip */
	PROTO_F_PONG = 49,     /* a link PING's answer: its seq and offset, aux 0 */
	PROTO_F_LINKRATE = 50, /* goes round next-ward, route = (origin, origin):
				* the origin's achieved rate to host aux, in
				* bytes/s over busy time (offset), with the
				* link's heartbeat RTT in us (seq) */
	PROTO_F_MAX = 50
};

/* The fixed header of every frame; `length` payload bytes follow it.  Wire order:
 * magic u32, version u16, type u16, job u32, aux u32, epoch u32, route u32,
 * seq u64, offset u64, length u32, gen u32. */
struct proto_frame {
	uint16_t type;		/* enum proto_frame_type */
	uint32_t job;		/* job id (0 for link frames) */
	uint32_t aux;		/* type-specific (step) */
	uint32_t epoch;		/* ring epoch the frame belongs to */
	uint32_t route;		/* PROTO_ROUTE(src_host, dst_host): daemons that are
				 * not dst pass the frame on; 0 for link frames */
	uint64_t seq;		/* sequence number / message id */
	uint64_t offset;	/* type-specific (offset, credit, timestamp) */
	uint32_t length;	/* payload bytes after the header */
	uint32_t gen;		/* job frames: the generation of the job's formation
				 * they belong to (frames of an older one are
				 * dropped); 0 elsewhere */
};
/* Generations are serial numbers (RFC 1982) that wrap after 2^32 formations:
 * a is later than b when a - b, as a signed 32-bit difference, is positive.
 * 0 is never a formation's, so it can stand for "none". */
static inline bool
proto_gen_after(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) > 0;
}

#define PROTO_ROUTE(src, dst)	(((uint32_t)(src) << 16) | (uint32_t)(dst))
#define PROTO_ROUTE_SRC(r)	((int)((r) >> 16))
#define PROTO_ROUTE_DST(r)	((int)((r) & 0xffffu))
void proto_frame_encode(uint8_t out[PROTO_FRAME_HDR], const struct proto_frame *f);
/* Checks magic, version, type, and the payload length against the type's limits
 * (max_payload caps DATA frames: the receiver's configured segment size). */
int proto_frame_decode(const uint8_t in[PROTO_FRAME_HDR], struct proto_frame *f,
		       uint32_t max_payload);
const char *proto_frame_type_name(int type);

/* Handshake payload (HELLO and HELLO_ACK). */
struct proto_peer_hello {
	char cluster[PROTO_NAME_MAX + 1];	/* cluster name; must match */
	uint32_t world;		/* number of hosts in the ring */
	uint32_t from_rank;	/* sender's host rank */
	uint32_t to_rank;	/* the rank the sender believes it is talking to */
	uint32_t flags;		/* PROTO_HELLO_F_* */
	uint8_t nonce[PROTO_NONCE_LEN];	/* fresh random bytes per handshake */
	uint8_t mac[PROTO_MAC_LEN];	/* HMAC proof (cluster secret): zero in HELLO, the
					 * acceptor's in HELLO_ACK, the connector's in
					 * HELLO_AUTH; zero without a secret */
	char version[32];	/* daemon version string, for logs */
	uint64_t link_id;       /* the connector's id of the link, the same in the
				 * HELLO of each of its streams */
	uint32_t stream;        /* 0: the link's first connection; 1 to
				 * PROTO_STREAMS_MAX - 1: another stream of the
				 * link the id names */
};
/* TCP connections one link may have (ringd's streams) */
#define PROTO_STREAMS_MAX 16
#define PROTO_HELLO_F_SECRET	0x1u	/* the sender has a cluster secret (and proves it) */
/* HELLO: a direct link to the acceptor, not the ring's (without it the sender
 * is the acceptor's previous host; older daemons never set it) */
#define PROTO_HELLO_F_DIRECT	0x2u
/* the sender's latency_doubling: yes (DOUBLING), no (RINGONLY), or auto (the
 * cost model: neither).  Every host of a ring must agree, or their plans would
 * not meet */
#define PROTO_HELLO_F_DOUBLING	0x4u
#define PROTO_HELLO_F_RINGONLY	0x8u
int proto_encode_peer_hello(uint8_t *buf, size_t cap, const struct proto_peer_hello *h);
int proto_decode_peer_hello(const uint8_t *buf, size_t len, struct proto_peer_hello *h);

int proto_encode_fp(uint8_t *buf, size_t cap, const struct proto_fp *fp);	/* OPHDR payload, seq not included (it is in the header) */
int proto_decode_fp(const uint8_t *buf, size_t len, struct proto_fp *fp);

/* The membership view (VIEW): each host's incarnation, even while it is a
 * member of the ring, odd while it is evicted; views merge by taking each
 * host's larger number, so they agree whatever order changes come in.  A
 * HEARTBEAT's seq carries a digest of its sender's view (0: nothing ever
 * changed), so a peer whose view differs is sent ours. */
#define PROTO_VIEW_MAX	4096	/* hosts (the hostfile's bound) */
struct proto_view {
	uint32_t n;			/* hosts */
	uint32_t inc[PROTO_VIEW_MAX];
};
int proto_encode_view(uint8_t *buf, size_t cap, const uint32_t *inc, uint32_t n);
int proto_decode_view(const uint8_t *buf, size_t len, struct proto_view *v);
/* The digest of a view a HEARTBEAT carries: 0 for a view of nothing but 0s. */
uint64_t proto_view_digest(const uint32_t *inc, uint32_t n);

/* REJECT / ABORT payloads: i32 code + string. */
int proto_encode_reason(uint8_t *buf, size_t cap, int32_t code, const char *text);
int proto_decode_reason(const uint8_t *buf, size_t len, int32_t *code, char *text, size_t cap);
/* in, as text that may be shown and stored anywhere (a peer's bytes): valid
 * UTF-8 (a byte that is not becomes '?', as does a control character) cut
 * between characters to fit cap with its NUL.  Returns out.  The decoders of
 * reasons give their text so. */
char *proto_text_clean(char *out, size_t cap, const char *in);

/* A host's part of a job (JOIN), or its departure (LEAVE: nranks = 0). */
#define PROTO_LEAVE_BROKE 1     /* LEAVE's aux: the host's clients did not leave */
#define PROTO_JOIN_MAX	1024	/* processes of one job on one host */
struct proto_join {
	char job[PROTO_JOB_MAX + 1];	/* the job's name */
	uint32_t world;		/* the job's world size */
	uint32_t host;		/* the host whose ranks these are */
	uint32_t gen;		/* the host's attach generation of the job */
	uint32_t nranks;	/* 0..PROTO_JOIN_MAX */
	uint32_t ranks[PROTO_JOIN_MAX];	/* global ranks, by local rank */
	/* the host's inputs to the job's cost model (plan_cost), fixed with its
	 * claim: a hop's latency and its links' speed */
	uint32_t hop_us;
	uint32_t link_mbps;
};
int proto_encode_join(uint8_t *buf, size_t cap, const struct proto_join *m);
int proto_decode_join(const uint8_t *buf, size_t len, struct proto_join *m);

/* A formation's agreement (CONFIRM; the frame's gen is the formation's): the
 * sender has every rank of the job placed, by the claims whose digest this
 * is, and its own claim among them is still standing.  A host forms only
 * once every member host has confirmed the same claims (ringd/jobform.c). */
#define PROTO_CONFIRM_LEN 16
struct proto_confirm {
	uint32_t claim;  /* the sender's own claim (its JOIN's gen); never 0 */
	uint32_t nhosts; /* member hosts, 2..PROTO_MAX_RANKS */
	uint64_t digest; /* of the world and each member's host and claim,
				 * in ring order (proto_confirm_digest) */
};
int proto_encode_confirm(uint8_t *buf, size_t cap, const struct proto_confirm *m);
int proto_decode_confirm(const uint8_t *buf, size_t len, struct proto_confirm *m);
/* The digest of a formation's claims (FNV-1a, 64 bits): from
 * PROTO_CONFIRM_DIGEST0, fold in the world size, then each member host and
 * its claim in ring order. */
#define PROTO_CONFIRM_DIGEST0 0xcbf29ce484222325ull
uint64_t proto_confirm_digest(uint64_t h, uint32_t v);

/* P2P request to send (rendezvous) and clear to send. */
struct proto_rts {
	uint32_t src, dst;	/* global ranks */
	uint32_t comm;		/* the matching context within the job: 0, the
				 * ranks' own sends and receives; PROTO_CTX_EXCHANGE,
				 * the parts of exchanges (PROTO_OP_F_EXCHANGE) */
	uint8_t dtype;
	uint8_t ndim;
	uint64_t bytes;		/* payload bytes that will follow a CTS */
	uint64_t shape[PROTO_MAX_NDIM];
};
#define PROTO_CTX_EXCHANGE	1u
struct proto_cts {
	uint32_t src, dst;	/* as in the RTS they answer */
	int32_t status;		/* 0: send now; else RING_E* and no data follows */
	char text[PROTO_TEXT_MAX + 1];	/* why, when status != 0 */
};
int proto_encode_rts(uint8_t *buf, size_t cap, const struct proto_rts *m);
int proto_decode_rts(const uint8_t *buf, size_t len, struct proto_rts *m);
int proto_encode_cts(uint8_t *buf, size_t cap, const struct proto_cts *m);
int proto_decode_cts(const uint8_t *buf, size_t len, struct proto_cts *m);

/* =================================================================== */
/* Client messages (libring <-> local ringd, one per SEQPACKET packet) */
/* =================================================================== */
#define PROTO_MSG_MAGIC		0x434e4752u	/* "RGNC" */
#define PROTO_MSG_HDR		12	/* magic u32, version u16, type u16, length u32 */

enum proto_msg_type {
	/* 1..15: session */
	PROTO_M_HELLO = 1,   /* c->d, with the arena memfd in SCM_RIGHTS */
	PROTO_M_WELCOME = 2, /* d->c */
	PROTO_M_ERROR = 3,   /* d->c: the session is refused/ended; reason */
	PROTO_M_BYE = 4,     /* c->d: orderly close */
	/* 16..31: operations */
	PROTO_M_OP = 16,   /* c->d: run one operation */
	PROTO_M_DONE = 17, /* d->c: it finished (status, reason) */
	/* 32..47: communicators (split) */
	PROTO_M_SPLIT = 32, /* c->d: reserved for ring_split */
	PROTO_M_SPLIT_DONE = 33,
	PROTO_M_SHRINK = 34,      /* c->d: the header alone; which ranks survive? */
	PROTO_M_SHRINK_INFO = 35, /* d->c: struct proto_shrink_info */
	PROTO_M_GROW = 36,        /* c->d: struct proto_grow_ask */
	PROTO_M_GROW_INFO = 37,   /* d->c: struct proto_grow_info */
	/* 48..63: the job as a whole */
	PROTO_M_REVOKE = 48, /* c->d: the header alone; revoke the job's formation */
	PROTO_M_MAX = 48
};

struct proto_hello {
	char job[PROTO_JOB_MAX + 1];	/* job name (letters, digits, . _ - :) */
	int32_t rank;		/* global rank from the launcher, or -1 */
	int32_t size;		/* global world size from the launcher, or -1 */
	int32_t local_rank;	/* this process's index on this host */
	int32_t local_size;	/* processes of this job on this host */
	uint32_t timeout_ms;	/* default per-operation bound */
	uint32_t pid;		/* for ringctl and logs */
	uint64_t arena_bytes;	/* size of the memfd passed along */
	uint32_t flags;         /* PROTO_HELLO_* */
};
/* A survivors' job of ring_comm_shrink: it may form on a ring that broke,
 * over its hosts' own links, its claims going straight to every host this
 * one has a link to (job.c); other jobs wait for the ring to be whole. */
#define PROTO_HELLO_SURVIVORS 0x1u
/* RING_FAST=0: no job page for this process's formation (the daemon then
 * gives none to any of its processes: they all take the daemon's path). */
#define PROTO_HELLO_NOFAST 0x2u
/* A newcomer of ring_comm_grow: the job's name is the grown job's base; the
 * process waits in the job's lobby until a grow admits it (GROW_INFO). */
#define PROTO_HELLO_JOIN 0x4u
#define PROTO_HELLO_ALL (PROTO_HELLO_SURVIVORS | PROTO_HELLO_NOFAST | PROTO_HELLO_JOIN)

struct proto_welcome {
	int32_t rank, size;	/* global rank and world size of the job */
	int32_t local_rank, local_size;
	int32_t host_rank, nhosts;	/* this daemon's place in the ring */
	uint32_t job_id;	/* the job's id on the wire */
	uint32_t seg_bytes;	/* daemon's segment size (informational) */
	uint64_t piece_bytes;	/* the cluster-wide size libring splits operations into */
	uint32_t flags;		/* PROTO_WELCOME_* */
	char version[32];	/* daemon version */
};
/* Some host of the job holds several of its ranks: reduce-scatter must be run in
 * place (recv = send + rank * stride), through a temporary when the caller's is
 * not (libring does this). */
#define PROTO_WELCOME_RS_INPLACE	0x1u
/* The daemon serves this session's operations over the arena's rings (the
 * client asked in the control page); WELCOME's SCM_RIGHTS carry the doorbell,
 * an eventfd the client writes after putting operations. */
#define PROTO_WELCOME_SHM 0x2u
/* The job page (struct proto_page): the job is on this host alone, with
 * several processes here, and WELCOME's SCM_RIGHTS carry, after the doorbell
 * when PROTO_WELCOME_SHM is set, the memfd its processes share. */
#define PROTO_WELCOME_PAGE 0x4u

struct proto_error {
	int32_t code;		/* RING_E* */
	char text[PROTO_TEXT_MAX + 1];
};

struct proto_op {
	uint64_t reqid;		/* client's id, echoed in DONE */
	uint8_t coll;		/* enum proto_coll */
	uint8_t dtype;		/* enum ring_dtype */
	uint8_t redop;		/* enum ring_op */
	uint8_t ndim;		/* send/recv only */
	uint8_t api;		/* enum proto_coll above PROTO_COLL_MAX whose base
				 * is coll, or 0 */
	int32_t peer;		/* root (broadcast, rooted api), send dst, recv
				 * src; else -1 */
	uint32_t comm;		/* communicator id (0 = the job's world) */
	uint32_t timeout_ms;	/* 0: session default */
	uint32_t flags;		/* PROTO_OP_F_* */
	uint64_t count;		/* elements per rank (send/recv: total elements) */
	uint64_t stride;	/* elements between ranks' blocks in the big buffer
				 * (allgather recv, reduce-scatter send); 0 = count */
	uint64_t fp_count;	/* the count that goes into the fingerprint (the
				 * user's whole count when libring splits); 0 = count */
	uint32_t send_arena, recv_arena;	/* arena ids (0: the first) */
	uint64_t send_off, recv_off;	/* byte offsets in those arenas */
	uint64_t shape[PROTO_MAX_NDIM];	/* send/recv */
};

/* This rank cannot take part in the collective (its staging copy failed, e.g. a
 * CUDA error): it still fills its place in the sequence, and the daemon fails
 * the op on every rank with RING_EABORTED naming it, so no rank waits for the
 * timeout and the next op is aligned.  Collectives only, not send/recv. */
#define PROTO_OP_F_ABORT	0x1u
/* A send or recv that is a part of an exchange (all-to-all): it is matched
 * only with parts of exchanges, never with the caller's own sends and
 * receives, which may be in flight between the same ranks at the same time
 * (as MPI keeps a collective's messages apart from point-to-point's). */
#define PROTO_OP_F_EXCHANGE	0x2u
/* Bits 8-11: the algorithm asked for (enum proto_algo), collectives only. */
#define PROTO_OP_F_ALGO_SHIFT	8
#define PROTO_OP_F_ALGO_MASK	(0xfu << PROTO_OP_F_ALGO_SHIFT)
#define PROTO_OP_ALGO(flags)	(((flags) >> PROTO_OP_F_ALGO_SHIFT) & 0xfu)
/* Bits 12-13: the wire format (enum proto_wire) of an all-reduce or a
 * reduce-scatter of float32 sum or average (proto_wire_applies); 0 elsewhere.
 * Its DATA frames then carry 2-byte elements: their offset counts the float32
 * bytes, their length the bytes on the wire. */
#define PROTO_OP_F_WIRE_SHIFT 12
#define PROTO_OP_F_WIRE_MASK (0x3u << PROTO_OP_F_WIRE_SHIFT)
#define PROTO_OP_WIRE(flags) (((flags) >> PROTO_OP_F_WIRE_SHIFT) & 0x3u)
#define PROTO_OP_F_ALL \
	(PROTO_OP_F_ABORT | PROTO_OP_F_EXCHANGE | PROTO_OP_F_ALGO_MASK | PROTO_OP_F_WIRE_MASK)

/* The answer to SHRINK: what this daemon knows of the formation the asking
 * process is in, and its place among the survivors (libring/shrink.c).  A
 * host of the formation is lost when the ring is whole and all its processes
 * left it, or when the ring is broken and this daemon has no working link to
 * it; the survivors are the ranks on the other hosts, renumbered densely in
 * the old order.  A host whose formation only broke with the ring
 * (PROTO_LEAVE_BROKE) is not lost: its processes are still there. */
#define PROTO_SHRINK_HOSTS 64 /* lost hosts named in the answer */
struct proto_shrink_info {
	int32_t status;                     /* 0, or RING_E* (the job never formed) with text */
	int32_t failed;                     /* what failed the formation here, with text:
					     * RING_EREVOKED, RING_EPEER (the ring broke
					     * under it, or a host was lost), RING_EABORTED
					     * (a host's processes left), or 0 (nothing) */
	int32_t rank, size;                 /* the asker's place among the survivors */
	uint32_t world;                     /* the old formation's world size */
	uint32_t gen;                       /* its generation */
	uint32_t nlost;                     /* ranks lost */
	uint64_t hash;                      /* of the old generation and the lost hosts: equal
				 * answers, equal hashes */
	uint32_t nhosts;                    /* lost hosts, all of them (<= PROTO_MAX_RANKS) */
	uint32_t hosts[PROTO_SHRINK_HOSTS]; /* the first of them, ascending */
	char text[PROTO_TEXT_MAX + 1];      /* why, when status != 0 */
};
int proto_encode_shrink_info(uint8_t *buf, size_t cap, const struct proto_shrink_info *m);
int proto_decode_shrink_info(const uint8_t *buf, size_t len, struct proto_shrink_info *m);
/*
 * ring_comm_grow (ringd/jobgrow.c, libring/grow.c).  Newcomers wait in their
 * base job's lobby ("<base>:join", a job that never forms: each host claims
 * its newcomers there as ranks host x PROTO_JOIN_MAX + local rank, so every
 * daemon sees who waits where).  The growing job's rank 0 asks its daemon
 * (GROW) until the lobby holds the newcomers it wants, in whole hosts' groups
 * taken in ring order; the daemon then makes the offer, sends it round the
 * ring (GROW frame) and answers with it; rank 0 hands it to its job's other
 * ranks, and each daemon tells its newcomers their place (GROW_INFO).  The
 * grown job is an ordinary formation: the old ranks keep theirs, each host's
 * newcomers follow its old ranks locally and the old ones globally.
 */
#define PROTO_GROW_HOSTS 64      /* hosts with newcomers in one grow */
#define PROTO_GROW_LOBBY ":join" /* the lobby's suffix on the base name */
struct proto_grow_host {
	uint32_t host;     /* the host */
	uint32_t old_here; /* the growing job's ranks on it */
	uint32_t new_here; /* its newcomers */
	uint32_t first;    /* the global rank of its first newcomer */
	uint32_t claim;    /* its lobby claim (JOIN gen) the newcomers are of */
};
struct proto_grow {
	char base[PROTO_JOB_MAX + 1]; /* the name the newcomers opened with */
	char job[PROTO_JOB_MAX + 1];  /* the grown job */
	uint32_t world, old;          /* its world size, the growing job's */
	uint32_t nhosts;              /* hosts with newcomers, 1..PROTO_GROW_HOSTS */
	struct proto_grow_host hosts[PROTO_GROW_HOSTS]; /* ascending */
};
int proto_encode_grow(uint8_t *buf, size_t cap, const struct proto_grow *m);
int proto_decode_grow(const uint8_t *buf, size_t len, struct proto_grow *m);
struct proto_grow_ask {
	char base[PROTO_JOB_MAX + 1]; /* the newcomers' job name */
	uint32_t add;                 /* how many to admit, 1..PROTO_MAX_RANKS */
};
int proto_encode_grow_ask(uint8_t *buf, size_t cap, const struct proto_grow_ask *m);
int proto_decode_grow_ask(const uint8_t *buf, size_t len, struct proto_grow_ask *m);
/* The answer to GROW (to rank 0: offer set once made, came the newcomers
 * waiting meanwhile), and what a newcomer is told (its place in offer.job). */
struct proto_grow_info {
	int32_t status;                       /* 0, or RING_E* with text: refused */
	uint32_t came;                        /* newcomers waiting in the lobby */
	int32_t rank, local_rank, local_size; /* a newcomer's place; -1: none */
	struct proto_grow offer;              /* nhosts 0: no offer yet */
	char text[PROTO_TEXT_MAX + 1];
};
int proto_encode_grow_info(uint8_t *buf, size_t cap, const struct proto_grow_info *m);
int proto_decode_grow_info(const uint8_t *buf, size_t len, struct proto_grow_info *m);
/* The offer's payload alone, for a frame (pw at the payload). */
void proto_grow_write(struct pw *w, const struct proto_grow *m);
void proto_grow_read(struct pr *r, struct proto_grow *m);
bool proto_grow_ok(const struct proto_grow *m);

/* SHRINK and REVOKE are the header alone (checked with proto_msg_peek). */
int proto_encode_empty(uint8_t *buf, size_t cap, uint16_t type);

struct proto_done {
	uint64_t reqid;
	int32_t status;		/* 0 or RING_E* */
	char text[PROTO_TEXT_MAX + 1];	/* reason when status != 0 */
};

/* Validates the header of one received packet: magic, version, and that the
 * header's length equals len (<= PROTO_MSG_MAX). Returns 0 and the type. */
int proto_msg_peek(const uint8_t *buf, size_t len, uint16_t *type);
/* Each encode returns the message length (> 0) or RING_EINVAL when it does not
 * fit / a field is out of range; each decode returns 0 or RING_EPROTO and checks
 * the header, exact body length and every field's range. */
int proto_encode_hello(uint8_t *buf, size_t cap, const struct proto_hello *m);
int proto_decode_hello(const uint8_t *buf, size_t len, struct proto_hello *m);
int proto_encode_welcome(uint8_t *buf, size_t cap, const struct proto_welcome *m);
int proto_decode_welcome(const uint8_t *buf, size_t len, struct proto_welcome *m);
int proto_encode_error(uint8_t *buf, size_t cap, const struct proto_error *m);
int proto_decode_error(const uint8_t *buf, size_t len, struct proto_error *m);
int proto_encode_bye(uint8_t *buf, size_t cap);
int proto_encode_op(uint8_t *buf, size_t cap, const struct proto_op *m);
int proto_decode_op(const uint8_t *buf, size_t len, struct proto_op *m);
/* The fingerprint of an OP (its seq is the daemon's to set). */
void proto_fp_of_op(struct proto_fp *fp, const struct proto_op *m);
int proto_encode_done(uint8_t *buf, size_t cap, const struct proto_done *m);
int proto_decode_done(const uint8_t *buf, size_t len, struct proto_done *m);

/* A job name is 1..PROTO_JOB_MAX of [A-Za-z0-9._:-]. */
bool proto_job_name_ok(const char *name);
/* 32-bit FNV-1a of the job name: the job id on the wire (never 0). */
uint32_t proto_job_id(const char *name);

/* =================================================================== */
/* The arena's control page                                            */
/* =================================================================== */
/* The first PROTO_ARENA_CTL bytes of every arena belong to the protocol: the
 * client's magic, and where it asks for the local hop's rings.  (A staging
 * client overlaps its copies with the network piece by piece, each piece its
 * own request: the daemon publishes no progress within one.) */
#define PROTO_ARENA_CTL		4096
#define PROTO_ARENA_MAGIC	0x414e4552474e4952ull	/* "RINGRENA" */
struct proto_arena_ctl {
	uint64_t magic; /* PROTO_ARENA_MAGIC, written by the client */
	/* The local hop's ask (client, before HELLO): PROTO_SHM_MAGIC when the
	 * client wants its operations over the rings at shm_off (struct
	 * proto_shm).  A daemon that knows them answers with PROTO_WELCOME_SHM
	 * and the doorbell; one that does not never looks here, and the client
	 * keeps to the socket.  HELLO itself stays as it was: its decoder takes
	 * exact lengths, so a longer HELLO would be refused by an older daemon. */
	uint64_t shm_magic;
	/* Where the rings lie in the arena: PROTO_ARENA_CTL or beyond, 64-byte
	 * aligned, PROTO_SHM_BYTES long. */
	uint64_t shm_off;
};

/* =================================================================== */
/* The local hop: submission and completion rings in the arena          */
/* =================================================================== */
/*
 * Once WELCOME said PROTO_WELCOME_SHM (its SCM_RIGHTS carry an eventfd, the
 * doorbell), the client puts its OP messages into the submission ring and
 * writes the doorbell; the daemon drains the ring when it rings and puts each
 * DONE that fits into the completion ring, where the client finds it without
 * a system call.  Everything else (an ERROR, a DONE with a reason that does
 * not fit, BYE) still crosses the socket, and every message in a ring is the
 * same encoded message as on the socket, decoded by the same decoders.
 *
 * Each ring has one producer and one consumer.  Each side keeps its own index
 * and only publishes it (release); the other's index is read once per look
 * (acquire) and checked: a consumer that finds more than the ring's entries
 * between its index and the producer's, or an entry whose length is not a
 * message's, has met garbage.  The daemon reads an entry by copying it out
 * first and decoding the copy, so a client that rewrites it meanwhile changes
 * nothing but its own request.
 *
 * The client sleeps on `wake` (a futex word) after setting `sleeping`; the
 * daemon bumps `wake` after every completion it publishes and every message
 * it sends on the socket (then counting it in `sock_seq`), and FUTEX_WAKEs it
 * when `sleeping` is set.
 *
 * The doorbell the other way: while the daemon's loop spins (it looks at the
 * submission ring itself between its other looks) it sets `looking`, and a
 * client that reads it set after putting an entry rings no doorbell.  Both
 * sides order a store and a load with sequential consistency (the client:
 * the tail, then `looking`; the daemon: `looking` cleared, then the tail),
 * so either the client rings or the daemon sees the entry before it sleeps.
 */
#define PROTO_SHM_MAGIC 0x31504f48474e4952ull /* "RINGHOP1" */
#define PROTO_SHM_SQ_N 64u                    /* submission entries: libring's window */
#define PROTO_SHM_CQ_N 128u                   /* completion entries */
#define PROTO_SHM_SQ_ENTRY 256u               /* bytes: u32 length, an OP message */
#define PROTO_SHM_CQ_ENTRY 64u                /* bytes: u32 length, a DONE without text */
#define PROTO_SHM_HDR 512u
#define PROTO_SHM_BYTES \
	(PROTO_SHM_HDR + PROTO_SHM_SQ_N * PROTO_SHM_SQ_ENTRY + PROTO_SHM_CQ_N * PROTO_SHM_CQ_ENTRY)
struct proto_shm {
	uint64_t magic;                                /* PROTO_SHM_MAGIC (client) */
	uint32_t sq_tail __attribute__((aligned(64))); /* OPs put (client) */
	uint32_t sq_head __attribute__((aligned(64))); /* OPs taken (daemon) */
	uint32_t looking;                              /* 1: the daemon polls: no doorbell */
	uint32_t cq_tail __attribute__((aligned(64))); /* DONEs put (daemon) */
	uint32_t wake;                                 /* futex word (daemon; client threads) */
	uint32_t sock_seq;                             /* messages sent on the socket (daemon) */
	uint32_t served;                               /* 1: the daemon serves the rings */
	uint32_t cq_head __attribute__((aligned(64))); /* DONEs taken (client) */
	uint32_t sleeping;                             /* a client thread sleeps on wake */
};

/* One side's view of one ring: the shared indices, the entries, and this
 * side's own index (never read back from shared memory). */
struct proto_shmq {
	uint32_t *prod, *cons; /* the producer's and the consumer's index */
	uint8_t *slots;
	uint32_t n, entry; /* entries, bytes each */
	uint32_t mine;     /* this side's index: the tail put, the head taken */
};

/* The views of the two rings of the region at base (PROTO_SHM_BYTES). */
void proto_shm_views(void *base, struct proto_shmq *sq, struct proto_shmq *cq);
/* Puts one message (len <= entry - 4): 0, or -1 when the ring is full or the
 * consumer's index is not one the consumer could have published. */
int proto_shmq_put(struct proto_shmq *q, const void *msg, size_t len);
/* Takes one message into out (cap >= entry): its length, 0 when the ring is
 * empty, -1 when the producer's index is garbage, -2 when the entry's length
 * is (nothing is taken then). */
int proto_shmq_get(struct proto_shmq *q, void *out, size_t cap);
/* Entries put and not yet taken, as this side sees them (the producer). */
uint32_t proto_shmq_used(const struct proto_shmq *q);

/* =================================================================== */
/* The job page: the fast path of a job on one host                    */
/* =================================================================== */
/*
 * A job whose every rank is on this host, with several of them here, gets a
 * page with WELCOME (PROTO_WELCOME_PAGE): a sealed memfd the daemon makes at
 * the first WELCOME of the job's formation and hands to each of its
 * processes, freed when the last of their sessions goes.  Through it the
 * processes run small all-reduces and barriers among themselves, the daemon
 * out of the way (libring/fast.c); the daemon writes only the header's
 * `broken`, `reason` and `futex`, and reads nothing there.
 *
 * Rounds.  Every collective of such a communicator is a round, numbered
 * from 1 on each process: a fast operation is one, and so is each collective
 * piece that goes to the daemon (an OP), so the processes of a correct
 * program count alike, and a round that went to the daemon is the daemon's
 * next operation on every process.  At a round's start a process writes its
 * record of it (the round, the fingerprint, and PROTO_PAGE_DATA when its
 * operand is in its slot of the round's parity, i.e. it asks for the fast
 * path).  When every process's record of round r holds r, has DATA and the
 * same fingerprint, each reduces the slots in local-rank order into its
 * result: the same bits everywhere.  Any other set of records (a
 * fingerprint that differs, a record without DATA) sends every process that
 * asked for the fast path to the daemon with its operation, which runs it or
 * answers RING_EMISMATCH naming both; every process sees the same records,
 * so all decide alike.
 *
 * Slots.  A process writes its slot of parity p for round r only once every
 * process's record shows it started round r - 1, hence finished round r - 2,
 * the last one to read that slot: no acknowledgement is needed.  (A large
 * operand, PROTO_PAGE_SPLIT_BYTES, is reduced in chunks, each by one
 * process into its own slot, which only it reads at that chunk.)  Records
 * lie in a ring of PROTO_PAGE_RECS per process, each written as a seqlock
 * (round 0 while it changes, the round last with release; a reader checks
 * it again after the fields), so a reader can tell a record it may use from
 * one being rewritten.
 *
 * Waking.  A waiter spins, then sleeps on `futex` after counting itself in
 * `sleepers`; a writer that finds a sleeper after its record is out bumps
 * `futex` and wakes them.  The daemon, when a process of the formation goes
 * away or revokes it, writes `reason`, then `broken` (a RING_E* code, with
 * release), bumps `futex` and wakes everyone: a waiter returns that code at
 * once.  A process that gives up on round r (its timeout) writes r into its
 * `gaveup`, so one that starts the round later fails at once as well.
 *
 * The page belongs to the job's processes, so nothing in it can hurt the
 * daemon; a process reads it only at fixed offsets within the size it
 * checked at mapping, so a garbage page gives wrong answers to the ranks of
 * that job and crashes none.
 */
#define PROTO_PAGE_MAGIC 0x31474150474e4952ull /* "RINGPAG1" */
#define PROTO_PAGE_RANKS_MAX 64u               /* local processes of a job with a page */
#define PROTO_PAGE_SLOT_BYTES (64u << 10)      /* the largest fast operand */
#define PROTO_PAGE_RECS 256u                   /* records a process keeps */
#define PROTO_PAGE_HDR 4096u
#define PROTO_PAGE_DATA 0x1u /* a record's flags: its operand is in its slot */
/* An operand of at least this many bytes is reduced in chunks: process i
 * reduces chunk i of every slot into its own slot's chunk i and says so
 * (`reduced`), then every process copies each chunk from its owner's slot;
 * a smaller one is reduced whole by each process. */
#define PROTO_PAGE_SPLIT_BYTES (8u << 10)
struct proto_page {
	uint64_t magic;      /* PROTO_PAGE_MAGIC (daemon) */
	uint32_t nranks;     /* local processes, each with its proto_page_rank */
	uint32_t slot_bytes; /* PROTO_PAGE_SLOT_BYTES */
	uint32_t nrecs;      /* PROTO_PAGE_RECS */
	uint32_t job_id;     /* for messages */
	uint32_t gen;        /* the formation's generation */
	int32_t broken __attribute__((aligned(64))); /* 0, or the RING_E* code of a
						      * break (daemon, release) */
	char reason[PROTO_TEXT_MAX + 1];             /* why (daemon, before broken) */
	uint32_t futex __attribute__((aligned(64))); /* bumped by whoever wakes */
	uint32_t sleepers;                           /* processes asleep on it */
};
/* One record: a round as one process started it (64 bytes). */
struct proto_page_rec {
	uint64_t round; /* 0 while it is written; then the round (release) */
	uint64_t fp[3]; /* proto_encode_fp's PROTO_FP_LEN bytes */
	uint64_t flags; /* PROTO_PAGE_DATA */
	uint64_t pad[3];
};
/* One process's part of the page: its records by round % PROTO_PAGE_RECS. */
struct proto_page_rank {
	uint64_t gaveup; /* the last round it gave up on (0: none) */
	uint32_t rank;   /* its global rank, for messages (itself, at mapping) */
	uint32_t pad32;
	uint64_t reduced; /* the last round whose chunk it reduced into its slot
			   * (an operation of PROTO_PAGE_SPLIT_BYTES or more) */
	uint64_t pad[5];
	struct proto_page_rec rec[PROTO_PAGE_RECS];
};
/* Where local rank i's part lies, where its slot of parity p lies (both
 * sides compute them from the number of processes n alone), and the page's
 * size: the header, the parts, then the slots, two a process. */
static inline size_t
proto_page_rank_off(unsigned i)
{
	return PROTO_PAGE_HDR + (size_t)i * sizeof(struct proto_page_rank);
}
static inline size_t
proto_page_slot_off(unsigned n, unsigned i, unsigned p)
{
	size_t data = (proto_page_rank_off(n) + 4095u) & ~(size_t)4095u;

	return data + ((size_t)i * 2u + (p & 1u)) * PROTO_PAGE_SLOT_BYTES;
}
static inline size_t
proto_page_bytes(unsigned n)
{
	return proto_page_slot_off(n, n, 0);
}

#endif /* PROTO_PROTO_H */
