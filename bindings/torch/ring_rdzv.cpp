/*
 * ring_rdzv.cpp - turns a torch process group (a store, a rank, a size) into
 * a ringd job: the job's name, this process's local rank and size on its
 * daemon, and the ring_open that joins it.
 *
 * The name: rank 0 makes one that no other group shares, within this run or
 * any other (host, pid, time, a counter and random bits), and publishes it in
 * the group's store.  Its key carries a per-rank sequence number kept in the
 * store itself, so a store left over from an earlier run (a reused file://
 * path) can never hand out an old name.
 *
 * The local pair: ringd needs each process's index among the job's processes
 * on the same daemon.  A launcher's variables (RING_*, torchrun's, Open MPI's,
 * ...) give it when they describe this very group (their rank and world size
 * are the group's); a subgroup, or processes spawned with nothing but an
 * init_method, work it out as NCCL does with host hashes: every rank writes
 * the identity of the daemon it reaches, and the ranks that share one get
 * local ranks in rank order.
 */
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <stdexcept>
#include <sys/stat.h>
#include <unistd.h>

#include "bindings/torch/ring_pg.hpp"

namespace ringd_torch {

namespace {

std::string
env_str(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : "";
}

bool
parse_int(const std::string &s, int *out)
{
	char *end;
	long v;

	if (s.empty() || s[0] < '0' || s[0] > '9')
		return false;
	v = strtol(s.c_str(), &end, 10);
	if (*end || v > INT_MAX)
		return false;
	*out = (int)v;
	return true;
}

/* The launchers libring knows (libring/env.c), with their rank, world size,
 * local rank and local size. */
struct Launcher {
	const char *name, *rank, *size, *local_rank, *local_size;
};
const Launcher launchers[] = {
	{ "RING_*", "RING_RANK", "RING_WORLD_SIZE", "RING_LOCAL_RANK", "RING_LOCAL_SIZE" },
	{ "torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE" },
	{ "Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
	  "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE" },
	{ "PMI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS" },
	{ "Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE" },
};

/* A launcher's local pair, when that launcher's rank and size are the group's. */
bool
launcher_pair(int rank, int size, Placement &pl)
{
	for (const Launcher &l : launchers) {
		int r, s, lr, ls;

		if (!parse_int(env_str(l.rank), &r) || !parse_int(env_str(l.size), &s) ||
		    !parse_int(env_str(l.local_rank), &lr) ||
		    !parse_int(env_str(l.local_size), &ls))
			continue;
		if (r != rank || s != size || lr >= ls || ls > s)
			continue;
		pl.local_rank = lr;
		pl.local_size = ls;
		pl.source = std::string("launcher ") + l.name;
		return true;
	}
	return false;
}

/* What names one daemon: the host (name and boot), and the socket as the
 * file system sees it, so two paths to one socket are the same daemon and
 * one path on two hosts is not. */
std::string
daemon_identity(const std::string &sock)
{
	char host[256] = "";
	std::string boot;
	struct stat st;
	char *real;
	std::string id;

	gethostname(host, sizeof(host) - 1);
	std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
	id = std::string(host) + "|" + boot + "|";
	real = realpath(sock.c_str(), nullptr);
	id += real ? real : sock;
	free(real);
	if (stat(sock.c_str(), &st) == 0)
		id += "|" + std::to_string((unsigned long long)st.st_dev) + ":" +
		      std::to_string((unsigned long long)st.st_ino);
	return id;
}

/* A job name no other group has: "pt.<host>.<pid>.<64 random-ish bits>",
 * at most 63 characters of [A-Za-z0-9._-]. */
std::string
new_job_name()
{
	static std::mutex mu;
	static uint64_t counter;
	char host[256] = "", name[64];
	std::random_device rd;
	uint64_t nonce;

	{
		std::lock_guard<std::mutex> lock(mu);
		nonce = ++counter;
	}
	nonce = nonce * 0x9E3779B97F4A7C15ull ^ ((uint64_t)rd() << 32 | rd()) ^
		(uint64_t)std::chrono::steady_clock::now().time_since_epoch().count();
	gethostname(host, sizeof(host) - 1);
	std::string h;
	for (const char *p = host; *p && h.size() < 20; p++)
		h += isalnum((unsigned char)*p) || *p == '-' ? *p : '_';
	snprintf(name, sizeof(name), "pt.%s.%d.%016llx", h.empty() ? "host" : h.c_str(),
		 (int)getpid(), (unsigned long long)nonce);
	return name;
}

std::vector<uint8_t>
bytes_of(const std::string &s)
{
	return std::vector<uint8_t>(s.begin(), s.end());
}

std::string
string_of(const std::vector<uint8_t> &b)
{
	return std::string(b.begin(), b.end());
}

/* Local rank and size from every rank's daemon identity (key prefix base). */
void
store_pair(c10d::Store &store, const std::string &base, int rank, int size,
	   const std::string &mine, Placement &pl)
{
	int lr = 0, ls = 0;

	for (int r = 0; r < size; r++) {
		std::string id = r == rank ? mine
				: string_of(store.get(base + "id/" + std::to_string(r)));

		if (id != mine)
			continue;
		if (r < rank)
			lr++;
		ls++;
	}
	pl.local_rank = lr;
	pl.local_size = ls;
	pl.source = "the store (ranks on the same daemon)";
}

}  // namespace

Placement
place(c10d::Store &store, int rank, int size)
{
	Placement pl;
	std::string s = env_str("RING_SOCKET");

	pl.socket = s.empty() ? RING_DEFAULT_SOCKET : s;
	std::string mine = daemon_identity(pl.socket);
	int64_t seq = store.add("ring/seq/" + std::to_string(rank), 1);
	std::string base = "ring/" + std::to_string(seq) + "/";

	if (rank == 0)
		store.set(base + "job", bytes_of(new_job_name()));
	/* Every rank publishes its daemon, so the ranks that need the exchange
	 * never wait for one that did not. */
	store.set(base + "id/" + std::to_string(rank), bytes_of(mine));
	pl.job = string_of(store.get(base + "job"));
	if (!launcher_pair(rank, size, pl))
		store_pair(store, base, rank, size, mine, pl);
	return pl;
}

ring_comm *
open_comm(const Placement &pl, int rank, int size, int timeout_ms)
{
	struct ring_options o;
	ring_comm *c = nullptr;
	int rc;

	memset(&o, 0, sizeof(o));
	o.job = pl.job.c_str();
	o.local_rank = pl.local_rank;
	o.local_size = pl.local_size;
	o.timeout_ms = timeout_ms;
	/* The group's own numbering: no launcher's variables are read (they
	 * describe the world, not this group). */
	o.rank = rank;
	o.size = size;
	/* o.socket stays unset: libring reads RING_SOCKET itself, and a size-1
	 * group with neither it nor a daemon runs without one, as libring allows. */
	rc = ring_open(&c, &o);
	if (rc)
		throw std::runtime_error("ring: cannot join ringd job " + pl.job + " as rank " +
					 std::to_string(rank) + " of " + std::to_string(size) +
					 " (local " + std::to_string(pl.local_rank) + " of " +
					 std::to_string(pl.local_size) + " from " + pl.source +
					 "): " + ring_last_error(nullptr));
	return c;
}

}  // namespace ringd_torch
