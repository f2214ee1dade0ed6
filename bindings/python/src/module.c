/*
 * module.c - the ringd._ringd module: its constants (the dtypes and reduce ops
 * of ring_types.h, whose numbers the Python package turns into enums), its
 * exceptions (ringd.Error and one subclass per RING_E* code, so a caller can
 * catch a mismatch apart from a dead peer; the subclasses of argument, memory,
 * timeout and permission errors are also the matching built-in exceptions),
 * and the argument parsing every method shares.  Methods take their arguments
 * through vectorcall and one small parser here rather than
 * PyArg_ParseTupleAndKeywords, which builds a tuple and a dict per call: an
 * 8-byte all-reduce should cost little more in Python than in C.
 */
#include "pyring.h"

#include <string.h>
#include <strings.h>

#ifndef RING_VERSION_STRING
#define RING_VERSION_STRING "?"
#endif

PyObject *pyr_Error;

/* One exception class per code; base is a built-in it also derives from. */
static struct {
	int code;
	const char *name;
	const char *ring_name;
	PyObject **base;
	PyObject *cls;
} err_classes[] = {
	{ RING_EINVAL, "InvalidArgumentError", "RING_EINVAL", &PyExc_ValueError, NULL },
	{ RING_ENOMEM, "OutOfMemoryError", "RING_ENOMEM", &PyExc_MemoryError, NULL },
	{ RING_EDAEMON, "DaemonError", "RING_EDAEMON", NULL, NULL },
	{ RING_EPEER, "PeerError", "RING_EPEER", NULL, NULL },
	{ RING_ETIMEDOUT, "TimedOutError", "RING_ETIMEDOUT", &PyExc_TimeoutError, NULL },
	{ RING_EMISMATCH, "MismatchError", "RING_EMISMATCH", NULL, NULL },
	{ RING_EABORTED, "AbortedError", "RING_EABORTED", NULL, NULL },
	{ RING_EPROTO, "ProtocolError", "RING_EPROTO", NULL, NULL },
	{ RING_EPERM, "NotPermittedError", "RING_EPERM", &PyExc_PermissionError, NULL },
	{ RING_ENOTSUP, "NotSupportedError", "RING_ENOTSUP", NULL, NULL },
	{ RING_ECLOSED, "ClosedError", "RING_ECLOSED", NULL, NULL },
	{ RING_EDEVICE, "DeviceError", "RING_EDEVICE", NULL, NULL },
	{ RING_EREVOKED, "RevokedError", "RING_EREVOKED", NULL, NULL },
};
#define N_ERR_CLASSES (sizeof(err_classes) / sizeof(err_classes[0]))

void
pyr_raise(int code, const char *msg)
{
	PyObject *cls = pyr_Error, *exc;
	size_t i;

	for (i = 0; i < N_ERR_CLASSES; i++)
		if (err_classes[i].code == code)
			cls = err_classes[i].cls;
	if (!msg || !*msg)
		msg = ring_strerror(code);
	exc = PyObject_CallFunction(cls, "s", msg);
	if (!exc)
		return;
	if (cls == pyr_Error) {
		/* A code this module does not know (a newer libring): keep it. */
		PyObject *v = PyLong_FromLong(code);

		if (!v || PyObject_SetAttrString(exc, "code", v) < 0) {
			Py_XDECREF(v);
			Py_DECREF(exc);
			return;
		}
		Py_DECREF(v);
	}
	PyErr_SetObject(cls, exc);
	Py_DECREF(exc);
}

/* A class with the class attributes code and errname. */
static PyObject *
err_class_new(const char *name, PyObject *bases, int code, const char *ring_name,
	      const char *doc)
{
	char qual[64];
	PyObject *cls, *v;

	snprintf(qual, sizeof(qual), "ringd.%s", name);
	cls = PyErr_NewExceptionWithDoc(qual, doc, bases, NULL);
	if (!cls)
		return NULL;
	v = code ? PyLong_FromLong(code) : Py_NewRef(Py_None);
	if (!v || PyObject_SetAttrString(cls, "code", v) < 0)
		goto fail;
	Py_DECREF(v);
	v = ring_name ? PyUnicode_FromString(ring_name) : Py_NewRef(Py_None);
	if (!v || PyObject_SetAttrString(cls, "errname", v) < 0)
		goto fail;
	Py_DECREF(v);
	return cls;
fail:
	Py_XDECREF(v);
	Py_DECREF(cls);
	return NULL;
}

static int
add_exceptions(PyObject *m)
{
	size_t i;

	pyr_Error = err_class_new("Error", PyExc_Exception, 0, NULL,
				  "A libring call failed; code is its RING_E* number.");
	if (!pyr_Error || PyModule_AddObjectRef(m, "Error", pyr_Error) < 0)
		return -1;
	for (i = 0; i < N_ERR_CLASSES; i++) {
		PyObject *bases, *cls;
		char doc[96];

		bases = err_classes[i].base ? PyTuple_Pack(2, pyr_Error, *err_classes[i].base)
					    : PyTuple_Pack(1, pyr_Error);
		if (!bases)
			return -1;
		snprintf(doc, sizeof(doc), "%s: %s.", err_classes[i].ring_name,
			 ring_strerror(err_classes[i].code));
		cls = err_class_new(err_classes[i].name, bases, err_classes[i].code,
				    err_classes[i].ring_name, doc);
		Py_DECREF(bases);
		if (!cls || PyModule_AddObjectRef(m, err_classes[i].name, cls) < 0) {
			Py_XDECREF(cls);
			return -1;
		}
		err_classes[i].cls = cls;
	}
	return 0;
}

/* ---- arguments ---- */

int
pyr_parse(const char *fn, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
	  const char *const *names, int npos, int nreq, PyObject **vals)
{
	Py_ssize_t i, nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
	int n, j;

	for (n = 0; names[n]; n++)
		vals[n] = NULL;
	if (nargs > npos) {
		PyErr_Format(PyExc_TypeError, "%s() takes at most %d positional argument%s "
			     "(%zd given)", fn, npos, npos == 1 ? "" : "s", nargs);
		return -1;
	}
	for (i = 0; i < nargs; i++)
		vals[i] = args[i];
	for (i = 0; i < nkw; i++) {
		PyObject *key = PyTuple_GET_ITEM(kwnames, i);

		for (j = 0; j < n; j++)
			if (PyUnicode_CompareWithASCIIString(key, names[j]) == 0)
				break;
		if (j == n) {
			PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument "
				     "'%U'", fn, key);
			return -1;
		}
		if (vals[j]) {
			PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument "
				     "'%s'", fn, names[j]);
			return -1;
		}
		vals[j] = args[nargs + i];
	}
	for (j = 0; j < nreq; j++)
		if (!vals[j]) {
			PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s'", fn,
				     names[j]);
			return -1;
		}
	return 0;
}

int
pyr_int_arg(const char *fn, const char *name, PyObject *obj, int *out)
{
	long v;

	if (!PyLong_Check(obj) && !PyIndex_Check(obj)) {
		PyErr_Format(PyExc_TypeError, "%s: %s must be an int, not %.100s", fn, name,
			     Py_TYPE(obj)->tp_name);
		return -1;
	}
	v = PyLong_AsLong(obj);
	if (v == -1 && PyErr_Occurred())
		return -1;
	if (v < INT_MIN || v > INT_MAX) {
		PyErr_Format(PyExc_ValueError, "%s: %s=%ld is out of range", fn, name, v);
		return -1;
	}
	*out = (int)v;
	return 0;
}

/* The dtype named name (ringd's names, and bf16 / half as ring-bench says). */
static int
dtype_by_name(const char *name)
{
	int d;

	for (d = 0; d < RING_DTYPE_COUNT; d++)
		if (strcmp(name, ring_dtype_name((enum ring_dtype)d)) == 0)
			return d;
	if (strcmp(name, "bf16") == 0)
		return RING_BFLOAT16;
	if (strcmp(name, "half") == 0)
		return RING_FLOAT16;
	if (strcmp(name, "bool_") == 0)
		return RING_BOOL;
	return -1;
}

/* What numpy.dtype(obj).name says, or NULL (no exception) when numpy says
 * nothing useful. */
static PyObject *
numpy_dtype_name(PyObject *obj)
{
	PyObject *np, *dt = NULL, *name = NULL;

	np = PyImport_ImportModule("numpy");
	if (np)
		dt = PyObject_CallMethod(np, "dtype", "O", obj);
	if (dt)
		name = PyObject_GetAttrString(dt, "name");
	Py_XDECREF(np);
	Py_XDECREF(dt);
	if (!name || !PyUnicode_Check(name)) {
		Py_XDECREF(name);
		PyErr_Clear();
		return NULL;
	}
	return name;
}

int
pyr_dtype_arg(const char *fn, PyObject *obj)
{
	PyObject *name = NULL;
	int d = -1;

	if (PyLong_Check(obj)) {
		long v = PyLong_AsLong(obj);

		if (v >= 0 && v < RING_DTYPE_COUNT)
			return (int)v;
	} else {
		const char *s = PyUnicode_Check(obj) ? PyUnicode_AsUTF8(obj) : NULL;

		if (s)
			d = dtype_by_name(s);
		PyErr_Clear();
		/* numpy's names and types: "f4", numpy.float32, numpy.dtype("int8") */
		if (d < 0 && (name = numpy_dtype_name(obj)) != NULL) {
			s = PyUnicode_AsUTF8(name);
			d = s ? dtype_by_name(s) : -1;
			Py_DECREF(name);
			PyErr_Clear();
		}
		if (d >= 0)
			return d;
	}
	PyErr_Format(PyExc_ValueError, "%s: dtype %R is not one of ringd's (ringd.BOOL, "
		     "INT8 .. UINT64, FLOAT16, BFLOAT16, FLOAT32, FLOAT64, or their names)",
		     fn, obj);
	return -1;
}

int
pyr_op_arg(const char *fn, PyObject *obj)
{
	static const char *const names[RING_OP_COUNT] = { "sum", "prod", "max", "min", "avg" };
	int i;

	if (PyLong_Check(obj)) {
		long v = PyLong_AsLong(obj);

		if (v >= 0 && v < RING_OP_COUNT)
			return (int)v;
	} else if (PyUnicode_Check(obj)) {
		const char *s = PyUnicode_AsUTF8(obj);

		for (i = 0; s && i < RING_OP_COUNT; i++)
			if (strcasecmp(s, names[i]) == 0)
				return i;
		PyErr_Clear();
	}
	PyErr_Format(PyExc_ValueError, "%s: op %R is not one of ringd.SUM, PROD, MAX, MIN, "
		     "AVG (or \"sum\", \"prod\", \"max\", \"min\", \"avg\")", fn, obj);
	return -1;
}

/* ---- the module ---- */

static PyObject *
mod_strerror(PyObject *m, PyObject *arg)
{
	int code;

	if (pyr_int_arg("strerror", "code", arg, &code) < 0)
		return NULL;
	return PyUnicode_FromString(ring_strerror(code));
}

static PyObject *
mod_dtype_size(PyObject *m, PyObject *arg)
{
	int d = pyr_dtype_arg("dtype_size", arg);

	return d < 0 ? NULL : PyLong_FromSize_t(ring_dtype_size((enum ring_dtype)d));
}

static PyMethodDef mod_methods[] = {
	{ "strerror", mod_strerror, METH_O, "strerror(code) -> str: libring's name of a "
	  "RING_E* code." },
	{ "dtype_size", mod_dtype_size, METH_O, "dtype_size(dtype) -> int: bytes per "
	  "element." },
	{ NULL, NULL, 0, NULL }
};

static struct PyModuleDef mod_def = {
	PyModuleDef_HEAD_INIT, "ringd._ringd",
	"The C layer of the ringd package: libring's communicators, collectives and "
	"requests over Python buffers.  Import ringd, not this.", -1, mod_methods,
	NULL, NULL, NULL, NULL
};

static int
add_constants(PyObject *m)
{
	static const char *const ops[RING_OP_COUNT] = { "SUM", "PROD", "MAX", "MIN", "AVG" };
	int i;

	for (i = 0; i < RING_DTYPE_COUNT; i++) {
		char name[32];
		const char *s = ring_dtype_name((enum ring_dtype)i);
		size_t j;

		for (j = 0; s[j] && j + 1 < sizeof(name); j++)
			name[j] = (char)(s[j] >= 'a' && s[j] <= 'z' ? s[j] - 'a' + 'A' : s[j]);
		name[j] = '\0';
		if (PyModule_AddIntConstant(m, name, i) < 0)
			return -1;
	}
	for (i = 0; i < RING_OP_COUNT; i++)
		if (PyModule_AddIntConstant(m, ops[i], i) < 0)
			return -1;
	return PyModule_AddIntConstant(m, "MAX_NDIM", RING_MAX_NDIM);
}

PyMODINIT_FUNC PyInit__ringd(void);

PyMODINIT_FUNC
PyInit__ringd(void)
{
	PyObject *m;

	pyr_comm_type_prepare();
	if (PyType_Ready(&pyr_CommType) < 0 || PyType_Ready(&pyr_RequestType) < 0 ||
	    PyType_Ready(&pyr_ArenaBlockType) < 0)
		return NULL;
	m = PyModule_Create(&mod_def);
	if (!m)
		return NULL;
	if (add_exceptions(m) < 0 || add_constants(m) < 0 ||
	    PyModule_AddObjectRef(m, "Communicator", (PyObject *)&pyr_CommType) < 0 ||
	    PyModule_AddObjectRef(m, "Request", (PyObject *)&pyr_RequestType) < 0 ||
	    PyModule_AddStringConstant(m, "LIBRING_VERSION", RING_VERSION_STRING) < 0) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}
