/*
 * pyring.h - what the files of the ringd._ringd extension share.  The module
 * is a thin layer over libring: Python buffers (the buffer protocol) become
 * pointers, counts and dtypes, every call that may wait runs with the GIL
 * released, and a RING_E* code becomes an instance of its exception class.
 * The layer's one piece of state of its own is the *hold*: the buffers (and
 * any temporary copy) an operation uses, which must stay alive until libring
 * is done with them - at once for a blocking call, at ring_group_end for a
 * blocking call recorded in a group, at completion for a non-blocking one.
 *
 * module.c: the module, its constants and exceptions, argument parsing;
 * buffer.c: buffers to pointers and dtypes, holds; comm.c: the Communicator
 * type; coll.c: the collectives; statesync.c: sync_state; request.c: the
 * Request type; arena.c:
 * Communicator.empty and the arena blocks behind its arrays.
 */
#ifndef PYRING_H
#define PYRING_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdbool.h>

#include <ring.h>

/* ---- holds ---- */

#define PYR_MAX_VIEWS 2		/* send and recv */

struct pyr_hold {
	struct pyr_hold *next;	/* on a communicator's list (group, orphans) */
	int nviews;		/* acquired entries of views */
	Py_buffer views[PYR_MAX_VIEWS];
	void *temp;		/* malloc'd input copy of an in-place exchange */
	size_t *vec;		/* malloc'd counts and displacements (v-collectives) */
	ring_request *req;	/* an orphan's request (comm.c) */
};

void pyr_hold_release(struct pyr_hold *h);
/* A heap copy of h (which is emptied), for a hold that outlives the call, or
 * NULL with MemoryError (h untouched).  Holds live in Python's allocator
 * (PyMem_*): the GIL is held for these three, and the allocator's hooks (the
 * tests' failure injection, tracemalloc) see them. */
struct pyr_hold *pyr_hold_keep(struct pyr_hold *h);
void pyr_hold_free(struct pyr_hold *h);

/* One buffer argument as libring sees it. */
struct pyr_buf {
	char *ptr;
	size_t count;		/* elements of dtype */
	int dtype;		/* enum ring_dtype */
	int ndim;		/* the shape send/recv put in their header */
	size_t shape[RING_MAX_NDIM];
};

/* Acquires obj's buffer into h: C-contiguous, writable when write, its dtype
 * from the format unless dtype >= 0 overrides it.  -1 with an exception. */
int pyr_buf_get(struct pyr_hold *h, const char *fn, const char *role, PyObject *obj,
		bool write, int dtype, struct pyr_buf *out);

/* ---- the module ---- */

extern PyObject *pyr_Error;
/* Raises the exception class of code (a RING_E*) with fn's message. */
void pyr_raise(int code, const char *msg);
/* dtype / op arguments: an int constant or a name; -1 with an exception. */
int pyr_dtype_arg(const char *fn, PyObject *obj);
int pyr_op_arg(const char *fn, PyObject *obj);
int pyr_int_arg(const char *fn, const char *name, PyObject *obj, int *out);
/* Fills vals[] (borrowed, NULL when not given) from a vectorcall's arguments
 * by names[] (NULL-terminated): the first npos may be positional, the first
 * nreq are required.  -1 with a TypeError. */
int pyr_parse(const char *fn, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
	      const char *const *names, int npos, int nreq, PyObject **vals);

/* ---- the communicator ---- */

typedef struct pyr_comm {
	PyObject_HEAD
	ring_comm *comm;	/* NULL once ring_close has run */
	bool closed;		/* close() called: no operation starts any more */
	bool closing;		/* ring_close is running (without the GIL) */
	int busy;		/* calls running without the GIL: close() waits for none */
	int group_depth;	/* nesting of group_start */
	struct pyr_hold *group_holds;	/* blocking calls recorded in the open group */
	struct pyr_hold *orphans;	/* requests dropped while still in flight */
	Py_ssize_t narena;	/* arena blocks alive or being made: ring_close waits */
	int rank, size, local_rank, local_size, host_rank, host_count;
	PyObject *weakrefs;
} pyr_comm;

extern PyTypeObject pyr_CommType;
void pyr_comm_type_prepare(void);	/* before PyType_Ready */
extern PyTypeObject pyr_RequestType;
extern PyTypeObject pyr_ArenaBlockType;

/* 0 when an operation may start on c, else -1 with ClosedError. */
int pyr_comm_usable(pyr_comm *c, const char *fn);
/* fn(c->comm, arg) without the GIL, counted in c->busy (close() refuses
 * meanwhile); its RING_E* code or 0, and on an error libring's message in err,
 * read before another thread's call on c can replace it. */
int pyr_comm_call(pyr_comm *c, int (*fn)(ring_comm *, void *), void *arg, char *err,
		  size_t errlen);
/* The end of an arena block: ring_close runs if close() was waiting for it. */
void pyr_comm_arena_gone(pyr_comm *c);
/* A request dropped while in flight: its buffers wait on c until it completes. */
void pyr_comm_adopt(pyr_comm *c, ring_request *req, struct pyr_hold *h);
/* Frees the orphans that have completed. */
void pyr_comm_sweep(pyr_comm *c);

/* ---- operations ---- */

enum pyr_kind {
	PYR_ALLREDUCE, PYR_ALLGATHER, PYR_REDUCE_SCATTER, PYR_BROADCAST, PYR_BARRIER,
	PYR_REDUCE, PYR_GATHER, PYR_SCATTER, PYR_ALLGATHERV, PYR_ALLTOALL, PYR_ALLTOALLV,
	PYR_SEND, PYR_RECV, PYR_SENDRECV
};

/* One call, as parsed: libring's arguments and what keeps them alive. */
struct pyr_op {
	enum pyr_kind kind;
	const char *fn;		/* the Python method's name, for messages */
	struct pyr_hold hold;
	const void *send;
	void *recv;
	size_t count, count2;	/* count (sendcount), recvcount where they differ */
	int dtype, redop;
	int peer, peer2;	/* root, or dst and src */
	int ndim;
	size_t shape[RING_MAX_NDIM];
	const size_t *counts[4];	/* v-collectives: counts and displacements */
	PyObject *result;	/* borrowed: what the blocking call returns */
};

/* libring's call for op (req NULL: blocking); runs without the GIL. */
int pyr_op_issue(ring_comm *c, const struct pyr_op *op, ring_request **req);

PyObject *pyr_request_new(pyr_comm *c, ring_request *req, struct pyr_op *op);

extern PyMethodDef pyr_coll_methods[];
/* Communicator.sync_state (statesync.c). */
extern PyMethodDef pyr_state_methods[];
PyObject *pyr_comm_empty(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
			 PyObject *kwnames);

#endif /* PYRING_H */
