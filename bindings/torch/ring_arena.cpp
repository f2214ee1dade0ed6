/*
 * ring_arena.cpp - tensors in libring's arena: the group's own buffers and
 * the CPU allocator that makes large tensors there (see ring_arena.hpp for
 * why these and no others).
 *
 * Every arena block, of either kind, is a whole number of pages at a page
 * boundary (so that a forked child can map it privately in its place), its
 * data pointer is its own context (so torch's raw_allocate works), and one
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

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
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
	int fd = -1;			/* our own descriptor of its memfd; -1: none */
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
	bool in_child = false;		/* a forked child: the blocks are private maps */
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

/* What take_unmap_locked hands over: a mapping and its memfd to let go of. */
struct Unmap {
	void *base = nullptr;
	size_t bytes = 0;
	int fd = -1;

	void run()
	{
		if (base)
			munmap(base, bytes);
		if (fd >= 0)
			close(fd);
	}
};

/* Under G.mu: o's mapping and descriptor, handed to the caller to let go
 * of, once o is closed and holds no block (never in a forked child: its
 * private maps lie inside it). */
Unmap
take_unmap_locked(Arena::Owner &o)
{
	Global &G = g();
	Unmap u;

	if (!o.closed || o.live || !o.base || G.in_child)
		return u;
	if (o.slot >= 0) {
		G.lo[o.slot].store(0);
		G.hi[o.slot].store(0);
		o.slot = -1;
	}
	u.base = o.base;
	u.bytes = o.bytes;
	u.fd = o.fd;
	o.base = nullptr;
	o.fd = -1;
	return u;
}

void
live_done(Arena::Owner &o)
{
	Unmap u;
	{
		std::lock_guard<std::mutex> lock(g().mu);
		o.live--;
		u = take_unmap_locked(o);
	}
	u.run();
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
			/* a private map: libring's state here is the parent's */
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

/* ---- fork: the child's blocks become private maps ---- */

/*
 * A forked child gets the arena's MAP_SHARED mapping, so its writes into a
 * tensor there would land in its parent's.  Each block becomes, in the
 * child, a MAP_PRIVATE map of the same pages of the memfd: nothing is copied
 * at the fork, and the kernel copies a page the first time the child writes
 * it (a DataLoader worker that never touches the model's tensors pays
 * nothing for them, instead of a copy of every block).  Until then the child
 * reads the memfd's pages as they are: what the parent (or ringd) writes
 * there later is seen in the pages the child has not written.  Copying every
 * block, as ordinary copy-on-write would in effect need, is the way out only
 * when the memfd is not at hand (memfd_of found none).
 */

/* A descriptor of our own of the memfd mapped at base (libring's closes
 * with the group, and ring.h hands out the mapping only): one of the
 * process's descriptors that is the very file /proc/self/maps shows at
 * base, duplicated and checked again (another thread may close and reuse a
 * number meanwhile).  -1 when none is found (no /proc). */
int
memfd_of(const void *base)
{
	unsigned long long start, ino = 0;
	unsigned int maj = 0, min = 0;
	bool found = false;
	char *line = nullptr;
	size_t cap = 0;
	FILE *f = fopen("/proc/self/maps", "re");

	if (!f)
		return -1;
	while (!found && getline(&line, &cap, f) > 0)
		found = sscanf(line, "%llx-%*x %*s %*x %x:%x %llu", &start, &maj, &min, &ino) == 4 &&
			start == (uintptr_t)base && ino != 0;
	free(line);
	fclose(f);
	DIR *d = found ? opendir("/proc/self/fd") : nullptr;
	if (!d)
		return -1;
	dev_t dev = makedev(maj, min);
	auto same = [&](int fd) {
		struct stat st;
		return fstat(fd, &st) == 0 && st.st_dev == dev && (unsigned long long)st.st_ino == ino;
	};
	int got = -1;
	for (struct dirent *e; got < 0 && (e = readdir(d));) {
		char *end;
		long n = strtol(e->d_name, &end, 10);
		if (*end || end == e->d_name || n == dirfd(d) || !same((int)n))
			continue;
		int fd = fcntl((int)n, F_DUPFD_CLOEXEC, 3);
		if (fd >= 0 && same(fd))
			got = fd;
		else if (fd >= 0)
			close(fd);
	}
	closedir(d);
	return got;
}

[[noreturn]] void
child_exit(const char *msg, size_t len)
{
	/* Shared, the child's writes would land in its parent's tensors. */
	if (write(2, msg, len) < 0) {
		/* nothing more to say */
	}
	_exit(70);
}

/* Moves the mapping t (len bytes) over p; false (t unmapped) on failure. */
bool
move_over(void *t, void *p, size_t len)
{
	if (t == MAP_FAILED)
		return false;
	if (mremap(t, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, p) != MAP_FAILED)
		return true;
	munmap(t, len);
	return false;
}

/* The block at p (offset off in the memfd fd) mapped privately in its
 * place; a copy of it when there is no memfd or the map fails.  Either is
 * made aside and moved over p, so that p stays mapped until one is ready. */
void
privatize(void *p, size_t len, int fd, off_t off)
{
	static const char msg[] = "ring: a forked child cannot copy a tensor out of the "
				  "shared arena (out of memory); it exits\n";
	const int rw = PROT_READ | PROT_WRITE;

	if (fd >= 0 && move_over(mmap(nullptr, len, rw, MAP_PRIVATE, fd, off), p, len))
		return;
	void *t = mmap(nullptr, len, rw, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (t != MAP_FAILED)
		memcpy(t, p, len);
	if (!move_over(t, p, len))
		child_exit(msg, sizeof(msg) - 1);
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

/* The memfds' descriptors go too: the private maps hold the files, and the
 * child never maps another block. */
void
fork_child()
{
	Global &G = g();

	if (!G.in_child) {
		for (auto &e : G.blocks) {
			const Arena::Owner &o = *e.second.owner;
			privatize(e.first, e.second.len, o.fd, (off_t)((uint8_t *)e.first - o.base));
		}
		auto drop = [](Arena::Owner &o) {
			if (o.fd >= 0)
				close(o.fd);
			o.fd = -1;
		};
		for (auto &e : G.blocks)
			drop(*e.second.owner);
		for (const OwnerPtr &o : G.serving)
			drop(*o);
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
	bool child;
	{
		std::lock_guard<std::mutex> lock(G.mu);
		child = G.in_child;
	}
	/* A forked child makes no block: it needs no descriptor. */
	int fd = child ? -1 : memfd_of(base);
	std::lock_guard<std::mutex> lock(G.mu);
	owner_->base = (uint8_t *)base;
	owner_->bytes = bytes;
	owner_->fd = fd;
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
	Unmap u;

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
		u = take_unmap_locked(*owner_);
	}
	if (u.base)
		u.run();
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
