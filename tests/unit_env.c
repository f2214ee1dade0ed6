/*
 * unit_env.c - tests of libring's environment resolution (libring/env.c): the
 * options-over-environment-over-defaults order, the launcher precedence (RING_*,
 * torchrun, MLX, Open MPI, PMI, Slurm), MLX's JSON hostfile as the world size,
 * when a missing daemon gives a size-1 group (RING_SINGLE, RING_STRICT), and the
 * refusal of inconsistent or malformed settings with a message that names the
 * variables.  Criterion runs every test
 * in its own process, so each one starts from a scrubbed environment.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libring/internal.h"

static const char *const all_vars[] = {
	"RING_SOCKET", "RING_JOB", "RING_TIMEOUT_MS", "RING_ARENA_MB", "RING_SINGLE",
	"RING_DEBUG", "RING_RANK", "RING_WORLD_SIZE", "RING_LOCAL_RANK", "RING_LOCAL_SIZE",
	"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
	"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
	"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "SLURM_PROCID",
	"SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE",
	"MLX_RANK", "MLX_HOSTFILE", "RING_STRICT", "RING_POLL_US", "SLURM_JOB_ID",
	"SLURM_STEP_ID", "TORCHELASTIC_RUN_ID", "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid",
};

static struct lr_env env;
static char err[LR_ERR_MAX];

static void scrub(void)
{
	size_t i;

	for (i = 0; i < sizeof(all_vars) / sizeof(all_vars[0]); i++)
		unsetenv(all_vars[i]);
	memset(&env, 0xa5, sizeof(env));
	err[0] = '\0';
}

static void set(const char *name, const char *value)
{
	cr_assert_eq(setenv(name, value, 1), 0);
}

static int resolve(const struct ring_options *opts)
{
	return lr_env_resolve(opts, &env, err, sizeof(err));
}

/* The call fails with RING_EINVAL and the message mentions every word given. */
static void expect_refused(const struct ring_options *opts, const char *w1, const char *w2)
{
	cr_assert_eq(resolve(opts), RING_EINVAL, "accepted; message \"%s\"", err);
	cr_assert(err[0] != '\0');
	if (w1)
		cr_assert(strstr(err, w1), "\"%s\" does not name %s", err, w1);
	if (w2)
		cr_assert(strstr(err, w2), "\"%s\" does not name %s", err, w2);
}

static void expect_place(int rank, int size, int local_rank, int local_size,
			 const char *source)
{
	cr_assert_eq(resolve(NULL), 0, "refused: %s", err);
	cr_assert_eq(env.rank, rank);
	cr_assert_eq(env.size, size);
	cr_assert_eq(env.local_rank, local_rank);
	cr_assert_eq(env.local_size, local_size);
	cr_assert_str_eq(env.source, source);
}

TestSuite(env, .init = scrub);

Test(env, defaults)
{
	cr_assert_eq(resolve(NULL), 0, "%s", err);
	cr_assert_str_eq(env.socket, RING_DEFAULT_SOCKET);
	cr_assert(!env.socket_set);
	cr_assert_str_eq(env.job, "default");
	cr_assert_eq(env.timeout_ms, 60000);
	cr_assert_eq(env.arena_bytes, (size_t)1024 << 20);
	cr_assert_eq(env.rank, -1);
	cr_assert_eq(env.size, -1);
	cr_assert_eq(env.local_rank, 0);
	cr_assert_eq(env.local_size, 1);
	cr_assert_str_eq(env.source, "none");
	cr_assert(!env.single);
	cr_assert(!env.debug);
}

Test(env, zeroed_options_are_defaults)
{
	struct ring_options o;

	memset(&o, 0, sizeof(o));
	cr_assert_eq(resolve(&o), 0, "%s", err);
	cr_assert_str_eq(env.job, "default");
	cr_assert_eq(env.timeout_ms, 60000);
}

Test(env, environment_then_options)
{
	struct ring_options o;

	set("RING_SOCKET", "/tmp/x.sock");
	set("RING_JOB", "train-1");
	set("RING_TIMEOUT_MS", "1500");
	set("RING_ARENA_MB", "64");
	set("RING_POLL_US", "30");
	cr_assert_eq(resolve(NULL), 0, "%s", err);
	cr_assert_eq(env.poll_us, 30);
	cr_assert_str_eq(env.socket, "/tmp/x.sock");
	cr_assert(env.socket_set);
	cr_assert_str_eq(env.job, "train-1");
	cr_assert_eq(env.timeout_ms, 1500);
	cr_assert_eq(env.arena_bytes, (size_t)64 << 20);

	memset(&o, 0, sizeof(o));
	o.socket = "/tmp/y.sock";
	o.job = "eval";
	o.timeout_ms = 20;
	o.arena_bytes = 12345;
	o.local_rank = 0;
	o.local_size = 2;
	set("LOCAL_RANK", "1");		/* the options' local pair wins */
	set("LOCAL_WORLD_SIZE", "4");
	cr_assert_eq(resolve(&o), 0, "%s", err);
	cr_assert_str_eq(env.socket, "/tmp/y.sock");
	cr_assert_str_eq(env.job, "eval");
	cr_assert_eq(env.timeout_ms, 20);
	cr_assert_eq(env.arena_bytes, 12345);
	cr_assert_eq(env.local_rank, 0);
	cr_assert_eq(env.local_size, 2);
}

/* RING_POLL_US: auto by default and when asked, 0 off, N fixed, else refused. */
Test(env, poll_us)
{
	cr_assert_eq(resolve(NULL), 0, "%s", err);
	cr_assert_eq(env.poll_us, LR_POLL_AUTO);
	set("RING_POLL_US", "auto");
	cr_assert_eq(resolve(NULL), 0, "%s", err);
	cr_assert_eq(env.poll_us, LR_POLL_AUTO);
	set("RING_POLL_US", "0");
	cr_assert_eq(resolve(NULL), 0, "%s", err);
	cr_assert_eq(env.poll_us, 0);
	set("RING_POLL_US", "soon");
	cr_assert_eq(resolve(NULL), RING_EINVAL);
	cr_assert(strstr(err, "RING_POLL_US=\"soon\" is not auto or a number") != NULL, "%s", err);
}

Test(env, empty_means_unset)
{
	set("RING_SOCKET", "");
	set("RANK", "");
	cr_assert_eq(resolve(NULL), 0, "%s", err);
	cr_assert_str_eq(env.socket, RING_DEFAULT_SOCKET);
	cr_assert(!env.socket_set);
	cr_assert_str_eq(env.source, "none");
}

Test(env, ring_vars)
{
	set("RING_RANK", "5");
	set("RING_WORLD_SIZE", "8");
	set("RING_LOCAL_RANK", "1");
	set("RING_LOCAL_SIZE", "4");
	expect_place(5, 8, 1, 4, "RING_*");
}

Test(env, ring_local_pair_alone)
{
	/* Manual launch: ringd numbers the ranks from host rank and local rank. */
	set("RING_LOCAL_RANK", "2");
	set("RING_LOCAL_SIZE", "3");
	expect_place(-1, -1, 2, 3, "RING_*");
}

Test(env, torchrun)
{
	set("RANK", "3");
	set("WORLD_SIZE", "4");
	set("LOCAL_RANK", "1");
	set("LOCAL_WORLD_SIZE", "2");
	expect_place(3, 4, 1, 2, "torchrun");
}

Test(env, open_mpi)
{
	set("OMPI_COMM_WORLD_RANK", "0");
	set("OMPI_COMM_WORLD_SIZE", "2");
	set("OMPI_COMM_WORLD_LOCAL_RANK", "0");
	set("OMPI_COMM_WORLD_LOCAL_SIZE", "1");
	expect_place(0, 2, 0, 1, "Open MPI");
}

Test(env, pmi)
{
	set("PMI_RANK", "6");
	set("PMI_SIZE", "7");
	set("MPI_LOCALRANKID", "0");
	set("MPI_LOCALNRANKS", "1");
	expect_place(6, 7, 0, 1, "PMI");
}

Test(env, slurm_ntasks_per_node)
{
	set("SLURM_PROCID", "5");
	set("SLURM_NTASKS", "6");
	set("SLURM_LOCALID", "2");
	set("SLURM_NTASKS_PER_NODE", "3");
	set("SLURM_TASKS_PER_NODE", "9(x2)");	/* the explicit one wins */
	expect_place(5, 6, 2, 3, "Slurm");
}

Test(env, slurm_tasks_per_node_first_number)
{
	set("SLURM_PROCID", "4");
	set("SLURM_NTASKS", "7");
	set("SLURM_LOCALID", "3");
	set("SLURM_TASKS_PER_NODE", "4(x1),3");
	expect_place(4, 7, 3, 4, "Slurm");
}

Test(env, slurm_tasks_per_node_alone_is_no_source)
{
	set("SLURM_TASKS_PER_NODE", "4");
	expect_place(-1, -1, 0, 1, "none");
}

Test(env, precedence)
{
	set("SLURM_PROCID", "0");
	set("SLURM_NTASKS", "1");
	set("PMI_RANK", "1");
	set("PMI_SIZE", "2");
	expect_place(1, 2, 0, 1, "PMI");
	set("OMPI_COMM_WORLD_RANK", "2");
	set("OMPI_COMM_WORLD_SIZE", "3");
	expect_place(2, 3, 0, 1, "Open MPI");
	set("RANK", "3");
	set("WORLD_SIZE", "4");
	expect_place(3, 4, 0, 1, "torchrun");
	/* One source supplies all four: torchrun's LOCAL_RANK is not mixed in. */
	set("LOCAL_RANK", "1");
	set("LOCAL_WORLD_SIZE", "2");
	set("RING_RANK", "4");
	set("RING_WORLD_SIZE", "5");
	expect_place(4, 5, 0, 1, "RING_*");
}

Test(env, rank_not_below_size)
{
	set("RANK", "4");
	set("WORLD_SIZE", "4");
	set("LOCAL_RANK", "0");
	set("LOCAL_WORLD_SIZE", "1");
	expect_refused(NULL, "RANK=4", "WORLD_SIZE=4");
}

Test(env, local_rank_not_below_local_size)
{
	set("OMPI_COMM_WORLD_RANK", "1");
	set("OMPI_COMM_WORLD_SIZE", "4");
	set("OMPI_COMM_WORLD_LOCAL_RANK", "2");
	set("OMPI_COMM_WORLD_LOCAL_SIZE", "2");
	expect_refused(NULL, "OMPI_COMM_WORLD_LOCAL_RANK=2", "OMPI_COMM_WORLD_LOCAL_SIZE=2");
}

Test(env, local_size_above_size)
{
	set("RING_RANK", "0");
	set("RING_WORLD_SIZE", "2");
	set("RING_LOCAL_RANK", "0");
	set("RING_LOCAL_SIZE", "3");
	expect_refused(NULL, "RING_LOCAL_SIZE=3", "RING_WORLD_SIZE=2");
}

Test(env, options_local_size_above_size)
{
	struct ring_options o;

	memset(&o, 0, sizeof(o));
	o.local_rank = 0;
	o.local_size = 8;
	set("RANK", "0");
	set("WORLD_SIZE", "4");
	expect_refused(&o, "local_size=8", "4");
}

/* A framework's process group numbers its ranks itself: the options' rank
 * and size win over every launcher, which describes another world (a
 * subgroup of 2 under torchrun's 4 ranks, 2 per host). */
Test(env, options_rank_and_size)
{
	struct ring_options o;

	memset(&o, 0, sizeof(o));
	set("RANK", "3");
	set("WORLD_SIZE", "4");
	set("LOCAL_RANK", "1");
	set("LOCAL_WORLD_SIZE", "2");
	o.rank = 1;
	o.size = 2;
	o.local_rank = 0;
	o.local_size = 1;
	cr_assert_eq(resolve(&o), 0, "refused: %s", err);
	cr_assert_eq(env.rank, 1);
	cr_assert_eq(env.size, 2);
	cr_assert_eq(env.local_rank, 0);
	cr_assert_eq(env.local_size, 1);
	cr_assert_str_eq(env.source, "ring_options");

	o.local_size = 0;	/* the local pair must come with them */
	o.local_rank = 0;
	expect_refused(&o, "rank=1", "local_size");
	o.local_size = 1;
	o.rank = 2;		/* not below size */
	expect_refused(&o, "rank=2", "size=2");
	o.rank = 1;
	o.size = 0;		/* a rank without a size */
	expect_refused(&o, "rank=1", "size=0");
	o.size = 2;
	o.local_size = 3;	/* more here than in all */
	o.local_rank = 0;
	expect_refused(&o, "local_size=3", "size=2");
}

Test(env, not_numbers)
{
	static const char *const bad[] = { "abc", "3x", "-1", " 2", "1.0", "0x2",
					   "99999999999999999999" };
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		scrub();
		set("PMI_RANK", bad[i]);
		set("PMI_SIZE", "4");
		expect_refused(NULL, "PMI_RANK", bad[i]);
	}
	scrub();
	set("PMI_RANK", "0");
	set("PMI_SIZE", "0");
	expect_refused(NULL, "PMI_SIZE", NULL);
	scrub();
	set("PMI_RANK", "0");
	set("PMI_SIZE", "65536");
	expect_refused(NULL, "PMI_SIZE", NULL);
	scrub();
	set("SLURM_PROCID", "0");
	set("SLURM_NTASKS", "2");
	set("SLURM_LOCALID", "0");
	set("SLURM_TASKS_PER_NODE", "(x2)");
	expect_refused(NULL, "SLURM_TASKS_PER_NODE", NULL);
}

Test(env, half_pairs)
{
	set("RANK", "1");
	expect_refused(NULL, "RANK", "WORLD_SIZE");
	scrub();
	set("WORLD_SIZE", "2");
	expect_refused(NULL, "RANK", "WORLD_SIZE");
	scrub();
	set("MPI_LOCALRANKID", "0");
	expect_refused(NULL, "MPI_LOCALRANKID", "MPI_LOCALNRANKS");
	scrub();
	set("SLURM_PROCID", "0");
	set("SLURM_NTASKS", "1");
	set("SLURM_LOCALID", "0");
	expect_refused(NULL, "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE");
}

Test(env, bad_settings)
{
	struct ring_options o;
	char longpath[200];

	set("RING_TIMEOUT_MS", "0");
	expect_refused(NULL, "RING_TIMEOUT_MS", NULL);
	set("RING_TIMEOUT_MS", "soon");
	expect_refused(NULL, "RING_TIMEOUT_MS", NULL);
	scrub();
	set("RING_ARENA_MB", "0");
	expect_refused(NULL, "RING_ARENA_MB", NULL);
	set("RING_ARENA_MB", "99999999");
	expect_refused(NULL, "RING_ARENA_MB", NULL);
	scrub();
	set("RING_POLL_US", "-1");
	expect_refused(NULL, "RING_POLL_US", NULL);
	set("RING_POLL_US", "100001");
	expect_refused(NULL, "RING_POLL_US", NULL);
	scrub();
	set("RING_SINGLE", "yes");
	expect_refused(NULL, "RING_SINGLE", NULL);
	scrub();
	memset(longpath, 'a', sizeof(longpath) - 1);
	longpath[0] = '/';
	longpath[sizeof(longpath) - 1] = '\0';
	set("RING_SOCKET", longpath);
	expect_refused(NULL, "RING_SOCKET", NULL);
	scrub();
	set("RING_JOB", "a-job-name-that-is-much-longer-than-sixty-three-bytes-allowed-on-wire");
	expect_refused(NULL, "RING_JOB", NULL);

	scrub();
	memset(&o, 0, sizeof(o));
	o.timeout_ms = -5;
	expect_refused(&o, "timeout_ms", NULL);
	memset(&o, 0, sizeof(o));
	o.local_rank = 1;
	expect_refused(&o, "local_rank=1", "local_size");
	o.local_size = 1;
	expect_refused(&o, "local_rank=1", "local_size=1");
	o.local_rank = -1;
	o.local_size = 0;
	expect_refused(&o, "local_rank=-1", NULL);
}

Test(env, single)
{
	set("RING_SINGLE", "1");
	cr_assert_eq(resolve(NULL), 0, "%s", err);
	cr_assert(env.single);

	/* A configured socket means a daemon is expected: no silent size-1 group. */
	set("RING_SOCKET", "/tmp/z.sock");
	cr_assert_eq(resolve(NULL), 0, "%s", err);
	cr_assert(!env.single);

	scrub();
	set("RING_SINGLE", "0");
	cr_assert_eq(resolve(NULL), 0, "%s", err);
	cr_assert(!env.single);

	scrub();
	set("RING_SINGLE", "1");
	set("WORLD_SIZE", "4");
	set("RANK", "0");
	expect_refused(NULL, "RING_SINGLE", "4");

	scrub();
	set("RING_SINGLE", "1");
	set("WORLD_SIZE", "1");
	set("RANK", "0");
	cr_assert_eq(resolve(NULL), 0, "%s", err);
	cr_assert(env.single);
}

/* A hostfile with text in it; the path goes to MLX_HOSTFILE. */
static void hostfile(const char *text)
{
	static char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/tmp/unit_env.%d.json", (int)getpid());
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
	set("MLX_HOSTFILE", path);
}

static void hostfile_done(void)
{
	const char *p = getenv("MLX_HOSTFILE");

	if (p && strncmp(p, "/tmp/unit_env.", 14) == 0)
		unlink(p);
}

Test(env, mlx, .fini = hostfile_done)
{
	/* the ring backend's hostfile: one list of addresses per rank */
	hostfile("[[\"127.0.0.1:5000\"], [\"127.0.0.1:5001\", \"10.0.0.1:5001\"],\n"
		 " [\"127.0.0.1:5002\"]]\n");
	set("MLX_RANK", "2");
	expect_place(2, 3, 0, 1, "MLX");
	/* mlx.launch's: objects, with brackets and commas inside strings */
	hostfile("[{\"ssh\": \"a,b]\", \"ips\": [\"10.0.0.1\", \"10.0.0.2\"]},\n"
		 " {\"ssh\": \"c\\\"[\", \"ips\": []}]");
	set("MLX_RANK", "0");
	expect_place(0, 2, 0, 1, "MLX");
	hostfile("[\"h0:1\"]");
	expect_place(0, 1, 0, 1, "MLX");
}

Test(env, mlx_refused, .fini = hostfile_done)
{
	static const char *const bad[] = { "", "{}", "[", "[1,,2]", "[1,]", "[,1]", "[1] x",
					   "[\"open", "[[1], [2]" };
	size_t i;

	set("MLX_RANK", "0");
	expect_refused(NULL, "MLX_RANK", "MLX_HOSTFILE");
	set("MLX_HOSTFILE", "/nonexistent/hosts.json");
	expect_refused(NULL, "MLX_HOSTFILE", "/nonexistent/hosts.json");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		hostfile(bad[i]);
		expect_refused(NULL, "MLX_HOSTFILE", "not a JSON list");
	}
	hostfile("[ ]");
	expect_refused(NULL, "MLX_HOSTFILE", "lists 0 hosts");
	hostfile("[\"a:1\", \"b:1\"]");
	set("MLX_RANK", "2");
	expect_refused(NULL, "MLX_RANK=2", "2 hosts");
	unsetenv("MLX_RANK");
	expect_refused(NULL, "MLX_RANK", "MLX_HOSTFILE");
}

Test(env, mlx_precedence, .fini = hostfile_done)
{
	hostfile("[\"a:1\", \"b:1\", \"c:1\", \"d:1\"]");
	set("MLX_RANK", "1");
	set("OMPI_COMM_WORLD_RANK", "0");
	set("OMPI_COMM_WORLD_SIZE", "2");
	expect_place(1, 4, 0, 1, "MLX");
	set("RANK", "3");
	set("WORLD_SIZE", "5");
	expect_place(3, 5, 0, 1, "torchrun");
}

Test(env, single_by_default)
{
	cr_assert_eq(resolve(NULL), 0, "%s", err);
	cr_assert(!env.strict);
	cr_assert(lr_env_single_default(&env), "no daemon expected, no launcher");

	set("RING_STRICT", "1");
	cr_assert_eq(resolve(NULL), 0, "%s", err);
	cr_assert(env.strict);
	cr_assert(!lr_env_single_default(&env), "RING_STRICT=1");
	set("RING_STRICT", "0");
	cr_assert_eq(resolve(NULL), 0, "%s", err);
	cr_assert(lr_env_single_default(&env));
	set("RING_STRICT", "yes");
	expect_refused(NULL, "RING_STRICT", "yes");

	scrub();
	set("RING_SOCKET", "/tmp/z.sock");
	cr_assert_eq(resolve(NULL), 0, "%s", err);
	cr_assert(!lr_env_single_default(&env), "a configured socket expects a daemon");

	scrub();
	set("RANK", "0");
	set("WORLD_SIZE", "2");
	cr_assert_eq(resolve(NULL), 0, "%s", err);
	cr_assert(!lr_env_single_default(&env), "the launcher says 2 ranks");
	set("WORLD_SIZE", "1");
	cr_assert_eq(resolve(NULL), 0, "%s", err);
	cr_assert(lr_env_single_default(&env), "the launcher says 1 rank");

	scrub();
	set("RING_LOCAL_RANK", "0");
	set("RING_LOCAL_SIZE", "2");
	cr_assert_eq(resolve(NULL), 0, "%s", err);
	cr_assert(!lr_env_single_default(&env), "two processes on this host");
}

/* Without RING_JOB, the job is named by the launcher's id of it, so two
 * launches never share a name by accident; "default" only without one. */
Test(env, job_name_from_the_launcher)
{
	set("TORCHELASTIC_RUN_ID", "none");	/* torchrun without --rdzv-id */
	cr_assert_eq(resolve(NULL), 0, "%s", err);
	cr_assert_str_eq(env.job, "default");
	set("TORCHELASTIC_RUN_ID", "3f2c9a1e-77b0-4c1e-9a51-0d2e8b9c6f10");
	cr_assert_eq(resolve(NULL), 0, "%s", err);
	cr_assert_str_eq(env.job, "torchrun-3f2c9a1e-77b0-4c1e-9a51-0d2e8b9c6f10");
	set("SLURM_JOB_ID", "81234");
	set("SLURM_STEP_ID", "2");
	cr_assert_eq(resolve(NULL), 0, "%s", err);
	cr_assert_str_eq(env.job, "slurm-81234.2");
	scrub();
	set("PMIX_NAMESPACE", "prterun-node7-4711@1");
	cr_assert_eq(resolve(NULL), 0, "%s", err);
	cr_assert_str_eq(env.job, "pmix-prterun-node7-4711_1");
	set("RING_JOB", "mine");
	cr_assert_eq(resolve(NULL), 0, "%s", err);
	cr_assert_str_eq(env.job, "mine");
}
