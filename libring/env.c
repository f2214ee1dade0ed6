/*
 * env.c - turns ring_options and the process environment into the parameters of
 * a communicator: the daemon's socket, the job name, the per-operation timeout,
 * the arena size, and the process's place in the job (rank, size, local rank,
 * local size) as the launcher published it.  Launchers are tried in a fixed order
 * and the first one that defines any of its variables supplies all of them, so a
 * job never mixes, say, torchrun's rank with Slurm's local id.  Everything is
 * checked here, once, so a bad setting fails ring_open with a message that names
 * the variables instead of surfacing later as a hang or a wrong group.  MLX's
 * launcher gives a rank and a hostfile (a JSON list, one entry per rank) rather
 * than a world size: the size is the number of entries.  This module needs
 * nothing from proto's .c files, so its unit test links it alone.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"
#include "../proto/dtype.h"

/* One launcher's variable names, in order rank, size, local rank, local size
 * (NULL where it has none). */
struct env_source {
	const char *name;		/* for messages and RING_DEBUG */
	const char *var[4];
	const char *alt_local_size;	/* a fallback for var[3] (Slurm) */
	bool size_file;			/* var[1] names a JSON hostfile whose entries
					 * are the ranks (MLX) */
};

static const struct env_source env_sources[] = {
	{ "RING_*", { "RING_RANK", "RING_WORLD_SIZE", "RING_LOCAL_RANK", "RING_LOCAL_SIZE" },
	  NULL, false },
	{ "torchrun", { "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE" }, NULL, false },
	{ "MLX", { "MLX_RANK", "MLX_HOSTFILE", NULL, NULL }, NULL, true },
	{ "Open MPI", { "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
			"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE" }, NULL, false },
	{ "PMI", { "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS" }, NULL, false },
	{ "Slurm", { "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE" },
	  "SLURM_TASKS_PER_NODE", false },
};

/* An unset variable and an empty one mean the same: not given. */
static const char *
env_get(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

/* Parses a whole decimal string into [lo, hi]; false on anything else. */
static bool
env_parse_int(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v;

	/* strtol would skip blanks and take a sign; a launcher writes neither. */
	if (!s || *s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

/* SLURM_TASKS_PER_NODE looks like "4(x2),3": the first number is this node's
 * count on the usual uniform allocation, which is all a local size can mean. */
static bool
env_parse_tasks_per_node(const char *s, long *out)
{
	char buf[32];
	size_t n = strspn(s, "0123456789");

	if (n == 0 || n >= sizeof(buf))
		return false;
	memcpy(buf, s, n);
	buf[n] = '\0';
	return env_parse_int(buf, 1, PROTO_MAX_RANKS, out);
}

/* Bound on a hostfile we read: a list of 65535 hosts fits many times over. */
#define ENV_HOSTFILE_MAX	(4u << 20)

/* Counts the entries of the JSON list in text (len bytes): 0 and the number,
 * or -1 when it is not one list.  Only the nesting is followed (strings,
 * escapes, brackets); what an entry holds is ringd's business, not ours. */
static long
env_json_list_entries(const char *text, size_t len)
{
	size_t i = 0;
	long count = 0;
	int depth = 0;
	bool in_str = false, esc = false, any = false, closed = false;

	while (i < len && strchr(" \t\r\n", text[i]))
		i++;
	if (i == len || text[i] != '[')
		return -1;
	for (; i < len; i++) {
		char ch = text[i];

		if (closed) {
			if (!strchr(" \t\r\n", ch))
				return -1;	/* something after the list */
			continue;
		}
		if (in_str) {
			if (esc)
				esc = false;
			else if (ch == '\\')
				esc = true;
			else if (ch == '"')
				in_str = false;
			continue;
		}
		switch (ch) {
		case ' ': case '\t': case '\r': case '\n':
			break;
		case '"':
			in_str = true;
			any |= depth == 1;
			break;
		case '[': case '{':
			any |= depth == 1;
			if (++depth > 64)
				return -1;
			break;
		case ']': case '}':
			if (--depth < 0)
				return -1;
			if (depth == 0) {
				if (ch != ']' || (count > 0 && !any))
					return -1;
				count += any;
				closed = true;
			}
			break;
		case ',':
			if (depth == 1) {
				if (!any)
					return -1;	/* an empty entry */
				count++;
				any = false;
			}
			break;
		default:
			any |= depth == 1;	/* a number or a literal */
			break;
		}
	}
	return closed && !in_str ? count : -1;
}

/* The world size an MLX hostfile gives: its number of entries. */
static bool
env_hostfile_size(const char *path, long *out, char *why, size_t cap)
{
	FILE *f = fopen(path, "re");
	char *text;
	size_t len;
	long n;

	if (!f) {
		snprintf(why, cap, "cannot be read: %s", strerror(errno));
		return false;
	}
	text = malloc(ENV_HOSTFILE_MAX + 1);
	if (!text) {
		fclose(f);
		snprintf(why, cap, "out of memory reading it");
		return false;
	}
	len = fread(text, 1, ENV_HOSTFILE_MAX + 1, f);
	fclose(f);
	if (len > ENV_HOSTFILE_MAX) {
		free(text);
		snprintf(why, cap, "is larger than %u MiB", ENV_HOSTFILE_MAX >> 20);
		return false;
	}
	n = env_json_list_entries(text, len);
	free(text);
	if (n < 0) {
		snprintf(why, cap, "is not a JSON list of hosts");
		return false;
	}
	if (n < 1 || n > PROTO_MAX_RANKS) {
		snprintf(why, cap, "lists %ld hosts, not 1..%d", n, PROTO_MAX_RANKS);
		return false;
	}
	*out = n;
	return true;
}

/* The first launcher that defines any of its variables, or NULL. */
static const struct env_source *
env_find_source(void)
{
	size_t i, k;

	for (i = 0; i < sizeof(env_sources) / sizeof(env_sources[0]); i++) {
		/* The fallback alone does not select a source: Slurm exports it to
		 * a whole allocation, not only to the tasks of a step. */
		for (k = 0; k < 4; k++)
			if (env_sources[i].var[k] && env_get(env_sources[i].var[k]))
				return &env_sources[i];
	}
	return NULL;
}

/* Reads src's four variables into val (NULL where unset) and v, checking that
 * each pair is given whole and each value is a rank or size; *lsname gets the
 * name the local size came from. */
static int
env_launcher_read(const struct env_source *src, const char *val[4], long v[4],
		  const char **lsname, char *err, size_t cap)
{
	size_t k;

	for (k = 0; k < 4; k++)
		val[k] = src->var[k] ? env_get(src->var[k]) : NULL;
	*lsname = src->var[3];
	if (!val[3] && src->alt_local_size && env_get(src->alt_local_size)) {
		*lsname = src->alt_local_size;
		val[3] = env_get(*lsname);
	}

	if (!val[0] != !val[1]) {
		snprintf(err, cap, "%s is set but %s is not (launcher: %s)",
			 val[0] ? src->var[0] : src->var[1], val[0] ? src->var[1] : src->var[0],
			 src->name);
		return RING_EINVAL;
	}
	if (!val[2] != !val[3]) {
		snprintf(err, cap, "%s is set but %s is not (launcher: %s)",
			 val[2] ? src->var[2] : *lsname, val[2] ? *lsname : src->var[2], src->name);
		return RING_EINVAL;
	}
	for (k = 0; k < 4; k++) {
		const char *name = k == 3 ? *lsname : src->var[k];
		bool ok;

		if (!val[k])
			continue;
		if (k == 1 && src->size_file) {
			char why[192];

			if (!env_hostfile_size(val[k], &v[k], why, sizeof(why))) {
				snprintf(err, cap, "%s=\"%s\" %s (launcher: %s)", name, val[k], why,
					 src->name);
				return RING_EINVAL;
			}
			continue;
		}
		/* Odd k is a size (1..max), even k a rank (0..max-1). */
		if (k == 3 && *lsname == src->alt_local_size)
			ok = env_parse_tasks_per_node(val[k], &v[k]);
		else if (k & 1)
			ok = env_parse_int(val[k], 1, PROTO_MAX_RANKS, &v[k]);
		else
			ok = env_parse_int(val[k], 0, PROTO_MAX_RANKS - 1, &v[k]);
		if (!ok) {
			snprintf(err, cap, "%s=\"%s\" is not a valid %s (launcher: %s)", name, val[k],
				 k & 1 ? "size (1..65535)" : "rank (0..65534)", src->name);
			return RING_EINVAL;
		}
	}
	return 0;
}

/* Fills rank/size/local_rank/local_size from the first source that defines any
 * of its variables; leaves the defaults when none does. */
static int
env_launcher(struct lr_env *env, bool want_local, char *err, size_t cap)
{
	const struct env_source *src = env_find_source();
	const char *val[4], *lsname;
	long v[4];
	int rc;

	if (!src)
		return 0;
	env->source = src->name;
	if ((rc = env_launcher_read(src, val, v, &lsname, err, cap)) != 0)
		return rc;
	if (val[0]) {
		if (v[0] >= v[1]) {
			if (src->size_file)
				snprintf(err, cap, "%s=%ld is not below the %ld hosts of %s "
					 "(launcher: %s)", src->var[0], v[0], v[1], src->var[1],
					 src->name);
			else
				snprintf(err, cap, "%s=%ld is not below %s=%ld (launcher: %s)",
					 src->var[0], v[0], src->var[1], v[1], src->name);
			return RING_EINVAL;
		}
		env->rank = (int)v[0];
		env->size = (int)v[1];
	}
	if (val[2]) {
		if (v[2] >= v[3]) {
			snprintf(err, cap, "%s=%ld is not below %s=%ld (launcher: %s)",
				 src->var[2], v[2], lsname, v[3], src->name);
			return RING_EINVAL;
		}
		if (val[0] && v[3] > v[1]) {
			snprintf(err, cap, "%s=%ld is above %s=%ld (launcher: %s)",
				 lsname, v[3], src->var[1], v[1], src->name);
			return RING_EINVAL;
		}
		/* Explicit options win over the launcher for the local pair. */
		if (want_local) {
			env->local_rank = (int)v[2];
			env->local_size = (int)v[3];
		}
	}
	return 0;
}

static int
env_copy(char *dst, size_t dcap, const char *src, const char *what,
	 char *err, size_t cap)
{
	size_t n = strlen(src);

	if (n == 0 || n >= dcap) {
		snprintf(err, cap, "%s \"%.64s%s\" must be 1..%zu bytes long", what, src,
			 n > 64 ? "..." : "", dcap - 1);
		return RING_EINVAL;
	}
	memcpy(dst, src, n + 1);
	return 0;
}

/*
 * The job name when none is given: the launcher's own id of this job, so that
 * two jobs started by a launcher never meet under one name by accident (a
 * process of another job that attached under the same name would only be
 * refused, but it could not run).  Every rank of one launch sees the same id.
 * Without a launcher it is "default", shared by whatever runs without a name.
 */
static const char *
env_default_job(char *buf, size_t cap)
{
	static const struct {
		const char *var, *prefix, *step;
	} ids[] = {
		{ "SLURM_JOB_ID", "slurm-", "SLURM_STEP_ID" },
		{ "TORCHELASTIC_RUN_ID", "torchrun-", NULL },
		{ "PMIX_NAMESPACE", "pmix-", NULL },
		{ "OMPI_MCA_ess_base_jobid", "ompi-", NULL },
	};
	const char *v, *step;
	size_t i, k;

	for (i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		v = env_get(ids[i].var);
		if (v == NULL || *v == '\0' || strcmp(v, "none") == 0)
			continue;	/* torchrun's run id when none was given */
		step = ids[i].step ? env_get(ids[i].step) : NULL;
		snprintf(buf, cap, "%s%s%s%s", ids[i].prefix, v, step ? "." : "",
			 step ? step : "");
		for (k = 0; buf[k] != '\0'; k++)	/* only what a job name may hold */
			if (!isalnum((unsigned char)buf[k]) && strchr("._:-", buf[k]) == NULL)
				buf[k] = '_';
		return buf;
	}
	return "default";
}

/* The daemon's socket and the job name: opts, then the environment, then the
 * defaults. */
static int
env_names(const struct ring_options *opts, struct lr_env *env, char *err,
	  size_t cap)
{
	char def[PROTO_JOB_MAX + 1];
	const char *s;
	int rc;

	s = opts->socket && *opts->socket ? opts->socket : env_get("RING_SOCKET");
	env->socket_set = s != NULL;
	rc = env_copy(env->socket, sizeof(env->socket), s ? s : RING_DEFAULT_SOCKET,
		      opts->socket && *opts->socket ? "ring_options.socket" : "RING_SOCKET",
		      err, cap);
	if (rc)
		return rc;

	s = opts->job && *opts->job ? opts->job : env_get("RING_JOB");
	if (s == NULL)
		s = env_default_job(def, sizeof(def));
	return env_copy(env->job, sizeof(env->job), s,
			opts->job && *opts->job ? "ring_options.job" : "RING_JOB", err, cap);
}

/* The operation timeout and the arena size: opts, then the environment; the
 * busy-poll window: the environment. */
static int
env_limits(const struct ring_options *opts, struct lr_env *env, char *err,
	   size_t cap)
{
	const char *s;
	long v;

	if (opts->timeout_ms < 0) {
		snprintf(err, cap, "ring_options.timeout_ms=%d is negative", opts->timeout_ms);
		return RING_EINVAL;
	} else if (opts->timeout_ms > 0) {
		env->timeout_ms = opts->timeout_ms;
	} else if ((s = env_get("RING_TIMEOUT_MS"))) {
		if (!env_parse_int(s, 1, INT_MAX, &v)) {
			snprintf(err, cap, "RING_TIMEOUT_MS=\"%s\" is not a number of "
				 "milliseconds in 1..%d", s, INT_MAX);
			return RING_EINVAL;
		}
		env->timeout_ms = (int)v;
	}

	if (opts->arena_bytes) {
		if (opts->arena_bytes > ((size_t)LR_MAX_ARENA_MB << 20)) {
			snprintf(err, cap, "ring_options.arena_bytes=%zu is above the limit "
				 "of %u MiB", opts->arena_bytes, LR_MAX_ARENA_MB);
			return RING_EINVAL;
		}
		env->arena_bytes = opts->arena_bytes;
	} else if ((s = env_get("RING_ARENA_MB"))) {
		if (!env_parse_int(s, 1, LR_MAX_ARENA_MB, &v)) {
			snprintf(err, cap, "RING_ARENA_MB=\"%s\" is not a size in MiB in 1..%u",
				 s, LR_MAX_ARENA_MB);
			return RING_EINVAL;
		}
		env->arena_bytes = (size_t)v << 20;
	}

	if ((s = env_get("RING_POLL_US")) && strcasecmp(s, "auto") != 0) {
		if (!env_parse_int(s, 0, LR_MAX_POLL_US, &v)) {
			snprintf(err, cap,
				 "RING_POLL_US=\"%s\" is not auto or a number of "
				 "microseconds in 0..%d",
				 s, LR_MAX_POLL_US);
			return RING_EINVAL;
		}
		env->poll_us = (int)v;
	}

	s = opts->algo != NULL && *opts->algo ? opts->algo : env_get("RING_ALGO");
	if (s != NULL && *s && (env->algo = proto_algo_parse(s)) < 0) {
		snprintf(err, cap,
			 "%s=\"%s\" is no algorithm: auto, ring, rd or 2l (tree and "
			 "direct plans are not built)",
			 opts->algo && *opts->algo ? "ring_options.algo" : "RING_ALGO", s);
		return RING_EINVAL;
	}
	if (env->algo < 0)
		env->algo = PROTO_ALGO_AUTO;

	s = opts->wire != NULL && *opts->wire ? opts->wire : env_get("RING_WIRE");
	if (s != NULL && *s && (env->wire = proto_wire_parse(s)) < 0) {
		snprintf(err, cap, "%s=\"%s\" is no wire format: f32, bf16 or fp16",
			 opts->wire && *opts->wire ? "ring_options.wire" : "RING_WIRE", s);
		return RING_EINVAL;
	}
	if (env->wire < 0)
		env->wire = PROTO_WIRE_F32;
	return 0;
}

/* The process's place: opts' local pair, else the launcher's, with its rank
 * and size. */
static int
env_place(const struct ring_options *opts, struct lr_env *env, char *err,
	  size_t cap)
{
	bool want_local;
	int rc;

	/* A caller that gives local_size describes its placement itself (local_rank
	 * 0 is then meaningful); local_rank alone cannot be read that way. */
	if (opts->local_size < 0 || opts->local_rank < 0 ||
	    (opts->local_size > 0 && opts->local_rank >= opts->local_size) ||
	    opts->local_size > PROTO_MAX_RANKS) {
		snprintf(err, cap, "ring_options.local_rank=%d, local_size=%d: need "
			 "0 <= local_rank < local_size <= %d", opts->local_rank,
			 opts->local_size, PROTO_MAX_RANKS);
		return RING_EINVAL;
	}
	if (opts->local_size == 0 && opts->local_rank != 0) {
		snprintf(err, cap, "ring_options.local_rank=%d is given without local_size",
			 opts->local_rank);
		return RING_EINVAL;
	}
	want_local = opts->local_size == 0;
	if (!want_local) {
		env->local_rank = opts->local_rank;
		env->local_size = opts->local_size;
	}
	if (opts->size != 0 || opts->rank != 0) {
		/* the caller's own numbering (a framework's process group): no
		 * launcher's variables are read, they describe another world */
		if (opts->size <= 0 || opts->rank < 0 || opts->rank >= opts->size ||
		    opts->size > PROTO_MAX_RANKS || want_local ||
		    opts->local_size > opts->size) {
			snprintf(err, cap, "ring_options.rank=%d, size=%d, local_size=%d: need "
				 "0 <= rank < size <= %d and 0 < local_size <= size", opts->rank,
				 opts->size, opts->local_size, PROTO_MAX_RANKS);
			return RING_EINVAL;
		}
		env->rank = opts->rank;
		env->size = opts->size;
		env->source = "ring_options";
		return 0;
	}
	rc = env_launcher(env, want_local, err, cap);
	if (rc)
		return rc;
	if (env->size > 0 && env->local_size > env->size) {
		snprintf(err, cap, "ring_options.local_size=%d is above the world size %d "
			 "(launcher: %s)", env->local_size, env->size, env->source);
		return RING_EINVAL;
	}
	return 0;
}

/* A 0/1 switch: unset is 0. */
static int
env_flag(const char *name, bool *out, char *err, size_t cap)
{
	const char *s = env_get(name);

	if (s && strcmp(s, "0") != 0 && strcmp(s, "1") != 0) {
		snprintf(err, cap, "%s=\"%s\" must be 0 or 1", name, s);
		return RING_EINVAL;
	}
	*out = s && strcmp(s, "1") == 0;
	return 0;
}

/* RING_SINGLE: a size-1 group without a daemon, asked for; RING_STRICT: never
 * one that was not. */
static int
env_single(struct lr_env *env, char *err, size_t cap)
{
	bool single;
	int rc;

	if ((rc = env_flag("RING_STRICT", &env->strict, err, cap)) != 0 ||
	    (rc = env_flag("RING_SINGLE", &single, err, cap)) != 0)
		return rc;
	env->single = single && !env->socket_set;
	/* A size-1 group when the launcher started several ranks would let each
	 * of them train alone, silently. */
	if (env->single && env->size > 1) {
		snprintf(err, cap, "RING_SINGLE=1 gives a size-1 group, but the launcher "
			 "(%s) says the world size is %d; set RING_SOCKET to use ringd",
			 env->source, env->size);
		return RING_EINVAL;
	}
	return 0;
}

bool
lr_env_single_default(const struct lr_env *env)
{
	return !env->socket_set && !env->strict && env->size <= 1 && env->local_size <= 1;
}

int
lr_env_resolve(const struct ring_options *opts, struct lr_env *env, char *err,
	       size_t cap)
{
	static const struct ring_options none;
	const char *s;
	int rc;

	if (!opts)
		opts = &none;
	memset(env, 0, sizeof(*env));
	env->rank = env->size = -1;
	env->local_rank = 0;
	env->local_size = 1;
	env->source = "none";
	env->timeout_ms = LR_DEFAULT_TIMEOUT_MS;
	env->poll_us = LR_POLL_AUTO;
	env->arena_bytes = (size_t)LR_DEFAULT_ARENA_MB << 20;
	s = env_get("RING_DEBUG");
	env->debug = s && strcmp(s, "0") != 0;
	/* RING_SHM=0: operations over the socket, not the arena's rings. */
	s = env_get("RING_SHM");
	env->no_shm = s && strcmp(s, "0") == 0;
	/* RING_FAST=0: no job page, every operation through ringd. */
	s = env_get("RING_FAST");
	env->no_fast = s && strcmp(s, "0") == 0;
	/* RING_JOIN=1 (ring_options.join): a newcomer of ring_comm_grow. */
	s = env_get("RING_JOIN");
	env->join = opts->join > 0 || (s && *s && strcmp(s, "0") != 0);

	if ((rc = env_names(opts, env, err, cap)) != 0 ||
	    (rc = env_limits(opts, env, err, cap)) != 0 ||
	    (rc = env_place(opts, env, err, cap)) != 0 ||
	    (rc = env_single(env, err, cap)) != 0)
		return rc;
	if (env->join && env->single) {
		snprintf(err, cap,
			 "a newcomer (RING_JOIN=1) joins a running job through "
			 "ringd: RING_SINGLE=1 has none");
		return RING_EINVAL;
	}
	if (env->join) /* its place comes from the grow that admits it */
		env->rank = env->size = -1;

	if (env->debug)
		fprintf(stderr, "libring: rank/size from %s (rank %d, size %d, local %d/%d), "
			"job %s, socket %s%s, timeout %d ms, arena %zu bytes%s%s\n",
			env->source, env->rank, env->size, env->local_rank, env->local_size,
			env->job, env->socket, env->socket_set ? "" : " (default)",
			env->timeout_ms, env->arena_bytes, env->single ? ", single (size 1)" : "",
			env->strict ? ", strict" : "");
	return 0;
}
