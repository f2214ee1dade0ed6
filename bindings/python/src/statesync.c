/*
 * statesync.c - Communicator.sync_state, over ring_state_sync: a list, tuple
 * or dict of writable buffers (numpy arrays, bytearrays, torch CPU tensors'
 * .numpy()) made identical on every rank, by their bytes whatever their
 * dtype.  The report is a dict of the buffers that differed somewhere (keys:
 * the dict's, else the indices), each a dict of the ranks whose copy differed
 * and the rank each received the agreed version from; empty (false) when
 * every rank held the same.  A refusal that names a buffer by index ("buffer
 * 2 is ...") also names it by its key.
 */
#include "pyring.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sync_args {
	int n;
	void **bufs;
	size_t *sizes;
	int *source;
};

static int
sync_cb(ring_comm *rc, void *arg)
{
	struct sync_args *a = arg;

	return ring_state_sync(rc, a->n, a->bufs, a->sizes, a->source);
}

/* The buffers' keys and objects, in order: a dict's items, else the
 * sequence's indices.  New references in *keys and *objs (lists). */
static int
sync_items(PyObject *buffers, PyObject **keys, PyObject **objs)
{
	if (PyDict_Check(buffers)) {
		*keys = PyDict_Keys(buffers);
		*objs = PyDict_Values(buffers);
	} else {
		PyObject *seq = PySequence_Fast(buffers, "sync_state: buffers must be a list, "
						"tuple or dict of writable buffers");
		Py_ssize_t i, n;

		if (!seq)
			return -1;
		n = PySequence_Fast_GET_SIZE(seq);
		*objs = PySequence_List(seq);
		*keys = PyList_New(n);
		Py_DECREF(seq);
		for (i = 0; *keys && i < n; i++)
			PyList_SET_ITEM(*keys, i, PyLong_FromSsize_t(i));
	}
	if (!*keys || !*objs) {
		Py_CLEAR(*keys);
		Py_CLEAR(*objs);
		return -1;
	}
	return 0;
}

/* Raises code with libring's message, naming the buffer it names by its key. */
static void
sync_raise(int code, const char *err, PyObject *keys)
{
	const char *at = strstr(err, "buffer ");
	char msg[1024];
	int b;

	if (at && sscanf(at, "buffer %d", &b) == 1 && b >= 0 && b < PyList_GET_SIZE(keys) &&
	    !PyLong_Check(PyList_GET_ITEM(keys, b))) {
		PyObject *r = PyObject_Repr(PyList_GET_ITEM(keys, b));
		const char *name = r ? PyUnicode_AsUTF8(r) : NULL;

		if (name) {
			snprintf(msg, sizeof(msg), "%s (buffer %d is %s)", err, b, name);
			Py_DECREF(r);
			pyr_raise(code, msg);
			return;
		}
		Py_XDECREF(r);
		PyErr_Clear();
	}
	pyr_raise(code, err);
}

/* The report: {key: {rank: source}} for the buffers that differed. */
static PyObject *
sync_report(const struct sync_args *a, PyObject *keys, int size)
{
	PyObject *rep = PyDict_New(), *ranks = NULL;
	int b, r;

	for (b = 0; rep && b < a->n; b++) {
		ranks = NULL;
		for (r = 0; r < size; r++) {
			int src = a->source[(size_t)b * size + r];
			PyObject *k, *v;
			int bad;

			if (src < 0)
				continue;
			if (!ranks && !(ranks = PyDict_New()))
				goto fail;
			k = PyLong_FromLong(r);
			v = PyLong_FromLong(src);
			bad = !k || !v || PyDict_SetItem(ranks, k, v) < 0;
			Py_XDECREF(k);
			Py_XDECREF(v);
			if (bad)
				goto fail;
		}
		if (ranks && PyDict_SetItem(rep, PyList_GET_ITEM(keys, b), ranks) < 0)
			goto fail;
		Py_CLEAR(ranks);
	}
	return rep;
fail:
	Py_XDECREF(ranks);
	Py_XDECREF(rep);
	return NULL;
}

/* Acquires every buffer writable and C-contiguous into views (nviews of
 * them on return, also on failure). */
static int
sync_views(PyObject *keys, PyObject *objs, Py_buffer *views, int *nviews,
	   struct sync_args *a)
{
	for (int b = 0; b < a->n; b++) {
		if (PyObject_GetBuffer(PyList_GET_ITEM(objs, b), &views[b],
				       PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
			PyObject *r = PyObject_Repr(PyList_GET_ITEM(keys, b));

			PyErr_Clear();
			PyErr_Format(PyExc_TypeError, "sync_state: buffer %S is not a writable, "
				     "C-contiguous buffer (numpy arrays, bytearray, a CPU "
				     "tensor's .numpy())", r ? r : Py_None);
			Py_XDECREF(r);
			return -1;
		}
		*nviews = b + 1;
		a->bufs[b] = views[b].buf;
		a->sizes[b] = (size_t)views[b].len;
	}
	return 0;
}

static PyObject *
comm_sync_state(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	static const char *const names[] = { "buffers", NULL };
	pyr_comm *c = (pyr_comm *)self;
	PyObject *vals[1], *keys = NULL, *objs = NULL, *rep = NULL;
	struct sync_args a = { 0 };
	Py_buffer *views = NULL;
	int nviews = 0, code;
	char err[1024] = "";

	if (pyr_parse("sync_state", args, nargs, kwnames, names, 1, 1, vals) < 0 ||
	    pyr_comm_usable(c, "sync_state") < 0 || sync_items(vals[0], &keys, &objs) < 0)
		return NULL;
	if (PyList_GET_SIZE(objs) > INT_MAX / (c->size > 0 ? c->size : 1)) {
		PyErr_Format(PyExc_ValueError, "sync_state: %zd buffers are too many",
			     PyList_GET_SIZE(objs));
		goto out;
	}
	a.n = (int)PyList_GET_SIZE(objs);
	views = PyMem_Calloc((size_t)a.n + 1, sizeof(*views));
	a.bufs = PyMem_Calloc((size_t)a.n + 1, sizeof(*a.bufs));
	a.sizes = PyMem_Calloc((size_t)a.n + 1, sizeof(*a.sizes));
	a.source = PyMem_Calloc((size_t)a.n * c->size + 1, sizeof(*a.source));
	if (!views || !a.bufs || !a.sizes || !a.source) {
		PyErr_NoMemory();
		goto out;
	}
	if (sync_views(keys, objs, views, &nviews, &a) < 0)
		goto out;
	code = pyr_comm_call(c, sync_cb, &a, err, sizeof(err));
	if (code)
		sync_raise(code, err, keys);
	else
		rep = sync_report(&a, keys, c->size);
out:
	for (int b = 0; b < nviews; b++)
		PyBuffer_Release(&views[b]);
	PyMem_Free(views);
	PyMem_Free(a.bufs);
	PyMem_Free(a.sizes);
	PyMem_Free(a.source);
	Py_XDECREF(keys);
	Py_XDECREF(objs);
	return rep;
}

PyMethodDef pyr_state_methods[] = {
	{ "sync_state", (PyCFunction)(void (*)(void))comm_sync_state,
	  METH_FASTCALL | METH_KEYWORDS,
	  "sync_state($self, buffers)\n--\n\nA collective: makes the buffers (a list, "
	  "tuple or dict of writable, C-contiguous buffers, the same sizes in the same "
	  "order on every rank) bit-identical on every rank (ring_state_sync): per "
	  "buffer, the version most ranks hold wins (a tie: the lowest rank's) and only "
	  "the ranks that lack it receive it.  Returns {key: {rank: source}} for the "
	  "buffers that differed (keys: the dict's, else indices): empty when all "
	  "ranks held the same, which costs one all-gather of 64 bytes per rank and "
	  "sends no buffer data.  Different counts or sizes raise MismatchError." },
	{ NULL, NULL, 0, NULL }
};
