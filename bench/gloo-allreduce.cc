/*
 * gloo-allreduce.cc - the Gloo side of the side-by-side runs (bench/peers): times a
 * float32 sum all-reduce over Gloo's TCP transport the way mpi-allreduce times
 * MPI_Allreduce and ring-bench times ring_allreduce, and prints the same line per
 * size: bytes, count, time (us), algbw, busbw (GB/s), #wrong.
 *
 *   gloo-allreduce --rank R --size N --store DIR [--host ADDR] [-a ring_chunked|ring|bcube]
 *                  [-b 8] [-e 64M] [-f 2] [-n 20] [-w 5]
 *
 * Each of the N processes is started by the caller (bench/peers starts them on
 * loopback or one per netns host); they meet through a Gloo FileStore in DIR, which
 * must be empty or fresh for each run (a stale key from an earlier run would be
 * read as this run's address).  RANK and SIZE may come from the environment
 * instead.  --host is the address this rank's TCP device binds (127.0.0.1 by
 * default; a netns host's own address on a shaped bed).
 *
 * -a picks the algorithm: ring_chunked is gloo::AllreduceRingChunked (what Gloo's
 * own benchmark calls allreduce_ring_chunked: 2N chunks, two in flight); ring is
 * gloo::allreduce with the RING algorithm (1 MiB segments, two in flight), the path
 * PyTorch's ProcessGroupGloo takes for CPU tensors; bcube is gloo::allreduce's
 * other algorithm.  Timing is of the in-place all-reduce on a buffer of zeros (so
 * no value ever grows into infinities or denormals while timed); the check is one
 * more, untimed, all-reduce of rank+1 whose result must be N(N+1)/2 everywhere.
 */
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gloo/allreduce.h"
#include "gloo/allreduce_ring_chunked.h"
#include "gloo/barrier.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/transport/tcp/device.h"

#include "size_arg.h"

namespace {

[[noreturn]] void usage()
{
	fprintf(stderr, "usage: gloo-allreduce --rank R --size N --store DIR [--host ADDR] "
		"[--prefix P] [-a ring_chunked|ring|bcube] [-b MIN] [-e MAX] [-f FACTOR] "
		"[-n ITERS] [-w WARMUP]\n");
	exit(64);
}

/* A size option's value (8, 64K, 1M ...) into *out, or the usage. */
void size_opt(const char *s, size_t *out)
{
	if (parse_size(s, out) != 0)
		usage();
}

enum class Algo { RING_CHUNKED, RING, BCUBE };

/* One all-reduce of the buffer in place.  The ring-chunked algorithm object holds
 * registered send/recv buffers for one pointer, so it is made once per size. */
struct Runner {
	std::shared_ptr<gloo::Context> ctx;
	Algo algo;
	float *buf;
	size_t count;
	std::unique_ptr<gloo::AllreduceRingChunked<float>> chunked;
	uint32_t tag = 0;

	Runner(std::shared_ptr<gloo::Context> c, Algo a, float *b, size_t n)
		: ctx(std::move(c)), algo(a), buf(b), count(n)
	{
		if (algo == Algo::RING_CHUNKED)
			chunked.reset(new gloo::AllreduceRingChunked<float>(
				ctx, std::vector<float *>{buf}, (int)count));
	}

	void run()
	{
		if (algo == Algo::RING_CHUNKED) {
			chunked->run();
			return;
		}
		gloo::AllreduceOptions opts(ctx);
		opts.setAlgorithm(algo == Algo::RING ? gloo::AllreduceOptions::Algorithm::RING
						     : gloo::AllreduceOptions::Algorithm::BCUBE);
		opts.setOutput(buf, count);
		opts.setReduceFunction(static_cast<void (*)(void *, const void *, const void *,
							    size_t)>(&gloo::sum<float>));
		/* A tag per call, as ProcessGroupGloo does, so that a late segment
		 * of one call is never matched to the next. */
		opts.setTag(tag++);
		gloo::allreduce(opts);
	}
};

/* The slowest rank's time and the sum of the ranks' wrong counts, reduced through
 * Gloo itself so that no other library is needed. */
void reduce_stats(const std::shared_ptr<gloo::Context> &ctx, double *t, double *wrong)
{
	gloo::AllreduceOptions o1(ctx);
	o1.setOutput(t, 1);
	o1.setReduceFunction(static_cast<void (*)(void *, const void *, const void *, size_t)>(
		&gloo::max<double>));
	o1.setTag(1u << 30);
	gloo::allreduce(o1);
	gloo::AllreduceOptions o2(ctx);
	o2.setOutput(wrong, 1);
	o2.setReduceFunction(static_cast<void (*)(void *, const void *, const void *, size_t)>(
		&gloo::sum<double>));
	o2.setTag((1u << 30) + 1);
	gloo::allreduce(o2);
}

void barrier(const std::shared_ptr<gloo::Context> &ctx)
{
	gloo::BarrierOptions o(ctx);
	o.setTag((1u << 30) + 2);
	gloo::barrier(o);
}

} // namespace

int main(int argc, char **argv)
{
	size_t minb = 8, maxb = 64u << 20, f = 2;
	int iters = 20, warm = 5, rank = -1, size = -1;
	std::string store, host = "127.0.0.1", prefix = "gloo-allreduce";
	Algo algo = Algo::RING_CHUNKED;
	const char *algo_name = "ring_chunked";

	if (getenv("RANK"))
		rank = atoi(getenv("RANK"));
	if (getenv("SIZE"))
		size = atoi(getenv("SIZE"));
	if (getenv("GLOO_STORE"))
		store = getenv("GLOO_STORE");
	for (int i = 1; i < argc; i++) {
		std::string a = argv[i];
		if (i + 1 >= argc)
			usage();
		const char *v = argv[++i];
		if (a == "--rank") rank = atoi(v);
		else if (a == "--size") size = atoi(v);
		else if (a == "--store") store = v;
		else if (a == "--host") host = v;
		else if (a == "--prefix") prefix = v;
		else if (a == "-b") size_opt(v, &minb);
		else if (a == "-e") size_opt(v, &maxb);
		else if (a == "-f") size_opt(v, &f);
		else if (a == "-n") iters = atoi(v);
		else if (a == "-w") warm = atoi(v);
		else if (a == "-a") {
			algo_name = v;
			if (!strcmp(v, "ring_chunked")) algo = Algo::RING_CHUNKED;
			else if (!strcmp(v, "ring")) algo = Algo::RING;
			else if (!strcmp(v, "bcube")) algo = Algo::BCUBE;
			else usage();
		} else
			usage();
	}
	if (size < 1 || rank < 0 || rank >= size || store.empty() || iters < 1 || warm < 0)
		usage();
	/* AllreduceRingChunked counts elements and bytes in an int. */
	if (algo == Algo::RING_CHUNKED && maxb > (size_t)INT32_MAX) {
		fprintf(stderr, "gloo-allreduce: ring_chunked takes at most 2 GiB - 1\n");
		return 64;
	}

	gloo::transport::tcp::attr attr(host.c_str());
	auto dev = gloo::transport::tcp::CreateDevice(attr);
	gloo::rendezvous::FileStore fs(store);
	gloo::rendezvous::PrefixStore ps(prefix, fs);
	auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
	/* Large messages on a shaped 1 Gbit/s link take seconds; the default
	 * 30 s would still do, but a slow bed must not abort a run. */
	ctx->setTimeout(std::chrono::seconds(300));
	ctx->connectFullMesh(ps, dev);

	if (rank == 0)
		printf("# gloo %s all-reduce float sum, in place, %d ranks over TCP\n"
		       "#%12s %12s %10s %8s %8s %7s\n", algo_name, size, "size(B)", "count",
		       "time(us)", "algbw", "busbw", "#wrong");
	for (size_t bytes = minb; bytes <= maxb; bytes *= f) {
		size_t count = bytes / sizeof(float);
		std::vector<float> buf(count ? count : 1, 0.0f);
		Runner r(ctx, algo, buf.data(), count);

		for (int i = 0; i < warm; i++)
			r.run();
		barrier(ctx);
		auto t0 = std::chrono::steady_clock::now();
		for (int i = 0; i < iters; i++)
			r.run();
		double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
				   .count() / iters;

		/* The check: one more all-reduce of known values, untimed. */
		for (size_t k = 0; k < count; k++)
			buf[k] = (float)(rank + 1);
		r.run();
		double wrong = 0;
		const float want = (float)(size * (size + 1) / 2);
		for (size_t k = 0; k < count; k++)
			wrong += buf[k] != want;
		reduce_stats(ctx, &t, &wrong);

		double ab = (double)bytes / t / 1e9, bb = ab * 2.0 * (size - 1) / size;
		if (rank == 0) {
			printf(" %12zu %12zu %10.1f %8.3f %8.3f %7.0f\n", bytes, count, t * 1e6, ab,
			       bb, wrong);
			fflush(stdout);
		}
		if (f < 2)
			break;
	}
	barrier(ctx);
	return 0;
}
