/*
 * arena.c - Communicator.empty: numpy arrays whose memory is a ring_alloc
 * block of the communicator's shared arena, so collectives on them copy
 * nothing.  A small object (ArenaBlock) owns the block and exports it through
 * the buffer protocol; numpy.frombuffer makes the array over it and keeps it
 * as the array's base, so the block lives exactly as long as the array (and
 * any view of it) and is handed back with ring_free when the last one dies.
 * The block also keeps the communicator alive, and close() leaves the arena
 * mapped until the last block is gone (comm.c).  A block is counted from
 * before ring_alloc runs (without the GIL) on: a close() of another thread
 * meanwhile only marks the communicator closed, and empty() then gives the
 * block back and raises ClosedError rather than return an array that the
 * closing would leave pointing at an unmapped arena.  numpy is used through its
 * Python API: the module needs numpy's headers neither to build nor to load,
 * only empty() imports it.
 */
#include "pyring.h"

typedef struct {
	PyObject_HEAD
	pyr_comm *comm;		/* strong */
	void *ptr;		/* the ring_alloc block */
	Py_ssize_t len;		/* bytes exported (the block may be larger) */
} pyr_block;

static int
block_getbuffer(PyObject *self, Py_buffer *view, int flags)
{
	pyr_block *b = (pyr_block *)self;

	return PyBuffer_FillInfo(view, self, b->ptr, b->len, 0, flags);
}

static PyBufferProcs block_as_buffer = { block_getbuffer, NULL };

/* Gives block p back, and with it its count: the last one of a closed
 * communicator closes it. */
static void
block_drop(pyr_comm *c, void *p)
{
	/* narena > 0 kept ring_close away: c->comm is open. */
	Py_BEGIN_ALLOW_THREADS
	ring_free(c->comm, p);
	Py_END_ALLOW_THREADS
	pyr_comm_arena_gone(c);
}

static void
block_dealloc(PyObject *self)
{
	pyr_block *b = (pyr_block *)self;
	pyr_comm *c = b->comm;

	block_drop(c, b->ptr);
	Py_DECREF((PyObject *)c);
	PyObject_Free(self);
}

PyTypeObject pyr_ArenaBlockType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "ringd._ArenaBlock",
	.tp_basicsize = sizeof(pyr_block),
	.tp_dealloc = block_dealloc,
	.tp_as_buffer = &block_as_buffer,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "A block of a communicator's shared arena (the base of an array from "
		  "Communicator.empty).",
};

/* A new block of bytes in c's arena, or NULL with OutOfMemoryError (or
 * ClosedError: another thread closed c meanwhile). */
static PyObject *
block_new(pyr_comm *c, size_t bytes)
{
	pyr_block *b;
	char err[512] = "";
	void *p;

	/* Counted before the GIL goes: close() leaves ring_close to the last
	 * block's end (pyr_comm_arena_gone), this one's included. */
	c->narena++;
	/* A zero-size array still gets a block of its own: one free each. */
	Py_BEGIN_ALLOW_THREADS
	p = ring_alloc(c->comm, bytes ? bytes : 1);
	if (!p)
		snprintf(err, sizeof(err), "empty: %s", ring_last_error(c->comm));
	Py_END_ALLOW_THREADS
	if (p && c->closed) {
		snprintf(err, sizeof(err), "empty: the communicator was closed (by another "
			 "thread) while the array was being made");
		block_drop(c, p);
		pyr_raise(RING_ECLOSED, err);
		return NULL;
	}
	if (!p) {
		pyr_comm_arena_gone(c);
		pyr_raise(RING_ENOMEM, err);
		return NULL;
	}
	b = PyObject_New(pyr_block, &pyr_ArenaBlockType);
	if (!b) {
		block_drop(c, p);
		return NULL;
	}
	b->comm = (pyr_comm *)Py_NewRef((PyObject *)c);
	b->ptr = p;
	b->len = (Py_ssize_t)bytes;
	return (PyObject *)b;
}

/* numpy's name for a ringd dtype (bfloat16's bits in uint16). */
static const char *const np_names[RING_DTYPE_COUNT] = {
	[RING_BOOL] = "bool", [RING_INT8] = "int8", [RING_UINT8] = "uint8",
	[RING_INT16] = "int16", [RING_UINT16] = "uint16", [RING_INT32] = "int32",
	[RING_UINT32] = "uint32", [RING_INT64] = "int64", [RING_UINT64] = "uint64",
	[RING_FLOAT16] = "float16", [RING_BFLOAT16] = "uint16", [RING_FLOAT32] = "float32",
	[RING_FLOAT64] = "float64",
};

/* numpy.dtype for the dtype argument: ringd's constants and names first. */
static PyObject *
np_dtype(PyObject *np, PyObject *arg)
{
	PyObject *name;

	if (!arg || arg == Py_None)
		return PyObject_CallMethod(np, "dtype", "s", "float64");
	if (PyLong_Check(arg) || (PyUnicode_Check(arg) &&
				  (PyUnicode_CompareWithASCIIString(arg, "bfloat16") == 0 ||
				   PyUnicode_CompareWithASCIIString(arg, "bf16") == 0))) {
		int d = pyr_dtype_arg("empty", arg);

		return d < 0 ? NULL : PyObject_CallMethod(np, "dtype", "s", np_names[d]);
	}
	name = PyObject_CallMethod(np, "dtype", "O", arg);
	return name;
}

/* The element count of shape (an int or a sequence of ints), or -1. */
static Py_ssize_t
shape_count(PyObject *shape)
{
	PyObject *seq, *it;
	Py_ssize_t n = 1, i, d;

	if (PyIndex_Check(shape) && !PySequence_Check(shape)) {
		d = PyNumber_AsSsize_t(shape, PyExc_OverflowError);
		if (d == -1 && PyErr_Occurred())
			return -1;
		return d < 0 ? (PyErr_SetString(PyExc_ValueError, "empty: negative dimension"),
				-1) : d;
	}
	seq = PySequence_Fast(shape, "empty: shape must be an int or a sequence of ints");
	if (!seq)
		return -1;
	for (i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
		it = PySequence_Fast_GET_ITEM(seq, i);
		d = PyNumber_AsSsize_t(it, PyExc_OverflowError);
		if (d == -1 && PyErr_Occurred()) {
			Py_DECREF(seq);
			return -1;
		}
		if (d < 0 || (d && n > PY_SSIZE_T_MAX / d)) {
			Py_DECREF(seq);
			PyErr_SetString(PyExc_ValueError, d < 0 ? "empty: negative dimension" :
					"empty: the shape is too large");
			return -1;
		}
		n *= d;
	}
	Py_DECREF(seq);
	return n;
}

PyObject *
pyr_comm_empty(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	static const char *const names[] = { "shape", "dtype", NULL };
	pyr_comm *c = (pyr_comm *)self;
	PyObject *v[2], *np = NULL, *dt = NULL, *isz = NULL, *blk = NULL, *flat = NULL;
	PyObject *arr = NULL;
	Py_ssize_t n, itemsize;

	if (pyr_parse("empty", args, nargs, kwnames, names, 2, 1, v) < 0 ||
	    pyr_comm_usable(c, "empty") < 0 || (n = shape_count(v[0])) < 0)
		return NULL;
	np = PyImport_ImportModule("numpy");
	if (!np || !(dt = np_dtype(np, v[1])) ||
	    !(isz = PyObject_GetAttrString(dt, "itemsize")))
		goto out;
	itemsize = PyLong_AsSsize_t(isz);
	if (itemsize <= 0 || n > PY_SSIZE_T_MAX / itemsize) {
		if (!PyErr_Occurred())
			PyErr_SetString(PyExc_ValueError, "empty: the array is too large");
		goto out;
	}
	blk = block_new(c, (size_t)(n * itemsize));
	if (!blk)
		goto out;
	flat = PyObject_CallMethod(np, "frombuffer", "OOn", blk, dt, n);
	if (flat)
		arr = PyObject_CallMethod(flat, "reshape", "O", v[0]);
out:
	Py_XDECREF(flat);
	Py_XDECREF(blk);
	Py_XDECREF(isz);
	Py_XDECREF(dt);
	Py_XDECREF(np);
	return arr;
}
