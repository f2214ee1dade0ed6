/*
 * ring_arena.cpp - tensors in libring's arena: the group's own buffers and
 * the CPU allocator that makes large tensors there (see ring_arena.hpp for
 * why these and no others).
 *
 * Every arena block, of either kind, is a whole number of pages at a page
 * boundary (so that a forked child can swap it for a private copy), its data
 * pointer is its own context (so torch's raw_allocate works), and one
 * process-wide table maps it to its arena.  Locks: g().mu (the table, the
 * arenas' accounting, the serving order) is never held while libring runs;
 * an arena's own mu orders its ring_alloc and ring_free calls before its
 * ring_close.
 */
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_map>
#include <vector>

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <c10/core/CPUAllocator.h>
#include <torch/version.h>

#include "bindings/torch/ring_arena.hpp"

namespace ringd_torch {

/* Smaller buffers of an operation are staged faster than a block is found. */
static const size_t SCRATCH_MIN_BYTES = 64 << 10;
/* Tensors the allocator places: DDP's buckets are 1 MiB (the first) and
 * bucket_cap_mb (25) MiB; smaller ones cost little to stage. */
static const size_t TENSOR_MIN_BYTES = 1 << 20;
/* Arenas whose address ranges the deleter looks at (groups open at once). */
static const int MAX_ARENAS = 64;
/* Above torch's default CPU allocator (0). */
static const uint8_t ALLOCATOR_PRIORITY = 1;

struct Arena::Owner {
	std::mutex mu;			/* comm, against ring_close */
	ring_comm *comm = nullptr;	/* null once the group closes */
	/* The rest under g().mu. */
	uint8_t *base = nullptr;	/* the kept mapping; null: none (or unmapped) */
	size_t bytes = 0;
	int slot = -1;			/* its range in Global::lo/hi; -1: serves nothing */
	size_t live = 0;		/* blocks handed out or being made */
	size_t tensor_bytes = 0;	/* the allocator's blocks in it */
	size_t cap = 0;			/* the most tensor_bytes may reach */
	bool closed = false;		/* ring_close is done: unmap with the last block */
};

namespace {

using OwnerPtr = std::shared_ptr<Arena::Owner>;

struct Blk {
	OwnerPtr owner;
	void *raw;			/* what ring_alloc returned */
	size_t len;			/* pages from the data pointer on */
	bool tensor;			/* the allocator's (else an operation's) */
};

struct Global {
	std::mutex mu;
	std::vector<OwnerPtr> serving;	/* arenas the allocator uses, oldest first */
	std::unordered_map<void *, Blk> blocks;	/* by data pointer */
	size_t tensor_bytes = 0;
	bool in_child = false;		/* a forked child: the blocks are private copies */
	/* Set once (install), read by every free. */
	size_t page = 4096;
	c10::Allocator *fb = nullptr;	/* torch's allocator before ours */
	c10::DeleterFnPtr fb_raw = nullptr;
	/* The arenas' address ranges, read without the lock: a pointer in none
	 * of them is not an arena block. */
	std::atomic<uintptr_t> lo[MAX_ARENAS], hi[MAX_ARENAS];
	std::atomic<int> nslots{ 0 };

	Global()
	{
		for (int i = 0; i < MAX_ARENAS; i++) {
			lo[i].store(0);
			hi[i].store(0);
		}
	}
};

/* Never destroyed: deleters run until the process ends. */
Global &
g()
{
	static Global *x = new Global();
	return *x;
}

bool
in_ranges(const void *p)
{
	Global &G = g();
	uintptr_t u = (uintptr_t)p;
	int n = G.nslots.load();

	for (int i = 0; i < n; i++) {
		uintptr_t l = G.lo[i].load();
		if (l && u >= l && u < G.hi[i].load())
			return true;
	}
	return false;
}

/* Under G.mu: o's mapping, handed to the caller to unmap, once o is closed
 * and holds no block (never in a forked child: its copies lie inside it). */
void
take_unmap_locked(Arena::Owner &o, void **base, size_t *bytes)
{
	Global &G = g();

	*base = nullptr;
	if (!o.closed || o.live || !o.base || G.in_child)
		return;
	if (o.slot >= 0) {
		G.lo[o.slot].store(0);
		G.hi[o.slot].store(0);
		o.slot = -1;
	}
	*base = o.base;
	*bytes = o.bytes;
	o.base = nullptr;
}

void
live_done(Arena::Owner &o)
{
	void *base;
	size_t bytes = 0;
	{
		std::lock_guard<std::mutex> lock(g().mu);
		o.live--;
		take_unmap_locked(o, &base, &bytes);
	}
	if (base)
		munmap(base, bytes);
}

void
arena_delete(void *p)
{
	Global &G = g();
	Blk b;

	if (!p)
		return;
	if (!in_ranges(p)) {
		if (G.fb_raw)
			G.fb_raw(p);
		return;
	}
	{
		std::unique_lock<std::mutex> lock(G.mu);
		auto it = G.blocks.find(p);
		if (it == G.blocks.end()) {
			/* not ours after all: torch's, where an arena once was */
			lock.unlock();
			if (G.fb_raw)
				G.fb_raw(p);
			return;
		}
		b = std::move(it->second);
		G.blocks.erase(it);
		if (G.in_child) {
			/* a private copy: libring's state here is the parent's */
			munmap(p, b.len);
			return;
		}
		if (b.tensor) {
			b.owner->tensor_bytes -= b.len;
			G.tensor_bytes -= b.len;
		}
	}
	bool gone;
	{
		std::lock_guard<std::mutex> lock(b.owner->mu);
		if (b.owner->comm)
			ring_free(b.owner->comm, b.raw);
		gone = !b.owner->comm;
	}
	/* The group is closed and the mapping stays for others: let its
	 * memory go now. */
	if (gone)
		madvise(p, b.len, MADV_REMOVE);
	live_done(*b.owner);
}

/* After the close, while blocks keep the mapping: the pages around them (the
 * staging slots, blocks freed before) go back to the system. */
void
trim(Arena::Owner &o)
{
	Global &G = g();
	std::vector<std::pair<uintptr_t, uintptr_t>> keep;
	uintptr_t at, end;

	{
		std::lock_guard<std::mutex> lock(G.mu);
		if (!o.base || G.in_child)
			return;
		for (const auto &e : G.blocks)
			if (e.second.owner.get() == &o)
				keep.emplace_back((uintptr_t)e.first, (uintptr_t)e.first + e.second.len);
		at = (uintptr_t)o.base;
		end = at + o.bytes;
		o.live++;	/* the mapping stays while this runs */
	}
	std::sort(keep.begin(), keep.end());
	keep.emplace_back(end, end);
	for (const auto &k : keep) {
		if (k.first > at)
			madvise((void *)at, k.first - at, MADV_REMOVE);
		at = std::max(at, k.second);
	}
	live_done(o);
}

/* A block of n bytes in o's arena (o null: the oldest serving arena with room
 * for a tensor), or null. */
void *
block_new(OwnerPtr o, size_t n, bool tensor)
{
	Global &G = g();
	size_t len = ((n ? n : 1) + G.page - 1) & ~(G.page - 1);
	void *raw = nullptr;

	{
		std::lock_guard<std::mutex> lock(G.mu);
		if (G.in_child)
			return nullptr;
		if (tensor) {
			for (const OwnerPtr &s : G.serving)
				if (s->tensor_bytes + len <= s->cap) {
					o = s;
					break;
				}
		}
		if (!o || o->slot < 0 || o->closed)
			return nullptr;
		o->live++;
		if (tensor) {
			o->tensor_bytes += len;
			G.tensor_bytes += len;
		}
	}
	{
		std::lock_guard<std::mutex> lock(o->mu);
		if (o->comm)
			raw = ring_alloc(o->comm, len + G.page);
	}
	if (!raw) {
		if (tensor) {
			std::lock_guard<std::mutex> lock(G.mu);
			o->tensor_bytes -= len;
			G.tensor_bytes -= len;
		}
		live_done(*o);
		return nullptr;
	}
	void *p = (void *)(((uintptr_t)raw + G.page - 1) & ~(uintptr_t)(G.page - 1));
	std::lock_guard<std::mutex> lock(G.mu);
	G.blocks.emplace(p, Blk{ o, raw, len, tensor });
	return p;
}

/* ---- fork: the child's blocks become private copies ---- */

void
privatize(void *p, size_t len)
{
	static const char msg[] = "ring: a forked child cannot copy a tensor out of the "
				  "shared arena (out of memory); it exits\n";
	void *t = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (t != MAP_FAILED) {
		memcpy(t, p, len);
		if (mremap(t, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, p) != MAP_FAILED)
			return;
		munmap(t, len);
	}
	/* Shared, the child's writes would land in its parent's tensors. */
	if (write(2, msg, sizeof(msg) - 1) < 0) {
		/* nothing more to say */
	}
	_exit(70);
}

void
fork_prepare()
{
	g().mu.lock();
}

void
fork_parent()
{
	g().mu.unlock();
}

void
fork_child()
{
	Global &G = g();

	if (!G.in_child) {
		for (auto &e : G.blocks)
			privatize(e.first, e.second.len);
		G.in_child = true;
		G.serving.clear();
	}
	G.mu.unlock();
}

/* ---- the CPU allocator ---- */

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define RINGD_ALLOC_CONST
#define RINGD_ALLOC_COPY 1
#else
#define RINGD_ALLOC_CONST const
#define RINGD_ALLOC_COPY 0
#endif

struct RingAllocator final : c10::Allocator {
	c10::DataPtr allocate(size_t n) RINGD_ALLOC_CONST override
	{
		Global &G = g();
		void *p = n >= TENSOR_MIN_BYTES ? block_new(nullptr, n, true) : nullptr;

		if (p)
			return { p, p, &arena_delete, c10::Device(c10::DeviceType::CPU) };
		c10::DataPtr d = G.fb->allocate(n);
		/* One deleter for all, as raw_deleter promises: arena_delete
		 * hands torch's blocks back to torch's. */
		if (G.fb_raw && d.get() && d.get() == d.get_context() &&
		    d.get_deleter() == G.fb_raw) {
			c10::Device dev = d.device();
			void *q = d.release_context();
			return { q, q, &arena_delete, dev };
		}
		return d;
	}
	c10::DeleterFnPtr raw_deleter() const override
	{
		return g().fb_raw ? &arena_delete : nullptr;
	}
#if RINGD_ALLOC_COPY
	void copy_data(void *dest, const void *src, std::size_t count) const override
	{
		default_copy_data(dest, src, count);
	}
#endif
};

/* Once per process: torch's CPU allocator becomes ours, in front of it. */
void
install()
{
	static std::once_flag once;

	std::call_once(once, [] {
		Global &G = g();
		long page = sysconf(_SC_PAGESIZE);
		static RingAllocator *a = new RingAllocator();

		if (page > 0)
			G.page = (size_t)page;
		G.fb = c10::GetCPUAllocator();
		G.fb_raw = G.fb->raw_deleter();
		pthread_atfork(fork_prepare, fork_parent, fork_child);
		c10::SetCPUAllocator(a, ALLOCATOR_PRIORITY);
	});
}

}  // namespace

Arena::Arena(ring_comm *comm) : owner_(std::make_shared<Owner>())
{
	const char *z = getenv("RING_TORCH_ZEROCOPY");
	size_t bytes = 0;
	void *base;

	owner_->comm = comm;
	if ((z && strcmp(z, "0") == 0) || !comm)
		return;		/* nothing in the arena: ring_close unmaps it */
	if (!(base = ring_arena_keep(comm, &bytes)))
		return;
	install();
	Global &G = g();
	std::lock_guard<std::mutex> lock(G.mu);
	owner_->base = (uint8_t *)base;
	owner_->bytes = bytes;
	owner_->cap = bytes / 2;	/* the rest for staging and the operations */
	for (int i = 0; i < MAX_ARENAS; i++) {
		if (G.lo[i].load())
			continue;
		G.hi[i].store((uintptr_t)base + bytes);
		G.lo[i].store((uintptr_t)base);
		if (i >= G.nslots.load())
			G.nslots.store(i + 1);
		owner_->slot = i;
		break;
	}
	if (owner_->slot >= 0 && !G.in_child)
		G.serving.push_back(owner_);
}

Arena::~Arena()
{
	/* Engine::~Engine closes first; this only makes sure nothing serves. */
	std::lock_guard<std::mutex> lock(g().mu);
	auto &s = g().serving;
	for (auto it = s.begin(); it != s.end(); ++it)
		if (*it == owner_) {
			s.erase(it);
			break;
		}
}

at::Tensor
Arena::empty(int64_t numel, const at::TensorOptions &opts)
{
	size_t n = (size_t)numel * opts.dtype().itemsize();
	void *p = n >= SCRATCH_MIN_BYTES ? block_new(owner_, n, false) : nullptr;

	if (!p)
		return at::empty({numel}, opts);	/* no room: staged */
	c10::DataPtr dp(p, p, &arena_delete, c10::Device(c10::DeviceType::CPU));
	c10::Storage s(c10::Storage::use_byte_size_t(), n, std::move(dp), nullptr, false);
	{
		std::lock_guard<std::mutex> lock(mu_);
		arena_bytes_ += n;
	}
	return at::empty({0}, opts).set_(s, 0, {numel}, {1});
}

void
Arena::close(ring_comm *comm)
{
	Global &G = g();
	void *base;
	size_t bytes = 0;

	{
		std::lock_guard<std::mutex> lock(G.mu);
		auto &s = G.serving;
		for (auto it = s.begin(); it != s.end(); ++it)
			if (*it == owner_) {
				s.erase(it);
				break;
			}
	}
	{
		std::lock_guard<std::mutex> lock(owner_->mu);
		owner_->comm = nullptr;	/* no block goes back to it from now on */
	}
	ring_close(comm);
	{
		std::lock_guard<std::mutex> lock(G.mu);
		owner_->closed = true;
		take_unmap_locked(*owner_, &base, &bytes);
	}
	if (base)
		munmap(base, bytes);
	else
		trim(*owner_);
}

size_t
Arena::arena_bytes() const
{
	std::lock_guard<std::mutex> lock(mu_);

	return arena_bytes_;
}

bool
in_arena(const at::Tensor &t)
{
	if (!t.defined() || !t.has_storage())
		return false;
	const void *p = t.storage().data_ptr().get();
	if (!in_ranges(p))
		return false;
	std::lock_guard<std::mutex> lock(g().mu);
	return g().blocks.count(const_cast<void *>(p)) != 0;
}

size_t
arena_tensor_bytes()
{
	std::lock_guard<std::mutex> lock(g().mu);

	return g().tensor_bytes;
}

}  // namespace ringd_torch
