/*
 * buffer.c - Python buffers as libring's arguments, and the holds that keep
 * them alive.  A buffer's dtype is read from its struct format by kind and
 * item size (numpy writes int64 as 'l', the struct module as 'q': both are a
 * signed integer of 8 bytes), so every exporter of plain numbers works.  An
 * explicit dtype says how the items are read, never converts them: it is the
 * format's own dtype, or bfloat16 for a 16-bit integer array (bfloat16 has no
 * format character: its bits travel in a uint16 array).  What libring cannot
 * take is refused here with the argument's name: a non-contiguous view, a
 * read-only result, a format with no ringd dtype, a dtype= that would
 * reinterpret the items, a size that is not a whole number of elements.
 */
#include "pyring.h"

#include <stdlib.h>
#include <string.h>

void
pyr_hold_release(struct pyr_hold *h)
{
	int i;

	for (i = 0; i < h->nviews; i++)
		PyBuffer_Release(&h->views[i]);
	h->nviews = 0;
	free(h->temp);
	free(h->vec);
	h->temp = NULL;
	h->vec = NULL;
}

struct pyr_hold *
pyr_hold_keep(struct pyr_hold *h)
{
	struct pyr_hold *k = PyMem_Malloc(sizeof(*k));

	if (!k) {
		PyErr_NoMemory();
		return NULL;
	}
	/* A Py_buffer may move: its exporter keys nothing on the view's address
	 * (PEP 3118 gives it obj and internal to find its state by). */
	memcpy(k, h, sizeof(*k));
	k->next = NULL;
	h->nviews = 0;
	h->temp = NULL;
	h->vec = NULL;
	return k;
}

void
pyr_hold_free(struct pyr_hold *h)
{
	if (!h)
		return;
	pyr_hold_release(h);
	PyMem_Free(h);
}

/* ---- formats ---- */

/* ring dtypes of the integers by size (index log2 of the size). */
static const int int_signed[4] = { RING_INT8, RING_INT16, RING_INT32, RING_INT64 };
static const int int_unsigned[4] = { RING_UINT8, RING_UINT16, RING_UINT32, RING_UINT64 };

static int
int_dtype(const int *table, Py_ssize_t size)
{
	switch (size) {
	case 1: return table[0];
	case 2: return table[1];
	case 4: return table[2];
	case 8: return table[3];
	default: return -1;
	}
}

/* The ring dtype of one item of format fmt (NULL means "B"), or -1. */
static int
format_dtype(const char *fmt, Py_ssize_t itemsize)
{
	if (!fmt)
		fmt = "B";
	/* Native order only: '<' is native here, '>' and '!' never are. */
	if (*fmt == '@' || *fmt == '=' || (*fmt == '<' && PY_LITTLE_ENDIAN) ||
	    (*fmt == '>' && PY_BIG_ENDIAN))
		fmt++;
	if (!fmt[0] || fmt[1])
		return -1;	/* big-endian, structures, counts, pointers */
	switch (fmt[0]) {
	case '?':
		return itemsize == 1 ? RING_BOOL : -1;
	case 'b': case 'h': case 'i': case 'l': case 'q': case 'n':
		return int_dtype(int_signed, itemsize);
	case 'B': case 'H': case 'I': case 'L': case 'Q': case 'N': case 'c':
		return int_dtype(int_unsigned, itemsize);
	case 'e':
		return itemsize == 2 ? RING_FLOAT16 : -1;
	case 'f':
		return itemsize == 4 ? RING_FLOAT32 : -1;
	case 'd':
		return itemsize == 8 ? RING_FLOAT64 : -1;
	default:
		return -1;
	}
}

static int
buf_fail(PyObject *type, const char *fn, const char *role, const char *why)
{
	PyErr_Format(type, "%s: %s %s", fn, role, why);
	return -1;
}

/* dtype= on view: the format's own dtype, or bfloat16 on 16-bit integers.
 * Anything else would read the bytes as another type (a float32 array taken
 * as bfloat16 sums garbage), so it is refused with both named. */
static int
buf_check_override(const Py_buffer *view, const char *fn, const char *role, int dtype)
{
	int have = format_dtype(view->format, view->itemsize);
	const char *want = ring_dtype_name((enum ring_dtype)dtype);

	if (have == dtype || (dtype == RING_BFLOAT16 && (have == RING_UINT16 || have == RING_INT16)))
		return 0;
	if (dtype == RING_BFLOAT16)
		PyErr_Format(PyExc_TypeError, "%s: %s is %s (format '%s', %zd bytes an item) but "
			     "dtype= says bfloat16: dtype= reads the items as they are and "
			     "converts nothing; bfloat16 travels as the bits of a uint16 or "
			     "int16 array", fn, role, have >= 0 ?
			     ring_dtype_name((enum ring_dtype)have) : "of no ringd dtype",
			     view->format ? view->format : "B", view->itemsize);
	else
		PyErr_Format(PyExc_TypeError, "%s: %s is %s (format '%s', %zd bytes an item) but "
			     "dtype= says %s: dtype= reads the items as they are and converts "
			     "nothing; give a %s array (numpy's astype converts one) or leave "
			     "dtype= out", fn, role, have >= 0 ?
			     ring_dtype_name((enum ring_dtype)have) : "of no ringd dtype",
			     view->format ? view->format : "B", view->itemsize, want, want);
	return -1;
}

/* out's dtype, count and shape from view (dtype < 0: from its format). */
static int
buf_describe(const Py_buffer *view, const char *fn, const char *role, int dtype,
	     struct pyr_buf *out)
{
	size_t dsize;
	int i;

	if (dtype >= 0 && buf_check_override(view, fn, role, dtype) < 0)
		return -1;
	if (dtype < 0) {
		dtype = format_dtype(view->format, view->itemsize);
		if (dtype < 0) {
			PyErr_Format(PyExc_TypeError, "%s: %s has format '%s' (%zd bytes an "
				     "item), which no ringd dtype matches; ringd takes bool, "
				     "int8 .. uint64, float16, float32 and float64 in native "
				     "byte order (bfloat16: a uint16 buffer with "
				     "dtype=ringd.BFLOAT16)", fn, role,
				     view->format ? view->format : "B", view->itemsize);
			return -1;
		}
	}
	dsize = ring_dtype_size((enum ring_dtype)dtype);
	if ((size_t)view->len % dsize) {
		PyErr_Format(PyExc_ValueError, "%s: %s has %zd bytes, not a whole number of "
			     "%s elements (%zu bytes each)", fn, role, view->len,
			     ring_dtype_name((enum ring_dtype)dtype), dsize);
		return -1;
	}
	out->ptr = view->buf;
	out->dtype = dtype;
	out->count = (size_t)view->len / dsize;
	/* send/recv carry the shape: the buffer's own where its items are the
	 * dtype's, else the elements in a row. */
	if ((size_t)view->itemsize == dsize && view->shape && view->ndim <= RING_MAX_NDIM) {
		out->ndim = view->ndim;
		for (i = 0; i < view->ndim; i++)
			out->shape[i] = (size_t)view->shape[i];
	} else {
		out->ndim = 1;
		out->shape[0] = out->count;
	}
	return 0;
}

int
pyr_buf_get(struct pyr_hold *h, const char *fn, const char *role, PyObject *obj,
	    bool write, int dtype, struct pyr_buf *out)
{
	Py_buffer *view;

	if (!PyObject_CheckBuffer(obj)) {
		PyErr_Format(PyExc_TypeError, "%s: %s must support the buffer protocol (a "
			     "numpy array, bytearray, memoryview; a torch CPU tensor through "
			     ".numpy()), not %.100s", fn, role, Py_TYPE(obj)->tp_name);
		return -1;
	}
	if (h->nviews >= PYR_MAX_VIEWS) {
		PyErr_Format(PyExc_SystemError, "%s: more than %d buffers", fn, PYR_MAX_VIEWS);
		return -1;
	}
	view = &h->views[h->nviews];
	if (PyObject_GetBuffer(obj, view, PyBUF_RECORDS_RO) < 0)
		return -1;
	h->nviews++;
	if (write && view->readonly)
		return buf_fail(PyExc_ValueError, fn, role, "is read-only; it receives the "
				"result");
	if (!PyBuffer_IsContiguous(view, 'C'))
		return buf_fail(PyExc_ValueError, fn, role, "is not C-contiguous "
				"(numpy.ascontiguousarray gives a copy that is)");
	return buf_describe(view, fn, role, dtype, out);
}
