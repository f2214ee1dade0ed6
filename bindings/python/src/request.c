/*
 * request.c - the Request type: one non-blocking operation of libring
 * (ring_request) and the buffers it uses.  A Request keeps its communicator
 * and its buffers alive until the operation is complete; wait() and test()
 * report the request's own failure (ring_request_error) as the exception of
 * its code.  A Request dropped while still in flight hands its buffers to the
 * communicator, which lets go of them once libring has (comm.c's orphans):
 * dropping one never blocks and never frees memory libring still writes.
 */
#include "pyring.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
	PyObject_HEAD
	pyr_comm *comm;		/* strong: the communicator outlives its requests */
	ring_request *req;
	struct pyr_hold *hold;	/* the buffers; NULL once complete */
	const char *fn;		/* the method that made it */
	bool done;
	int status;		/* 0 or the RING_E* it completed with */
} pyr_request;

PyObject *
pyr_request_new(pyr_comm *c, ring_request *req, struct pyr_op *op)
{
	struct pyr_hold *h = pyr_hold_keep(&op->hold);
	pyr_request *r = h ? PyObject_New(pyr_request, &pyr_RequestType) : NULL;

	if (!r) {
		/* Cannot keep the buffers: finish the operation here instead.  No
		 * Request was made (a half-built one must not reach req_dealloc),
		 * and the buffers are in h, or still in op->hold. */
		PyErr_Clear();
		c->busy++;
		Py_BEGIN_ALLOW_THREADS
		ring_wait(req);
		ring_request_free(req);
		Py_END_ALLOW_THREADS
		c->busy--;
		pyr_hold_free(h);
		pyr_hold_release(&op->hold);
		return PyErr_NoMemory();
	}
	r->comm = (pyr_comm *)Py_NewRef((PyObject *)c);
	r->req = req;
	r->hold = h;
	r->fn = op->fn;
	r->done = false;
	r->status = 0;
	return (PyObject *)r;
}

/* The request is complete with status rc: its buffers are free. */
static void
req_complete(pyr_request *r, int rc)
{
	r->done = true;
	r->status = rc;
	pyr_hold_free(r->hold);
	r->hold = NULL;
}

/* True (new reference) for a completion, or NULL with the request's error. */
static PyObject *
req_result(pyr_request *r)
{
	if (r->status) {
		pyr_raise(r->status, ring_request_error(r->req));
		return NULL;
	}
	Py_RETURN_TRUE;
}

static int
req_usable(pyr_request *r, const char *fn)
{
	char msg[160];

	if (!r->comm->closing)
		return 0;
	snprintf(msg, sizeof(msg), "%s: the communicator of this %s request is being closed",
		 fn, r->fn);
	pyr_raise(RING_ECLOSED, msg);
	return -1;
}

static int64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ring_test until done or the deadline; sleeps 20 us, doubling up to 1 ms,
 * between tries.  Runs without the GIL. */
static int
req_poll(ring_request *req, int64_t deadline, int *done)
{
	int64_t nap = 20000, left;
	struct timespec ts;
	int rc;

	for (;;) {
		rc = ring_test(req, done);
		if (*done || rc || (left = deadline - now_ns()) <= 0)
			return rc;
		if (nap > left)
			nap = left;
		ts.tv_sec = 0;
		ts.tv_nsec = (long)nap;
		nanosleep(&ts, NULL);
		if (nap < 1000000)
			nap *= 2;
	}
}

/* Waits (bounded by timeout seconds when >= 0); 1 done, 0 not yet, -1 error. */
static int
req_wait(pyr_request *r, double timeout)
{
	char err[512] = "";
	int rc, done = 0;

	r->comm->busy++;
	Py_BEGIN_ALLOW_THREADS
	if (timeout < 0) {
		rc = ring_wait(r->req);
		done = rc == 0;
		if (rc) {
			if (r->comm->comm)
				snprintf(err, sizeof(err), "%s", ring_last_error(r->comm->comm));
			/* A failed operation, or a wait that could not start (a group
			 * still open)?  Only the first is complete. */
			(void)ring_test(r->req, &done);
		}
	} else {
		rc = req_poll(r->req, now_ns() + (int64_t)(timeout * 1e9), &done);
		if (rc && !done && r->comm->comm)
			snprintf(err, sizeof(err), "%s", ring_last_error(r->comm->comm));
	}
	Py_END_ALLOW_THREADS
	r->comm->busy--;
	if (done) {
		req_complete(r, rc);
		return 1;
	}
	if (rc) {
		pyr_raise(rc, err);
		return -1;
	}
	return 0;
}

static PyObject *
req_wait_m(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	static const char *const names[] = { "timeout", NULL };
	pyr_request *r = (pyr_request *)self;
	PyObject *v[1];
	double timeout = -1;
	int got;

	if (pyr_parse("wait", args, nargs, kwnames, names, 1, 0, v) < 0)
		return NULL;
	if (v[0] && v[0] != Py_None) {
		timeout = PyFloat_AsDouble(v[0]);
		if (timeout == -1 && PyErr_Occurred())
			return NULL;
		if (timeout < 0 || timeout != timeout) {
			PyErr_SetString(PyExc_ValueError, "wait: timeout must be >= 0 seconds "
					"(or None: the operation's own bound)");
			return NULL;
		}
	}
	if (!r->done) {
		if (req_usable(r, "wait") < 0 || (got = req_wait(r, timeout)) < 0)
			return NULL;
		if (!got)
			Py_RETURN_FALSE;
	}
	return req_result(r);
}

static PyObject *
req_test_m(PyObject *self, PyObject *unused)
{
	pyr_request *r = (pyr_request *)self;
	int got;

	if (!r->done) {
		if (req_usable(r, "test") < 0 || (got = req_wait(r, 0)) < 0)
			return NULL;
		if (!got)
			Py_RETURN_FALSE;
	}
	return req_result(r);
}

static PyObject *
req_enter(PyObject *self, PyObject *unused)
{
	return Py_NewRef(self);
}

/* Waits on the way out; an exception already leaving the block wins over
 * the request's own. */
static PyObject *
req_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
	PyObject *res = req_wait_m(self, NULL, 0, NULL);

	if (nargs > 0 && args[0] != Py_None) {
		Py_XDECREF(res);
		PyErr_Clear();
		Py_RETURN_FALSE;
	}
	if (!res)
		return NULL;
	Py_DECREF(res);
	Py_RETURN_FALSE;
}

static void
req_dealloc(PyObject *self)
{
	pyr_request *r = (pyr_request *)self;
	pyr_comm *c = r->comm;
	struct pyr_hold *h = r->hold;
	int done = r->done;

	if (!done && !c->closing && c->comm)
		(void)ring_test(r->req, &done);
	if (done && !c->closing) {
		ring_request_free(r->req);
		pyr_hold_free(h);
	} else {
		/* libring may still use the buffers: the communicator keeps them. */
		if (!h)		/* empty: pyr_hold_free takes it (PyMem) */
			h = PyMem_Calloc(1, sizeof(*h));
		if (h)
			pyr_comm_adopt(c, r->req, h);
	}
	Py_DECREF((PyObject *)c);
	PyObject_Free(self);
}

static PyObject *
req_repr(PyObject *self)
{
	pyr_request *r = (pyr_request *)self;

	return PyUnicode_FromFormat("<ringd.Request %s: %s>", r->fn,
				    !r->done ? "in flight" : r->status ? "failed" : "done");
}

static PyMethodDef req_methods[] = {
	{ "wait", (PyCFunction)(void (*)(void))req_wait_m, METH_FASTCALL | METH_KEYWORDS,
	  "wait($self, timeout=None)\n--\n\nWaits until the operation is complete and "
	  "returns True, or raises its error.  With a timeout (seconds) returns False "
	  "if it is still running then.  Without one, the operation's own bound "
	  "(timeout_ms) applies." },
	{ "test", req_test_m, METH_NOARGS, "test($self)\n--\n\nTrue when complete (raises "
	  "its error if it failed), False while in flight; never waits." },
	{ "__enter__", req_enter, METH_NOARGS, NULL },
	{ "__exit__", (PyCFunction)(void (*)(void))req_exit, METH_FASTCALL, NULL },
	{ NULL, NULL, 0, NULL }
};

PyTypeObject pyr_RequestType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "ringd.Request",
	.tp_basicsize = sizeof(pyr_request),
	.tp_dealloc = req_dealloc,
	.tp_repr = req_repr,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "One non-blocking operation (from a Communicator's i... method).  It holds "
		  "its buffers until complete; `with req:` waits on exit.",
	.tp_methods = req_methods,
};
