/*
 * comm.c - the Communicator type: ring_open from keyword arguments and the
 * environment, the process's place (rank, size, local and host), close and
 * the context manager, split, and the group brackets.
 *
 * Closing has two rules that Python needs and C callers keep by hand.  libring
 * forbids ring_close while another call runs on the communicator, so close()
 * refuses (InvalidArgumentError) while a call of another thread is running
 * without the GIL.  And ring_close unmaps the arena, under the arrays that
 * Communicator.empty made: while any of them lives, close() only marks the
 * communicator closed (no operation starts any more) and ring_close runs when
 * the last of them is freed.  A `with` block can end while its arena arrays
 * are still bound to names, so refusing would be the wrong answer there.
 * ring_close itself runs without the GIL, so another thread may call close()
 * (or drop the last array) meanwhile: ring_close runs once, marked closing,
 * and the others wait until it is done.
 */
#include "pyring.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int
pyr_comm_usable(pyr_comm *c, const char *fn)
{
	if (!c->comm || c->closed) {
		char msg[128];

		snprintf(msg, sizeof(msg), "%s: the communicator is %s", fn,
			 c->closed ? "closed" : "not open");
		pyr_raise(RING_ECLOSED, msg);
		return -1;
	}
	if (c->orphans)
		pyr_comm_sweep(c);
	return 0;
}

int
pyr_comm_call(pyr_comm *c, int (*fn)(ring_comm *, void *), void *arg, char *err,
	      size_t errlen)
{
	int code;

	c->busy++;
	Py_BEGIN_ALLOW_THREADS
	code = fn(c->comm, arg);
	if (code)
		snprintf(err, errlen, "%s", ring_last_error(c->comm));
	Py_END_ALLOW_THREADS
	c->busy--;
	return code;
}

/* ---- orphans: requests dropped in flight ---- */

void
pyr_comm_adopt(pyr_comm *c, ring_request *req, struct pyr_hold *h)
{
	if (!c->comm) {
		/* Closed: libring has let go of every buffer. */
		ring_request_free(req);
		pyr_hold_free(h);
		return;
	}
	h->req = req;
	h->next = c->orphans;
	c->orphans = h;
}

void
pyr_comm_sweep(pyr_comm *c)
{
	struct pyr_hold **pp = &c->orphans, *h;
	int done;

	while ((h = *pp) != NULL) {
		done = 0;
		(void)ring_test(h->req, &done);
		if (!done) {
			pp = &h->next;
			continue;
		}
		*pp = h->next;
		ring_request_free(h->req);
		pyr_hold_free(h);
	}
}

/* Frees a list of holds; orphans' requests too (after ring_close, which
 * completed them). */
static void
holds_free(struct pyr_hold *h)
{
	while (h) {
		struct pyr_hold *next = h->next;

		if (h->req)
			ring_request_free(h->req);
		pyr_hold_free(h);
		h = next;
	}
}

/* ring_close now, once: a second caller (another thread's close() while the
 * first runs without the GIL) waits until the first is done.  Every hold is
 * the caller's again after it. */
static void
comm_close_now(pyr_comm *c)
{
	struct timespec nap = { 0, 1000000 };
	ring_comm *rc = c->comm;

	if (c->closing) {
		/* As bounded as ring_close is (libring waits at most
		 * CLOSE_WAIT_MS for the daemon's goodbye). */
		while (c->closing) {
			Py_BEGIN_ALLOW_THREADS
			nanosleep(&nap, NULL);
			Py_END_ALLOW_THREADS
		}
		return;
	}
	if (!rc)
		return;
	c->closing = true;
	Py_BEGIN_ALLOW_THREADS
	ring_close(rc);
	Py_END_ALLOW_THREADS
	c->comm = NULL;
	c->closing = false;
	c->group_depth = 0;
	holds_free(c->group_holds);
	holds_free(c->orphans);
	c->group_holds = c->orphans = NULL;
}

void
pyr_comm_arena_gone(pyr_comm *c)
{
	if (--c->narena == 0 && c->closed)
		comm_close_now(c);
}

/* ---- open ---- */

static void
comm_place(pyr_comm *c)
{
	c->rank = ring_rank(c->comm);
	c->size = ring_size(c->comm);
	c->local_rank = ring_local_rank(c->comm);
	c->local_size = ring_local_size(c->comm);
	c->host_rank = ring_host_rank(c->comm);
	c->host_count = ring_host_count(c->comm);
}

/* The options from the keywords (None: from the environment). */
static int
comm_options(PyObject *const *v, struct ring_options *o)
{
	int lr = 0, ls = 0, t = 0, mb = 0;

	memset(o, 0, sizeof(*o));
	if (v[0] != Py_None && !(o->socket = PyUnicode_AsUTF8(v[0])))
		return -1;
	if (v[1] != Py_None && !(o->job = PyUnicode_AsUTF8(v[1])))
		return -1;
	if (v[6] != Py_None && !(o->wire = PyUnicode_AsUTF8(v[6])))
		return -1;
	if ((v[2] != Py_None) != (v[3] != Py_None)) {
		PyErr_SetString(PyExc_ValueError, "Communicator: local_rank and local_size "
				"come together (give both or neither)");
		return -1;
	}
	if ((v[2] != Py_None && pyr_int_arg("Communicator", "local_rank", v[2], &lr) < 0) ||
	    (v[3] != Py_None && pyr_int_arg("Communicator", "local_size", v[3], &ls) < 0) ||
	    (v[4] != Py_None && pyr_int_arg("Communicator", "timeout_ms", v[4], &t) < 0) ||
	    (v[5] != Py_None && pyr_int_arg("Communicator", "arena_mb", v[5], &mb) < 0))
		return -1;
	if ((v[3] != Py_None && ls < 1) || (v[4] != Py_None && t < 1) ||
	    (v[5] != Py_None && mb < 1)) {
		PyErr_Format(PyExc_ValueError, "Communicator: %s must be >= 1",
			     v[3] != Py_None && ls < 1 ? "local_size" :
			     v[4] != Py_None && t < 1 ? "timeout_ms" : "arena_mb");
		return -1;
	}
	o->local_rank = lr;
	o->local_size = ls;
	o->timeout_ms = t;
	o->arena_bytes = (size_t)mb << 20;
	/* join=True: a newcomer that a running job admits (ring_comm_grow) */
	if (v[7] != Py_None && (o->join = PyObject_IsTrue(v[7])) < 0)
		return -1;
	return 0;
}

/* A refused attach whose local rank this very process holds: the daemon
 * names the holder's pid ("already attached by pid N", "this same process
 * (pid N) already holds ...").  Through another pid namespace the pid differs
 * and the daemon's message stands as it is. */
static bool
attached_here(int code, const char *err)
{
	char pid[32];
	const char *p;
	size_t n;

	if (code != RING_EINVAL || !strstr(err, "already"))
		return false;
	n = (size_t)snprintf(pid, sizeof(pid), "pid %ld", (long)getpid());
	for (p = err; (p = strstr(p, pid)) != NULL; p += n)
		if (!isdigit((unsigned char)p[n]))
			return true;
	return false;
}

static int
comm_init(PyObject *self, PyObject *args, PyObject *kwds)
{
	static char *kw[] = { "socket", "job", "local_rank", "local_size", "timeout_ms",
			      "arena_mb", "wire", "join", NULL };
	pyr_comm *c = (pyr_comm *)self;
	PyObject *v[8] = { Py_None, Py_None, Py_None, Py_None,
			   Py_None, Py_None, Py_None, Py_None };
	struct ring_options o;
	char err[512] = "";
	ring_comm *rc = NULL;
	int code;

	if (!PyArg_ParseTupleAndKeywords(args, kwds, "|$OOOOOOOO:Communicator", kw, &v[0],
					 &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]))
		return -1;
	if (c->comm || c->closed) {
		PyErr_SetString(PyExc_RuntimeError, "Communicator: already opened");
		return -1;
	}
	if (comm_options(v, &o) < 0)
		return -1;
	/* ring_open waits (bounded) until every rank of the job has attached. */
	Py_BEGIN_ALLOW_THREADS
	code = ring_open(&rc, &o);
	if (code)
		snprintf(err, sizeof(err), "%s", ring_last_error(NULL));
	Py_END_ALLOW_THREADS
	if (code && attached_here(code, err)) {
		char msg[1024];

		snprintf(msg, sizeof(msg), "Communicator: this process (pid %ld) already has a "
			 "Communicator open on this job as this local rank, and a process "
			 "holds a local rank once: use that one (pass it to the code that needs it; "
			 "comm.split(0) gives a second communicator of the same ranks), or "
			 "close() it first (the daemon said: %s)", (long)getpid(), err);
		pyr_raise(code, msg);
		return -1;
	}
	if (code) {
		pyr_raise(code, err);
		return -1;
	}
	c->comm = rc;
	comm_place(c);
	return 0;
}

static void
comm_dealloc(PyObject *self)
{
	pyr_comm *c = (pyr_comm *)self;

	if (c->weakrefs)
		PyObject_ClearWeakRefs(self);
	/* Nothing refers to us: no arena block, no request, no call running. */
	comm_close_now(c);
	Py_TYPE(self)->tp_free(self);
}

/* ---- methods ---- */

static PyObject *
comm_close(PyObject *self, PyObject *unused)
{
	pyr_comm *c = (pyr_comm *)self;
	char msg[160];

	if (c->busy) {
		snprintf(msg, sizeof(msg), "close: %d call%s of other threads %s still running "
			 "on this communicator; close it after they return", c->busy,
			 c->busy == 1 ? "" : "s", c->busy == 1 ? "is" : "are");
		pyr_raise(RING_EINVAL, msg);
		return NULL;
	}
	c->closed = true;
	if (c->narena == 0)
		comm_close_now(c);
	Py_RETURN_NONE;
}

static PyObject *
comm_enter(PyObject *self, PyObject *unused)
{
	return Py_NewRef(self);
}

static PyObject *
comm_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
	return comm_close(self, NULL);
}

struct split_args {
	int color, key;
	ring_comm *out;
};

static int
split_cb(ring_comm *rc, void *arg)
{
	struct split_args *a = arg;

	return ring_split(rc, a->color, a->key, &a->out);
}

static PyObject *
comm_split(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	static const char *const names[] = { "color", "key", NULL };
	pyr_comm *c = (pyr_comm *)self, *child;
	PyObject *v[2];
	struct split_args a = { 0, 0, NULL };
	ring_comm *out;
	char err[512] = "";
	int code;

	if (pyr_parse("split", args, nargs, kwnames, names, 2, 1, v) < 0 ||
	    pyr_int_arg("split", "color", v[0], &a.color) < 0 ||
	    pyr_comm_usable(c, "split") < 0)
		return NULL;
	a.key = c->rank;
	if (v[1] && v[1] != Py_None && pyr_int_arg("split", "key", v[1], &a.key) < 0)
		return NULL;
	code = pyr_comm_call(c, split_cb, &a, err, sizeof(err));
	if (code) {
		pyr_raise(code, err);
		return NULL;
	}
	out = a.out;
	if (!out)
		Py_RETURN_NONE;	/* a negative color: no group */
	child = (pyr_comm *)Py_TYPE(self)->tp_alloc(Py_TYPE(self), 0);
	if (!child) {
		Py_BEGIN_ALLOW_THREADS
		ring_close(out);
		Py_END_ALLOW_THREADS
		return NULL;
	}
	child->comm = out;
	comm_place(child);
	return (PyObject *)child;
}

static int
revoke_cb(ring_comm *rc, void *unused)
{
	return ring_comm_revoke(rc);
}

/* ring_comm_revoke: may run while another thread waits on c (it does not
 * wait itself), so it needs no more than an open communicator. */
static PyObject *
comm_revoke(PyObject *self, PyObject *unused)
{
	pyr_comm *c = (pyr_comm *)self;
	char err[512] = "";
	int code;

	if (pyr_comm_usable(c, "revoke") < 0)
		return NULL;
	code = pyr_comm_call(c, revoke_cb, NULL, err, sizeof(err));
	if (code) {
		pyr_raise(code, err);
		return NULL;
	}
	Py_RETURN_NONE;
}

static int
shrink_cb(ring_comm *rc, void *arg)
{
	return ring_comm_shrink(rc, (ring_comm **)arg);
}

static PyObject *
comm_shrink(PyObject *self, PyObject *unused)
{
	pyr_comm *c = (pyr_comm *)self, *child;
	ring_comm *out = NULL;
	char err[512] = "";
	int code;

	if (pyr_comm_usable(c, "shrink") < 0)
		return NULL;
	code = pyr_comm_call(c, shrink_cb, &out, err, sizeof(err));
	if (code) {
		pyr_raise(code, err);
		return NULL;
	}
	child = (pyr_comm *)Py_TYPE(self)->tp_alloc(Py_TYPE(self), 0);
	if (!child) {
		Py_BEGIN_ALLOW_THREADS
		ring_close(out);
		Py_END_ALLOW_THREADS
		return NULL;
	}
	child->comm = out;
	comm_place(child);
	return (PyObject *)child;
}

/* ring_comm_grow's arguments through pyr_comm_call. */
struct grow_args {
	int add;
	ring_comm *out;
};

static int
grow_cb(ring_comm *rc, void *arg)
{
	struct grow_args *g = arg;

	return ring_comm_grow(rc, g->add, &g->out);
}

static PyObject *
comm_grow(PyObject *self, PyObject *add)
{
	pyr_comm *c = (pyr_comm *)self, *child;
	struct grow_args g = { 0, NULL };
	char err[512] = "";
	int code;

	if (pyr_int_arg("grow", "add", add, &g.add) < 0 || pyr_comm_usable(c, "grow") < 0)
		return NULL;
	code = pyr_comm_call(c, grow_cb, &g, err, sizeof(err));
	if (code) {
		pyr_raise(code, err);
		return NULL;
	}
	child = (pyr_comm *)Py_TYPE(self)->tp_alloc(Py_TYPE(self), 0);
	if (!child) {
		Py_BEGIN_ALLOW_THREADS
		ring_close(g.out);
		Py_END_ALLOW_THREADS
		return NULL;
	}
	child->comm = g.out;
	comm_place(child);
	return (PyObject *)child;
}

static int
group_start_cb(ring_comm *rc, void *unused)
{
	return ring_group_start(rc);
}

static int
group_end_cb(ring_comm *rc, void *unused)
{
	return ring_group_end(rc);
}

static PyObject *
comm_group_start(PyObject *self, PyObject *unused)
{
	pyr_comm *c = (pyr_comm *)self;
	char err[512] = "";
	int code;

	if (pyr_comm_usable(c, "group_start") < 0)
		return NULL;
	code = pyr_comm_call(c, group_start_cb, NULL, err, sizeof(err));
	if (code) {
		pyr_raise(code, err);
		return NULL;
	}
	c->group_depth++;
	Py_RETURN_NONE;
}

static PyObject *
comm_group_end(PyObject *self, PyObject *unused)
{
	pyr_comm *c = (pyr_comm *)self;
	char err[512] = "";
	int code;

	/* Closed: ring_close may be running, and it ends the group itself. */
	if (!c->comm || c->closed || c->group_depth == 0) {
		bool open = c->comm && !c->closed;

		pyr_raise(open ? RING_EINVAL : RING_ECLOSED, open ?
			  "group_end: no group is open (group_start first)" :
			  "group_end: the communicator is closed");
		return NULL;
	}
	code = pyr_comm_call(c, group_end_cb, NULL, err, sizeof(err));
	/* The outermost end ran the group: its blocking calls are done. */
	if (--c->group_depth == 0) {
		holds_free(c->group_holds);
		c->group_holds = NULL;
	}
	if (code) {
		pyr_raise(code, err);
		return NULL;
	}
	Py_RETURN_NONE;
}

static PyObject *
comm_repr(PyObject *self)
{
	pyr_comm *c = (pyr_comm *)self;

	if (!c->comm)
		return PyUnicode_FromFormat("<ringd.Communicator %s>",
					    c->closed ? "closed" : "not open");
	return PyUnicode_FromFormat("<ringd.Communicator rank %d of %d, local %d of %d, "
				    "host %d of %d%s>", c->rank, c->size, c->local_rank,
				    c->local_size, c->host_rank, c->host_count,
				    c->closed ? ", closing" : "");
}

/* ---- the type ---- */

#define PLACE(field)									\
static PyObject *									\
get_##field(PyObject *self, void *closure)						\
{											\
	return PyLong_FromLong(((pyr_comm *)self)->field);				\
}
PLACE(rank)
PLACE(size)
PLACE(local_rank)
PLACE(local_size)
PLACE(host_rank)
PLACE(host_count)

static PyObject *
get_closed(PyObject *self, void *closure)
{
	pyr_comm *c = (pyr_comm *)self;

	return PyBool_FromLong(c->closed || !c->comm);
}

static PyGetSetDef comm_getset[] = {
	{ "rank", get_rank, NULL, "This process's rank in the job (0 .. size-1).", NULL },
	{ "size", get_size, NULL, "The number of ranks.", NULL },
	{ "local_rank", get_local_rank, NULL, "This process's index among the job's "
	  "processes on its host.", NULL },
	{ "local_size", get_local_size, NULL, "The job's processes on this host.", NULL },
	{ "host_rank", get_host_rank, NULL, "This host's place among the job's hosts.", NULL },
	{ "host_count", get_host_count, NULL, "The number of hosts the job spans.", NULL },
	{ "closed", get_closed, NULL, "True once close() was called.", NULL },
	{ NULL, NULL, NULL, NULL, NULL }
};

#define FASTKW (METH_FASTCALL | METH_KEYWORDS)
static PyMethodDef comm_methods[] = {
	{ "close", comm_close, METH_NOARGS, "close($self)\n--\n\nLeaves the job (at once, or "
	  "once the last array of empty() is gone).  Idempotent." },
	{ "__enter__", comm_enter, METH_NOARGS, NULL },
	{ "__exit__", (PyCFunction)(void (*)(void))comm_exit, METH_FASTCALL, NULL },
	{ "split", (PyCFunction)(void (*)(void))comm_split, FASTKW,
	  "split($self, color, key=None)\n--\n\nA collective: the ranks that pass the same "
	  "color >= 0 form a new Communicator, ordered by key (default: rank); a negative "
	  "color gives None." },
	{ "revoke", comm_revoke, METH_NOARGS, "revoke($self)\n--\n\nEvery pending and "
	  "later operation of the job fails at once on every rank with RevokedError "
	  "(ring_comm_revoke); safe from another thread while one waits." },
	{ "shrink", comm_shrink, METH_NOARGS, "shrink($self)\n--\n\nAfter a PeerError, "
	  "AbortedError or RevokedError: a new Communicator of the surviving ranks, "
	  "renumbered densely in the old order (ring_comm_shrink); this one can then only "
	  "be closed.  A healthy communicator raises InvalidArgumentError." },
	{ "grow", comm_grow, METH_O, "grow($self, add)\n--\n\nA collective: admits add "
	  "newcomers (processes that opened the job's name with join=True or RING_JOIN=1) "
	  "and returns a Communicator of size + add ranks, every rank keeping its own, the "
	  "newcomers after (ring_comm_grow); this one stays usable.  Newcomers that do not "
	  "come within half the timeout raise TimeoutError saying how many came; add < 1, a "
	  "size that does not fit or a job that is not healthy raise InvalidArgumentError." },
	{ "group_start", comm_group_start, METH_NOARGS, "group_start($self)\n--\n\n"
	  "Records the following operations (ring_group_start); see ringd.group." },
	{ "group_end", comm_group_end, METH_NOARGS, "group_end($self)\n--\n\nStarts what "
	  "was recorded and waits for its blocking calls (ring_group_end)." },
	{ "empty", (PyCFunction)(void (*)(void))pyr_comm_empty, FASTKW,
	  "empty($self, shape, dtype=float)\n--\n\nA numpy array in the shared arena "
	  "(zero-copy).  dtype: numpy's, or a ringd dtype (BFLOAT16 gives uint16)." },
	{ NULL, NULL, 0, NULL }
};

/* Communicator's own methods and the collectives of coll.c as one table, for
 * PyType_Ready. */
void
pyr_comm_type_prepare(void)
{
	static PyMethodDef all[64];
	size_t n = 0, i;

	for (i = 0; comm_methods[i].ml_name && n + 1 < 64; i++)
		all[n++] = comm_methods[i];
	for (i = 0; pyr_coll_methods[i].ml_name && n + 1 < 64; i++)
		all[n++] = pyr_coll_methods[i];
	for (i = 0; pyr_state_methods[i].ml_name && n + 1 < 64; i++)
		all[n++] = pyr_state_methods[i];
	pyr_CommType.tp_methods = all;
}

PyTypeObject pyr_CommType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "ringd.Communicator",
	.tp_basicsize = sizeof(pyr_comm),
	.tp_dealloc = comm_dealloc,
	.tp_repr = comm_repr,
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
	.tp_doc = "Communicator(*, socket=None, job=None, local_rank=None, local_size=None, "
		  "timeout_ms=None, arena_mb=None, wire=None)\n--\n\n"
		  "A communicator of a job on the local ringd (ring_open).  Arguments left "
		  "None come from the environment (RING_SOCKET, RING_JOB, the launcher's "
		  "variables, RING_TIMEOUT_MS, RING_ARENA_MB, RING_WIRE).  Waits until every "
		  "rank of the job has attached.  wire=\"bf16\" or \"fp16\": the float32 "
		  "sums and averages of all_reduce and reduce_scatter travel between hosts "
		  "compressed (each call's wire= overrides it).\n\n"
		  "A process attaches to a job once per local rank: while a Communicator "
		  "is open, another one of the same job and local rank in the same "
		  "process is refused (InvalidArgumentError, saying so).  Share the open "
		  "one (it may be used from several threads), or comm.split(0) for a "
		  "second communicator of the same ranks (its own job, its own sequence "
		  "of operations, e.g. for a library that must not interleave with "
		  "yours).",
	.tp_weaklistoffset = offsetof(pyr_comm, weakrefs),
	.tp_getset = comm_getset,
	.tp_init = comm_init,
	.tp_new = PyType_GenericNew,
};
