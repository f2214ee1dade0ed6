/*
 * grad_sync - a data-parallel gradient synchroniser on libring, in the shape of
 * the interface trainers give their strategies: rank, world size, is-primary,
 * barrier, and synchronize_gradients(), which replaces every gradient by its
 * average over all ranks.  The example builds a small transformer's worth of
 * gradients (32 tensors from 1 element to 8 MiB, about 50 MB in float32, float16
 * and bfloat16), most in the shared arena (ring_alloc: the daemon reads and
 * writes them in place) and a few in plain malloc memory (libring stages them),
 * fills them with rank-dependent values whose average is exact in each dtype
 * (tests/pattern.c, the data of the tests and ring-bench), synchronises for a
 * few steps and checks every element bit for bit.
 *
 * Small tensors are packed into one bucket per dtype before they are reduced, as
 * DDP does: a collective costs a round trip through every daemon, so thirty
 * 2 KiB reductions take far longer than one of 60 KiB.
 *
 * Usage: grad_sync [-p N [-l L]] [-s steps].  With -p it forks N ranks on the
 * daemons `scripts/ring-local` announced (RING_SOCKET_0..): with -l, rank i on
 * daemon i / L as local rank i % L of L (one process per GPU on a host of L
 * GPUs); without, N / RING_HOSTS per daemon.  Without -p this process is one
 * rank of whatever RING_SOCKET / the launcher says.  Exit status 0 only when
 * every step matched on every rank.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libring/ring.h"
#include "tests/pattern.h"

#include "example.h"

/* Tensors below GS_BUCKET_MIN bytes share a bucket of GS_BUCKET_BYTES. */
#define GS_BUCKET_MIN	(256u << 10)
#define GS_BUCKET_BYTES	(4u << 20)

/* ---------------------------------------------------------------------- */
/* The synchroniser                                                        */
/* ---------------------------------------------------------------------- */

struct grad_sync {
	ring_comm *comm;	/* the job's world communicator */
	int rank, world;	/* cached: they never change */
	void *bucket;		/* GS_BUCKET_BYTES for packing small tensors */
	bool bucket_in_arena;	/* whether bucket came from ring_alloc */
};

/* One gradient: a flat buffer of numel elements. */
struct gs_tensor {
	const char *name;
	enum ring_dtype dtype;
	size_t numel;
	void *data;
	bool in_arena;		/* ring_alloc'd (zero-copy) or plain memory (staged) */
};

static int
gs_init(struct grad_sync *gs, const struct ring_options *opts)
{
	int rc;

	memset(gs, 0, sizeof(*gs));
	rc = ring_open(&gs->comm, opts);
	if (rc) {
		fprintf(stderr, "grad_sync: ring_open: %s%s%s\n", ring_strerror(rc),
			gs->comm ? ": " : "", gs->comm ? ring_last_error(gs->comm) : "");
		return rc;
	}
	gs->rank = ring_rank(gs->comm);
	gs->world = ring_size(gs->comm);
	gs->bucket = ring_alloc(gs->comm, GS_BUCKET_BYTES);
	gs->bucket_in_arena = gs->bucket != NULL;
	if (!gs->bucket)
		gs->bucket = malloc(GS_BUCKET_BYTES);	/* staged, but still correct */
	if (!gs->bucket) {
		ring_close(gs->comm);
		return RING_ENOMEM;
	}
	return 0;
}

static void
gs_finish(struct grad_sync *gs)
{
	if (gs->bucket_in_arena)
		ring_free(gs->comm, gs->bucket);
	else
		free(gs->bucket);
	ring_close(gs->comm);
}

static int
gs_rank(const struct grad_sync *gs)
{
	return gs->rank;
}

static int
gs_world_size(const struct grad_sync *gs)
{
	return gs->world;
}

static bool
gs_is_primary(const struct grad_sync *gs)
{
	return gs->rank == 0;
}

static int
gs_barrier(struct grad_sync *gs)
{
	int rc = ring_barrier(gs->comm);

	if (rc)
		fprintf(stderr, "grad_sync: rank %d: barrier: %s: %s\n", gs->rank,
			ring_strerror(rc), ring_last_error(gs->comm));
	return rc;
}

static bool
gs_dtype_is_float(enum ring_dtype dt)
{
	return dt == RING_FLOAT16 || dt == RING_BFLOAT16 || dt == RING_FLOAT32 ||
	       dt == RING_FLOAT64;
}

static int
gs_allreduce_avg(struct grad_sync *gs, void *buf, size_t count,
		 enum ring_dtype dt, const char *what)
{
	int rc = ring_allreduce(gs->comm, buf, buf, count, dt, RING_AVG);

	if (rc)
		fprintf(stderr, "grad_sync: rank %d: averaging %s: %s: %s\n", gs->rank,
			what, ring_strerror(rc), ring_last_error(gs->comm));
	return rc;
}

/*
 * Averages every tensor over all ranks, in place.  Every rank must pass the same
 * list (names, dtypes, sizes, order), as with any data-parallel trainer: the
 * reductions are matched by order, and a rank that differs gets RING_EMISMATCH.
 */
static int
gs_synchronize_gradients(struct grad_sync *gs, struct gs_tensor *t, int n)
{
	static const enum ring_dtype order[] = {
		RING_FLOAT32, RING_FLOAT16, RING_BFLOAT16, RING_FLOAT64,
	};
	int rc;

	for (int i = 0; i < n; i++)
		if (!gs_dtype_is_float(t[i].dtype)) {
			fprintf(stderr, "grad_sync: %s: gradients must be floating point\n",
				t[i].name);
			return RING_EINVAL;
		}
	for (size_t d = 0; d < sizeof(order) / sizeof(order[0]); d++) {
		enum ring_dtype dt = order[d];
		size_t es = ring_dtype_size(dt), used = 0;
		int first = 0;	/* first tensor packed in the bucket */

		for (int i = 0; i <= n; i++) {
			bool small = i < n && t[i].dtype == dt && t[i].numel * es < GS_BUCKET_MIN;

			/* flush the bucket when it is full or the list ends */
			if (used && (i == n || (small && used + t[i].numel * es > GS_BUCKET_BYTES))) {
				char *p = gs->bucket;

				if ((rc = gs_allreduce_avg(gs, gs->bucket, used / es, dt, "a bucket")))
					return rc;
				for (int j = first; j < i; j++)
					if (t[j].dtype == dt && t[j].numel * es < GS_BUCKET_MIN) {
						memcpy(t[j].data, p, t[j].numel * es);
						p += t[j].numel * es;
					}
				used = 0;
			}
			if (i == n || t[i].dtype != dt)
				continue;
			if (small) {
				if (!used)
					first = i;
				memcpy((char *)gs->bucket + used, t[i].data, t[i].numel * es);
				used += t[i].numel * es;
			} else if ((rc = gs_allreduce_avg(gs, t[i].data, t[i].numel, dt,
							  t[i].name))) {
				return rc;
			}
		}
	}
	return 0;
}

/* ---------------------------------------------------------------------- */
/* The model and its gradients                                             */
/* ---------------------------------------------------------------------- */

#define D_MODEL	512
#define D_FF	2048
#define VOCAB	8192
#define LAYERS	4
#define NTENSORS (LAYERS * 7 + 4)

struct layout {
	char name[48];
	enum ring_dtype dtype;
	size_t numel;
	bool host;		/* plain malloc instead of the arena */
};

static int
model_layout(struct layout *l)
{
	int n = 0;

#define ADD(nm, dt, ne, h) do { \
		snprintf(l[n].name, sizeof(l[n].name), "%s", nm); \
		l[n].dtype = dt; l[n].numel = ne; l[n].host = h; n++; } while (0)
	ADD("embed.weight", RING_BFLOAT16, (size_t)VOCAB * D_MODEL, false);
	for (int i = 0; i < LAYERS; i++) {
		static const struct {
			const char *name;
			enum ring_dtype dtype;
			size_t numel;
		} per_layer[7] = {
			{ "ln1.weight", RING_FLOAT32, D_MODEL },
			{ "ln1.bias", RING_FLOAT32, D_MODEL },
			{ "attn.qkv.weight", RING_FLOAT16, (size_t)D_MODEL * 3 * D_MODEL },
			{ "attn.qkv.bias", RING_FLOAT32, 3 * D_MODEL },
			{ "attn.proj.weight", RING_BFLOAT16, (size_t)D_MODEL * D_MODEL },
			{ "mlp.fc1.weight", RING_FLOAT32, (size_t)D_MODEL * D_FF },
			{ "mlp.fc2.weight", RING_BFLOAT16, (size_t)D_FF * D_MODEL },
		};

		for (int k = 0; k < 7; k++) {
			char nm[48];

			snprintf(nm, sizeof(nm), "layers.%d.%s", i, per_layer[k].name);
			ADD(nm, per_layer[k].dtype, per_layer[k].numel, false);
		}
	}
	ADD("ln_f.weight", RING_FLOAT32, D_MODEL, false);
	ADD("lm_head.weight", RING_FLOAT16, (size_t)VOCAB * D_MODEL, true);
	ADD("logit_scale", RING_FLOAT32, 1, true);
#undef ADD
	return n;
}

/* Largest |sum| in quarter units that every partial sum of the dtype holds
 * exactly (the ring adds in any order and bfloat16 rounds after each step). */
static int64_t
exact_quarters(enum ring_dtype dt)
{
	switch (dt) {
	case RING_BFLOAT16: return 256;
	case RING_FLOAT16: return 2048;
	default: return 1 << 20;
	}
}

/*
 * The gradient of element i of tensor ti at step s on rank r: tests/pattern.c's
 * exact average in quarter units, drawn from the step, the tensor and the
 * element but not the rank, so every rank's base is the same and the average
 * is exactly base / 4.  Returns the value; *mean gets the expected average.
 */
static float
grad_value(enum ring_dtype dt, int world, int r, int s, int ti, size_t i,
	   float *mean)
{
	int64_t m = exact_quarters(dt) / world - 2, base, q;
	uint64_t h = pattern_mix64(((uint64_t)s << 48) ^ ((uint64_t)ti << 40) ^ i);

	q = pattern_avg_quarters(h, m < 0 ? 0 : m, i + (size_t)s, r, world, &base);
	*mean = (float)base / 4;
	return (float)q / 4;
}

/* Element i of a float tensor of any width. */
static void
store(enum ring_dtype dt, void *data, size_t i, float v)
{
	union pattern_val pv = { .f = v };

	pattern_store(data, dt, i, pv);
}

/* "Backward": this rank's gradients for step s. */
static void
fill_gradients(struct gs_tensor *t, int n, int world, int rank, int s)
{
	for (int ti = 0; ti < n; ti++)
		for (size_t i = 0; i < t[ti].numel; i++) {
			float mean;

			store(t[ti].dtype, t[ti].data, i,
			      grad_value(t[ti].dtype, world, rank, s, ti, i, &mean));
		}
}

/* Elements that differ bit for bit from the exact average; reports the first. */
static int64_t
check_gradients(const struct gs_tensor *t, int n, int world, int rank, int s)
{
	int64_t wrong = 0;

	for (int ti = 0; ti < n; ti++) {
		size_t es = ring_dtype_size(t[ti].dtype);

		for (size_t i = 0; i < t[ti].numel; i++) {
			unsigned char want[8];
			float mean;

			grad_value(t[ti].dtype, world, rank, s, ti, i, &mean);
			store(t[ti].dtype, want, 0, mean);
			if (memcmp(want, (const char *)t[ti].data + i * es, es) == 0)
				continue;
			if (!wrong)
				fprintf(stderr, "grad_sync: rank %d step %d: %s[%zu] is wrong "
					"(expected %g)\n", rank, s, t[ti].name, i, mean);
			wrong++;
		}
	}
	return wrong;
}

/* Places each tensor of the layout in the arena or, for those the layout keeps
 * in host memory, in malloc'd memory that libring stages; counts their bytes
 * and the host ones.  Returns 0, or 1 with every tensor left freeable. */
static int
alloc_tensors(struct grad_sync *gs, const struct layout *lay, struct gs_tensor *t,
	      int n, size_t *bytes, int *nhost)
{
	memset(t, 0, sizeof(*t) * (size_t)n);
	for (int i = 0; i < n; i++) {
		size_t b = lay[i].numel * ring_dtype_size(lay[i].dtype);

		t[i].name = lay[i].name;
		t[i].dtype = lay[i].dtype;
		t[i].numel = lay[i].numel;
		t[i].in_arena = !lay[i].host;
		t[i].data = t[i].in_arena ? ring_alloc(gs->comm, b) : malloc(b);
		if (!t[i].data) {
			fprintf(stderr, "grad_sync: rank %d: cannot allocate %s (%zu bytes): %s\n",
				gs_rank(gs), t[i].name, b,
				t[i].in_arena ? ring_last_error(gs->comm) : strerror(errno));
			return 1;
		}
		*bytes += b;
		*nhost += !t[i].in_arena;
	}
	return 0;
}

static void
free_tensors(struct grad_sync *gs, struct gs_tensor *t, int n)
{
	for (int i = 0; i < n; i++) {
		if (!t[i].data)
			continue;
		if (t[i].in_arena)
			ring_free(gs->comm, t[i].data);
		else
			free(t[i].data);
	}
}

/* One rank of the example; returns its exit status. */
static int
run_rank(int steps)
{
	struct layout lay[NTENSORS];
	struct gs_tensor t[NTENSORS];
	struct grad_sync gs;
	int64_t *wrong = NULL;
	size_t bytes = 0;
	int n, status = 0, nhost = 0;

	if (gs_init(&gs, NULL))
		return 1;
	n = model_layout(lay);
	if (alloc_tensors(&gs, lay, t, n, &bytes, &nhost)) {
		status = 1;
		goto out;
	}
	/* the step's verdict travels in the arena too */
	wrong = ring_alloc(gs.comm, sizeof(*wrong));
	if (!wrong) {
		status = 1;
		goto out;
	}
	if (gs_is_primary(&gs))
		printf("grad_sync: %d ranks, %d tensors (%d in host memory, staged), %.1f MB\n",
		       gs_world_size(&gs), n, nhost, (double)bytes / 1e6);
	for (int s = 1; s <= steps && !status; s++) {
		double t0, dt;
		int rc;

		fill_gradients(t, n, gs_world_size(&gs), gs_rank(&gs), s);
		if (gs_barrier(&gs)) {
			status = 1;
			break;
		}
		t0 = ex_now_s();
		rc = gs_synchronize_gradients(&gs, t, n);
		dt = ex_now_s() - t0;
		if (rc) {
			status = 1;
			break;
		}
		*wrong = check_gradients(t, n, gs_world_size(&gs), gs_rank(&gs), s);
		rc = ring_allreduce(gs.comm, wrong, wrong, 1, RING_INT64, RING_SUM);
		if (rc) {
			fprintf(stderr, "grad_sync: rank %d: summing the check: %s: %s\n",
				gs_rank(&gs), ring_strerror(rc), ring_last_error(gs.comm));
			status = 1;
			break;
		}
		if (gs_is_primary(&gs)) {
			printf("step %d/%d: %d tensors, %.1f MB, %.1f ms, %.2f GB/s, ",
			       s, steps, n, (double)bytes / 1e6, dt * 1e3,
			       dt > 0 ? (double)bytes / dt / 1e9 : 0.0);
			if (*wrong)
				printf("FAILED (%" PRId64 " wrong elements)\n", *wrong);
			else
				printf("OK\n");
			fflush(stdout);
		}
		if (*wrong)
			status = 1;
	}
out:
	free_tensors(&gs, t, n);
	if (wrong)
		ring_free(gs.comm, wrong);
	gs_finish(&gs);
	return status;
}

static int
rank_cb(void *steps)
{
	return run_rank(*(int *)steps);
}

int
main(int argc, char **argv)
{
	static const char use[] = "usage: grad_sync [-p nprocs [-l per_daemon]] [-s steps]\n";
	int c, nprocs = 0, local = 0, steps = 3;

	while ((c = getopt(argc, argv, "p:l:s:h")) != -1) {
		switch (c) {
		case 'p': nprocs = atoi(optarg); break;
		case 'l': local = atoi(optarg); break;
		case 's': steps = atoi(optarg); break;
		case 'h':
			return ex_usage(use, 0);
		default:
			return ex_usage(use, 2);
		}
	}
	if (optind != argc || nprocs < 0 || local < 0 || (local && !nprocs) || steps < 1) {
		return ex_usage(use, 2);
	}
	return nprocs ? ex_launch("grad_sync", nprocs, local, rank_cb, &steps) : run_rank(steps);
}
