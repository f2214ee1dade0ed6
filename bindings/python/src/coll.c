/*
 * coll.c - the collectives and send/recv as methods of Communicator, each in
 * a blocking form (returns the result buffer) and a non-blocking one (i...,
 * returns a Request).  A method parses its arguments into a struct pyr_op
 * (libring's arguments plus the hold on their buffers), then one function runs
 * it: issue without the GIL, then release the hold (blocking), keep it on the
 * communicator until ring_group_end (blocking inside a group), or hand it to
 * the Request (non-blocking).
 *
 * One buffer means in place, as MPI_IN_PLACE and NCCL's in-place pointers:
 * all-gather's buffer holds every rank's block and this rank's is its input;
 * reduce-scatter's result lands in this rank's block of its input; the root of
 * gather and scatter passes the whole buffer, its own block staying where it
 * is; all-to-all, all-to-all-v and sendrecv work from a copy of the input.
 */
#include "pyring.h"

#include <stdlib.h>
#include <string.h>

/* ---- helpers ---- */

static bool
is_none(PyObject *o)
{
	return !o || o == Py_None;
}

/* The dtype override: -1 for none, -2 on an error. */
static int
dtype_opt(const char *fn, PyObject *o)
{
	int d;

	if (is_none(o))
		return -1;
	d = pyr_dtype_arg(fn, o);
	return d < 0 ? -2 : d;
}

static int
op_opt(const char *fn, PyObject *o)
{
	return is_none(o) ? RING_SUM : pyr_op_arg(fn, o);
}

static int
int_opt(const char *fn, const char *name, PyObject *o, int dflt, int *out)
{
	if (is_none(o)) {
		*out = dflt;
		return 0;
	}
	return pyr_int_arg(fn, name, o, out);
}

static int
size_fail(const char *fn, const char *role, size_t have, const char *want, size_t need)
{
	PyErr_Format(PyExc_ValueError, "%s: %s has %zu elements; it needs %s = %zu", fn, role,
		     have, want, need);
	return -1;
}

/* send and recv of one dtype (dt: the override, else each from its format). */
static int
get_pair(struct pyr_op *op, PyObject *so, PyObject *ro, int dt, struct pyr_buf *s,
	 struct pyr_buf *r)
{
	if (pyr_buf_get(&op->hold, op->fn, "send", so, false, dt, s) < 0 ||
	    pyr_buf_get(&op->hold, op->fn, "recv", ro, true, dt, r) < 0)
		return -1;
	if (s->dtype != r->dtype) {
		PyErr_Format(PyExc_TypeError, "%s: send is %s but recv is %s; they must be "
			     "of one dtype", op->fn, ring_dtype_name((enum ring_dtype)s->dtype),
			     ring_dtype_name((enum ring_dtype)r->dtype));
		return -1;
	}
	op->dtype = s->dtype;
	op->send = s->ptr;
	op->recv = r->ptr;
	op->result = ro;
	return 0;
}

/* The one buffer of an in-place call. */
static int
get_one(struct pyr_op *op, PyObject *o, bool write, int dt, struct pyr_buf *b)
{
	if (pyr_buf_get(&op->hold, op->fn, "buf", o, write, dt, b) < 0)
		return -1;
	op->dtype = b->dtype;
	op->send = b->ptr;
	op->recv = b->ptr;
	op->result = o;
	return 0;
}

static size_t
esize(const struct pyr_op *op)
{
	return ring_dtype_size((enum ring_dtype)op->dtype);
}

/* One buffer of size blocks: count is a block, block `at` the caller's. */
static int
split_blocks(struct pyr_op *op, const struct pyr_buf *b, int size, int at, char **blk)
{
	if (b->count % (size_t)size) {
		PyErr_Format(PyExc_ValueError, "%s: buf has %zu elements, not a whole number "
			     "of blocks for %d ranks", op->fn, b->count, size);
		return -1;
	}
	op->count = b->count / (size_t)size;
	*blk = b->ptr + (size_t)at * op->count * esize(op);
	return 0;
}

/* How recv's size follows from send's. */
enum fit {
	FIT_SAME,	/* as many elements (all-reduce, reduce) */
	FIT_GATHER,	/* size x send's: in place, this rank's block is the input */
	FIT_SCATTER,	/* send has size x recv's: in place, this rank's block the result */
};

/* send and recv of an operation whose sizes fit so, or its one buffer
 * (recv None: in place); sets count. */
static int
get_fit(pyr_comm *c, struct pyr_op *op, PyObject *so, PyObject *ro, int dt, enum fit fit)
{
	size_t size = (size_t)c->size;
	struct pyr_buf s, r;
	char *mine;

	if (is_none(ro)) {
		if (get_one(op, so, true, dt, &s) < 0)
			return -1;
		if (fit == FIT_SAME) {
			op->count = s.count;
			return 0;
		}
		if (split_blocks(op, &s, c->size, c->rank, &mine) < 0)
			return -1;
		if (fit == FIT_GATHER)
			op->send = mine;
		else
			op->recv = mine;
		return 0;
	}
	if (get_pair(op, so, ro, dt, &s, &r) < 0)
		return -1;
	switch (fit) {
	case FIT_SAME:
		op->count = s.count;
		return r.count == s.count ? 0 :
			size_fail(op->fn, "recv", r.count, "send's", s.count);
	case FIT_GATHER:
		op->count = s.count;
		return r.count == s.count * size ? 0 :
			size_fail(op->fn, "recv", r.count, "size x send's", s.count * size);
	default:
		op->count = r.count;
		return s.count == r.count * size ? 0 :
			size_fail(op->fn, "send", s.count, "size x recv's", r.count * size);
	}
}

/* recv, or None where it is send itself: the same buffer twice is in place. */
static PyObject *
recv_or_none(PyObject *const *v)
{
	return v[1] == v[0] ? Py_None : v[1];
}

/* ---- the parsers: one per method ---- */

/* A method's arguments: v[] in the order of its names (NULL where not given),
 * dt its dtype override (-1: none). */
typedef int (*parse_fn)(pyr_comm *c, struct pyr_op *op, PyObject *const *v, int dt);

static const char *const args_reduction[] = { "send", "recv", "op", "wire", "dtype", NULL };
static const char *const args_pair[] = { "send", "recv", "dtype", NULL };
static const char *const args_rooted[] = { "send", "recv", "root", "dtype", NULL };

/* wire="f32", "bf16" or "fp16": the op's RING_WIRE_* bits (None: the
 * communicator's format); libring refuses it where it does not apply. */
static int
wire_opt(const char *fn, PyObject *o, int *redop)
{
	static const char *const names[] = { "f32", "bf16", "fp16" };
	static const int bits[] = { RING_WIRE_F32, RING_WIRE_BF16, RING_WIRE_FP16 };
	const char *s;
	int i;

	if (is_none(o))
		return 0;
	if (!PyUnicode_Check(o) || !(s = PyUnicode_AsUTF8(o))) {
		PyErr_Format(PyExc_TypeError, "%s: wire must be \"f32\", \"bf16\" or \"fp16\"",
			     fn);
		return -1;
	}
	for (i = 0; i < 3; i++)
		if (strcmp(s, names[i]) == 0) {
			*redop |= bits[i];
			return 0;
		}
	PyErr_Format(PyExc_ValueError, "%s: wire=\"%s\" is no wire format: \"f32\", "
		     "\"bf16\" or \"fp16\"", fn, s);
	return -1;
}

static int
parse_allreduce(pyr_comm *c, struct pyr_op *op, PyObject *const *v, int dt)
{
	if ((op->redop = op_opt(op->fn, v[2])) < 0 || wire_opt(op->fn, v[3], &op->redop) < 0)
		return -1;
	return get_fit(c, op, v[0], recv_or_none(v), dt, FIT_SAME);
}

static int
parse_allgather(pyr_comm *c, struct pyr_op *op, PyObject *const *v, int dt)
{
	return get_fit(c, op, v[0], v[1], dt, FIT_GATHER);
}

static int
parse_reduce_scatter(pyr_comm *c, struct pyr_op *op, PyObject *const *v, int dt)
{
	if ((op->redop = op_opt(op->fn, v[2])) < 0 || wire_opt(op->fn, v[3], &op->redop) < 0)
		return -1;
	return get_fit(c, op, v[0], v[1], dt, FIT_SCATTER);
}

static const char *const args_broadcast[] = { "buf", "root", "dtype", NULL };

static int
parse_broadcast(pyr_comm *c, struct pyr_op *op, PyObject *const *v, int dt)
{
	struct pyr_buf b;

	if (int_opt(op->fn, "root", v[1], 0, &op->peer) < 0)
		return -1;
	/* The root only reads: it may broadcast a bytes object. */
	if (get_one(op, v[0], op->peer != c->rank, dt, &b) < 0)
		return -1;
	op->count = b.count;
	return 0;
}

static const char *const args_none[] = { NULL };

static int
parse_barrier(pyr_comm *c, struct pyr_op *op, PyObject *const *v, int dt)
{
	op->result = Py_None;
	return 0;
}

static const char *const args_send[] = { "buf", "dst", "dtype", NULL };
static const char *const args_recv[] = { "buf", "src", "dtype", NULL };

/* send and recv: the shape goes in the message header. */
static int
parse_p2p(pyr_comm *c, struct pyr_op *op, PyObject *const *v, int dt)
{
	bool is_send = op->kind == PYR_SEND;
	struct pyr_buf b;

	if (pyr_int_arg(op->fn, is_send ? "dst" : "src", v[1], &op->peer) < 0 ||
	    get_one(op, v[0], !is_send, dt, &b) < 0)
		return -1;
	op->count = b.count;
	op->ndim = b.ndim;
	memcpy(op->shape, b.shape, sizeof(op->shape));
	if (is_send)
		op->result = Py_None;
	return 0;
}

static const char *const args_reduce[] = { "send", "recv", "op", "root", "dtype", NULL };

static int
parse_reduce(pyr_comm *c, struct pyr_op *op, PyObject *const *v, int dt)
{
	struct pyr_buf s;
	bool root;

	if ((op->redop = op_opt(op->fn, v[2])) < 0 ||
	    int_opt(op->fn, "root", v[3], 0, &op->peer) < 0)
		return -1;
	root = op->peer == c->rank;
	if (root)
		return get_fit(c, op, v[0], recv_or_none(v), dt, FIT_SAME);
	/* Off the root recv is not written: libring gets NULL. */
	if (get_one(op, v[0], false, dt, &s) < 0)
		return -1;
	op->count = s.count;
	op->recv = NULL;
	op->result = is_none(v[1]) ? v[0] : v[1];
	return 0;
}

static int
parse_gather(pyr_comm *c, struct pyr_op *op, PyObject *const *v, int dt)
{
	struct pyr_buf s;

	if (int_opt(op->fn, "root", v[2], 0, &op->peer) < 0)
		return -1;
	if (op->peer == c->rank)
		return get_fit(c, op, v[0], recv_or_none(v), dt, FIT_GATHER);
	if (get_one(op, v[0], false, dt, &s) < 0)
		return -1;
	op->count = s.count;
	op->recv = NULL;
	op->result = is_none(v[1]) ? Py_None : v[1];
	return 0;
}

static int
parse_scatter(pyr_comm *c, struct pyr_op *op, PyObject *const *v, int dt)
{
	struct pyr_buf r;

	if (int_opt(op->fn, "root", v[2], 0, &op->peer) < 0)
		return -1;
	if (op->peer != c->rank) {
		/* Off the root send is not read: the one buffer is recv. */
		if (get_one(op, is_none(v[1]) ? v[0] : v[1], true, dt, &r) < 0)
			return -1;
		op->count = r.count;
		op->send = NULL;
		return 0;
	}
	if (is_none(v[0])) {
		PyErr_Format(PyExc_TypeError, "%s: the root (rank %d) needs send", op->fn,
			     c->rank);
		return -1;
	}
	return get_fit(c, op, v[0], recv_or_none(v), dt, FIT_SCATTER);
}

/* A sequence of size counts or displacements (elements) into out. */
static int
counts_arg(const char *fn, const char *name, PyObject *o, int size, size_t *out)
{
	PyObject *seq = PySequence_Check(o) ? PySequence_Fast(o, "") : NULL;
	Py_ssize_t i;

	if (!seq || PySequence_Fast_GET_SIZE(seq) != size) {
		Py_XDECREF(seq);
		PyErr_Clear();
		PyErr_Format(PyExc_ValueError, "%s: %s must be a sequence of %d ints (one "
			     "per rank)", fn, name, size);
		return -1;
	}
	for (i = 0; i < size; i++) {
		PyObject *it = PySequence_Fast_GET_ITEM(seq, i);
		size_t v = PyLong_Check(it) ? PyLong_AsSize_t(it) : (size_t)-1;

		if (v == (size_t)-1) {
			Py_DECREF(seq);
			PyErr_Clear();
			PyErr_Format(PyExc_ValueError, "%s: %s[%zd] = %R is not a count (an int "
				     ">= 0)", fn, name, i, it);
			return -1;
		}
		out[i] = v;
	}
	Py_DECREF(seq);
	return 0;
}

/* Elements a buffer needs for these blocks, and block `at`'s offset. */
static size_t
v_extent(const size_t *counts, const size_t *displs, int size, int at, size_t *off)
{
	size_t end = 0, sum = 0;
	int r;

	for (r = 0; r < size; r++) {
		size_t start = displs ? displs[r] : sum;

		if (r == at)
			*off = start;
		if (start + counts[r] > end)
			end = start + counts[r];
		sum += counts[r];
	}
	return end;
}

/* n vectors of c's size into the hold; vec[k] NULL where the argument is None
 * (the displacements: packed). */
static int
vec_args(pyr_comm *c, struct pyr_op *op, PyObject *const *objs, const char *const *names,
	 int n)
{
	int k;

	op->hold.vec = malloc((size_t)(n * c->size) * sizeof(size_t) + 1);
	if (!op->hold.vec) {
		PyErr_NoMemory();
		return -1;
	}
	for (k = 0; k < n; k++) {
		size_t *dst = op->hold.vec + (size_t)(k * c->size);

		op->counts[k] = NULL;
		if (is_none(objs[k]))
			continue;
		if (counts_arg(op->fn, names[k], objs[k], c->size, dst) < 0)
			return -1;
		op->counts[k] = dst;
	}
	return 0;
}

static int
need_arg(const char *fn, PyObject *o, const char *name)
{
	if (!is_none(o))
		return 0;
	PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s'", fn, name);
	return -1;
}

/* A copy of b as the input of an in-place exchange. */
static int
copy_input(struct pyr_op *op, const struct pyr_buf *b)
{
	size_t bytes = b->count * esize(op);

	op->hold.temp = malloc(bytes ? bytes : 1);
	if (!op->hold.temp) {
		PyErr_NoMemory();
		return -1;
	}
	memcpy(op->hold.temp, b->ptr, bytes);
	op->send = op->hold.temp;
	return 0;
}

static const char *const args_allgatherv[] = { "send", "recv", "counts", "displs", "dtype",
					       NULL };

static int
parse_allgatherv(pyr_comm *c, struct pyr_op *op, PyObject *const *v, int dt)
{
	struct pyr_buf s, r;
	size_t need, off = 0;

	if (need_arg(op->fn, v[2], "counts") < 0 ||
	    vec_args(c, op, v + 2, args_allgatherv + 2, 2) < 0)
		return -1;
	need = v_extent(op->counts[0], op->counts[1], c->size, c->rank, &off);
	op->count = op->counts[0][c->rank];
	if (is_none(v[1])) {
		if (get_one(op, v[0], true, dt, &s) < 0)
			return -1;
		op->send = s.ptr + off * esize(op);
		return s.count >= need ? 0 : size_fail(op->fn, "buf", s.count,
							"the blocks' extent", need);
	}
	if (get_pair(op, v[0], v[1], dt, &s, &r) < 0)
		return -1;
	if (s.count != op->count)
		return size_fail(op->fn, "send", s.count, "counts[rank]", op->count);
	return r.count >= need ? 0 : size_fail(op->fn, "recv", r.count, "the blocks' extent",
					       need);
}

static int
parse_alltoall(pyr_comm *c, struct pyr_op *op, PyObject *const *v, int dt)
{
	struct pyr_buf s, r;
	char *unused;

	if (is_none(recv_or_none(v))) {
		return get_one(op, v[0], true, dt, &s) < 0 ||
			split_blocks(op, &s, c->size, 0, &unused) < 0 ||
			copy_input(op, &s) < 0 ? -1 : 0;
	}
	if (get_pair(op, v[0], v[1], dt, &s, &r) < 0 ||
	    split_blocks(op, &s, c->size, 0, &unused) < 0)
		return -1;
	return r.count == s.count ? 0 : size_fail(op->fn, "recv", r.count, "send's", s.count);
}

/* vec_args order: sendcounts, recvcounts, sdispls, rdispls */
static const char *const args_alltoallv[] = { "send", "recv", "sendcounts", "recvcounts",
					      "sdispls", "rdispls", "dtype", NULL };

static int
parse_alltoallv(pyr_comm *c, struct pyr_op *op, PyObject *const *v, int dt)
{
	struct pyr_buf s, r;
	size_t sneed, rneed, off;

	if (need_arg(op->fn, v[2], "sendcounts") < 0 ||
	    need_arg(op->fn, v[3], "recvcounts") < 0 ||
	    vec_args(c, op, v + 2, args_alltoallv + 2, 4) < 0)
		return -1;
	sneed = v_extent(op->counts[0], op->counts[2], c->size, 0, &off);
	rneed = v_extent(op->counts[1], op->counts[3], c->size, 0, &off);
	if (is_none(recv_or_none(v))) {
		if (get_one(op, v[0], true, dt, &s) < 0)
			return -1;
		r = s;
		if (copy_input(op, &s) < 0)
			return -1;
	} else if (get_pair(op, v[0], v[1], dt, &s, &r) < 0) {
		return -1;
	}
	if (s.count < sneed)
		return size_fail(op->fn, "send", s.count, "the send blocks' extent", sneed);
	return r.count >= rneed ? 0 : size_fail(op->fn, "recv", r.count,
						 "the receive blocks' extent", rneed);
}

static const char *const args_sendrecv[] = { "send", "dst", "recv", "src", "dtype", NULL };

static int
parse_sendrecv(pyr_comm *c, struct pyr_op *op, PyObject *const *v, int dt)
{
	struct pyr_buf s, r;

	if (pyr_int_arg(op->fn, "dst", v[1], &op->peer) < 0 ||
	    int_opt(op->fn, "src", v[3], op->peer, &op->peer2) < 0)
		return -1;
	if (is_none(v[2]) || v[2] == v[0]) {
		if (get_one(op, v[0], true, dt, &s) < 0 || copy_input(op, &s) < 0)
			return -1;
		op->count = op->count2 = s.count;
		return 0;
	}
	if (get_pair(op, v[0], v[2], dt, &s, &r) < 0)
		return -1;
	op->count = s.count;
	op->count2 = r.count;
	return 0;
}

/* libring's call for the rooted and exchange collectives. */
static int
issue_v(ring_comm *c, const struct pyr_op *op, ring_request **req)
{
	enum ring_dtype dt = (enum ring_dtype)op->dtype;
	const size_t *const *v = op->counts;

	switch (op->kind) {
	case PYR_REDUCE:
		return req ? ring_ireduce(c, op->send, op->recv, op->count, dt,
					  (enum ring_op)op->redop, op->peer, req)
			: ring_reduce(c, op->send, op->recv, op->count, dt,
				      (enum ring_op)op->redop, op->peer);
	case PYR_GATHER:
		return req ? ring_igather(c, op->send, op->recv, op->count, dt, op->peer, req)
			: ring_gather(c, op->send, op->recv, op->count, dt, op->peer);
	case PYR_SCATTER:
		return req ? ring_iscatter(c, op->send, op->recv, op->count, dt, op->peer, req)
			: ring_scatter(c, op->send, op->recv, op->count, dt, op->peer);
	case PYR_ALLGATHERV:
		return req ? ring_iallgatherv(c, op->send, op->count, op->recv, v[0], v[1], dt,
					      req)
			: ring_allgatherv(c, op->send, op->count, op->recv, v[0], v[1], dt);
	case PYR_ALLTOALL:
		return req ? ring_ialltoall(c, op->send, op->recv, op->count, dt, req)
			: ring_alltoall(c, op->send, op->recv, op->count, dt);
	case PYR_ALLTOALLV:
		return req ? ring_ialltoallv(c, op->send, v[0], v[2], op->recv, v[1], v[3], dt,
					     req)
			: ring_alltoallv(c, op->send, v[0], v[2], op->recv, v[1], v[3], dt);
	case PYR_SENDRECV:
		return req ? ring_isendrecv(c, op->send, op->count, op->peer, op->recv,
					    op->count2, op->peer2, dt, req)
			: ring_sendrecv(c, op->send, op->count, op->peer, op->recv, op->count2,
					op->peer2, dt);
	default:
		return RING_EINVAL;
	}
}

/* ---- running them ---- */

int
pyr_op_issue(ring_comm *c, const struct pyr_op *op, ring_request **req)
{
	switch (op->kind) {
	case PYR_ALLREDUCE:
		return req ? ring_iallreduce(c, op->send, op->recv, op->count,
					     (enum ring_dtype)op->dtype, (enum ring_op)op->redop, req)
			: ring_allreduce(c, op->send, op->recv, op->count,
					 (enum ring_dtype)op->dtype, (enum ring_op)op->redop);
	case PYR_ALLGATHER:
		return req ? ring_iallgather(c, op->send, op->recv, op->count,
					     (enum ring_dtype)op->dtype, req)
			: ring_allgather(c, op->send, op->recv, op->count,
					 (enum ring_dtype)op->dtype);
	case PYR_REDUCE_SCATTER:
		return req ? ring_ireduce_scatter(c, op->send, op->recv, op->count,
						  (enum ring_dtype)op->dtype,
						  (enum ring_op)op->redop, req)
			: ring_reduce_scatter(c, op->send, op->recv, op->count,
					      (enum ring_dtype)op->dtype, (enum ring_op)op->redop);
	case PYR_BROADCAST:
		return req ? ring_ibroadcast(c, op->recv, op->count, (enum ring_dtype)op->dtype,
					     op->peer, req)
			: ring_broadcast(c, op->recv, op->count, (enum ring_dtype)op->dtype,
					 op->peer);
	case PYR_BARRIER:
		return req ? ring_ibarrier(c, req) : ring_barrier(c);
	case PYR_SEND:
		return req ? ring_isend(c, op->send, (enum ring_dtype)op->dtype, op->ndim,
					op->shape, op->peer, req)
			: ring_send(c, op->send, (enum ring_dtype)op->dtype, op->ndim, op->shape,
				    op->peer);
	case PYR_RECV:
		return req ? ring_irecv(c, op->recv, (enum ring_dtype)op->dtype, op->ndim,
					op->shape, op->peer, req)
			: ring_recv(c, op->recv, (enum ring_dtype)op->dtype, op->ndim, op->shape,
				    op->peer);
	default:
		return issue_v(c, op, req);
	}
}

struct issue_args {
	const struct pyr_op *op;
	ring_request **req;	/* NULL: the blocking form */
};

static int
issue_cb(ring_comm *rc, void *arg)
{
	struct issue_args *a = arg;

	return pyr_op_issue(rc, a->op, a->req);
}

/* Issues op on c; the blocking form's result, a Request, or NULL. */
static PyObject *
op_run(pyr_comm *c, struct pyr_op *op, bool nb)
{
	ring_request *req = NULL;
	struct issue_args a = { op, nb ? &req : NULL };
	char err[512] = "";
	struct pyr_hold *kept;
	int rc;

	rc = pyr_comm_call(c, issue_cb, &a, err, sizeof(err));
	if (rc) {
		pyr_hold_release(&op->hold);
		pyr_raise(rc, err);
		return NULL;
	}
	if (nb)
		return pyr_request_new(c, req, op);
	if (c->group_depth > 0 && (op->hold.nviews || op->hold.temp || op->hold.vec)) {
		/* Recorded, not run: libring reads the buffers at ring_group_end. */
		kept = pyr_hold_keep(&op->hold);
		if (!kept) {
			pyr_hold_release(&op->hold);
			return NULL;
		}
		kept->next = c->group_holds;
		c->group_holds = kept;
	}
	pyr_hold_release(&op->hold);
	return Py_NewRef(op->result ? op->result : Py_None);
}

/* One operation's method: its arguments by name (NULL-terminated, "dtype"
 * last where it takes one), how many may be positional and how many are
 * required, and the parser of what they say. */
struct coll_spec {
	enum pyr_kind kind;
	const char *const *names;
	int npos, nreq;
	parse_fn parse;
};

#define COLL_MAX_ARGS 8		/* alltoallv's 7 */

static PyObject *
coll_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
	  const struct coll_spec *spec, const char *fn, bool nb)
{
	pyr_comm *c = (pyr_comm *)self;
	PyObject *v[COLL_MAX_ARGS];
	struct pyr_op op;
	int n = 0, dt = -1;

	memset(&op, 0, sizeof(op));
	op.kind = spec->kind;
	op.fn = fn;
	while (spec->names[n])
		n++;
	if (pyr_comm_usable(c, fn) < 0 ||
	    pyr_parse(fn, args, nargs, kwnames, spec->names, spec->npos, spec->nreq, v) < 0 ||
	    (n > 0 && strcmp(spec->names[n - 1], "dtype") == 0 &&
	     (dt = dtype_opt(fn, v[n - 1])) < -1))
		return NULL;
	if (spec->parse(c, &op, v, dt) < 0) {
		pyr_hold_release(&op.hold);
		return NULL;
	}
	return op_run(c, &op, nb);
}

/* The blocking and the non-blocking method of one operation. */
#define COLL_METHODS(name, kind, names, npos, nreq, parse)				\
static const struct coll_spec spec_##name = { kind, names, npos, nreq, parse };	\
static PyObject *									\
m_##name(PyObject *self, PyObject *const *a, Py_ssize_t n, PyObject *kw)		\
{											\
	return coll_call(self, a, n, kw, &spec_##name, #name, false);			\
}											\
static PyObject *									\
m_i##name(PyObject *self, PyObject *const *a, Py_ssize_t n, PyObject *kw)		\
{											\
	return coll_call(self, a, n, kw, &spec_##name, "i" #name, true);		\
}

COLL_METHODS(allreduce, PYR_ALLREDUCE, args_reduction, 3, 1, parse_allreduce)
COLL_METHODS(allgather, PYR_ALLGATHER, args_pair, 2, 1, parse_allgather)
COLL_METHODS(reduce_scatter, PYR_REDUCE_SCATTER, args_reduction, 3, 1, parse_reduce_scatter)
COLL_METHODS(broadcast, PYR_BROADCAST, args_broadcast, 2, 1, parse_broadcast)
COLL_METHODS(barrier, PYR_BARRIER, args_none, 0, 0, parse_barrier)
COLL_METHODS(send, PYR_SEND, args_send, 2, 2, parse_p2p)
COLL_METHODS(recv, PYR_RECV, args_recv, 2, 2, parse_p2p)
COLL_METHODS(reduce, PYR_REDUCE, args_reduce, 4, 1, parse_reduce)
COLL_METHODS(gather, PYR_GATHER, args_rooted, 3, 1, parse_gather)
COLL_METHODS(scatter, PYR_SCATTER, args_rooted, 3, 1, parse_scatter)
COLL_METHODS(allgatherv, PYR_ALLGATHERV, args_allgatherv, 4, 1, parse_allgatherv)
COLL_METHODS(alltoall, PYR_ALLTOALL, args_pair, 2, 1, parse_alltoall)
COLL_METHODS(alltoallv, PYR_ALLTOALLV, args_alltoallv, 6, 1, parse_alltoallv)
COLL_METHODS(sendrecv, PYR_SENDRECV, args_sendrecv, 4, 2, parse_sendrecv)

#define FASTKW (METH_FASTCALL | METH_KEYWORDS)
#define METHOD(name, sig, doc)								\
	{ #name, (PyCFunction)(void (*)(void))m_##name, FASTKW,				\
	  #name sig "\n--\n\n" doc },							\
	{ "i" #name, (PyCFunction)(void (*)(void))m_i##name, FASTKW,			\
	  "i" #name sig "\n--\n\nNon-blocking " #name ": returns a Request at once; the "	\
	  "buffers are libring's until it completes." }

PyMethodDef pyr_coll_methods[] = {
	METHOD(allreduce, "($self, send, recv=None, op=SUM, *, wire=None, dtype=None)",
	       "Reduces send over every rank into recv (None: in place in send); "
	       "returns the result buffer.  wire=\"bf16\" or \"fp16\": float32 data of "
	       "SUM and AVG travels between hosts compressed, summed in float32 (ring.h "
	       "states the error bound); None: the Communicator's wire."),
	METHOD(allgather, "($self, send, recv=None, *, dtype=None)",
	       "Every rank's send, in rank order, into recv (size x send's elements).  "
	       "recv None: in place, as MPI_IN_PLACE (pass recv for the out-of-place "
	       "form torch and mpi4py users expect): send holds size blocks and this "
	       "rank's block is its input."),
	METHOD(reduce_scatter, "($self, send, recv=None, op=SUM, *, wire=None, dtype=None)",
	       "Reduces send (size blocks) over every rank; rank r gets block r in recv.  "
	       "recv None: in place, as MPI_IN_PLACE (pass recv for the out-of-place "
	       "form torch and mpi4py users expect): the result lands in this rank's "
	       "block of send."),
	METHOD(broadcast, "($self, buf, root=0, *, dtype=None)",
	       "root's buf into every rank's buf; returns buf."),
	METHOD(barrier, "($self)", "Returns once every rank has called barrier."),
	METHOD(send, "($self, buf, dst, *, dtype=None)",
	       "Sends buf to rank dst with its dtype and shape in the header."),
	METHOD(recv, "($self, buf, src, *, dtype=None)",
	       "Receives into buf from rank src; a message of another dtype or shape "
	       "raises MismatchError; returns buf."),
	METHOD(reduce, "($self, send, recv=None, op=SUM, root=0, *, dtype=None)",
	       "Reduces send over every rank into root's recv (None: in place); recv is "
	       "not written off the root."),
	METHOD(gather, "($self, send, recv=None, root=0, *, dtype=None)",
	       "Every rank's send into root's recv (size blocks, rank order).  In place "
	       "at the root: send holds size blocks, its own block is its input."),
	METHOD(scatter, "($self, send, recv=None, root=0, *, dtype=None)",
	       "Block r of root's send (size blocks) into rank r's recv; off the root "
	       "send is ignored (None, or the one buffer is recv).  In place at the "
	       "root: its own block stays in send."),
	METHOD(allgatherv, "($self, send, recv=None, counts, displs=None, *, dtype=None)",
	       "Rank r's send (counts[r] elements) into recv at displs[r] (None: packed "
	       "in rank order).  In place: send is the whole buffer, this rank's block "
	       "its input."),
	METHOD(alltoall, "($self, send, recv=None, *, dtype=None)",
	       "Block r of send (size blocks) to rank r; recv gets block r from rank r.  "
	       "None: in place in send."),
	METHOD(alltoallv, "($self, send, recv, sendcounts, recvcounts, sdispls=None, "
	       "rdispls=None, *, dtype=None)",
	       "All-to-all with per-rank counts and displacements in elements (None: "
	       "packed).  recv None: in place in send."),
	METHOD(sendrecv, "($self, send, dst, recv=None, src=None, *, dtype=None)",
	       "Sends send to dst and receives recv from src (default dst) at once; "
	       "never deadlocks.  recv None: send's buffer is replaced."),
	{ NULL, NULL, 0, NULL }
};
