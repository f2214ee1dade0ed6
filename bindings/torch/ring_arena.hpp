/*
 * ring_arena.hpp - tensors in libring's shared arena.
 *
 * ringd reads and writes operands in libring's shared arena in place; any
 * other buffer libring stages through it, copying it in and the result out in
 * pieces while ringd works, which costs a DDP step about as much as the
 * all-reduce of its buckets.  Two kinds of tensors are placed in the arena
 * from the moment they are made, so that no tensor ever moves:
 *
 * - The buffers an operation allocates for itself (the flat blocks of an
 *   all-gather, a gather, a scatter, a reduce-scatter or an all-to-all of
 *   tensor lists, the contiguous copies of strided tensors): nothing but the
 *   operation sees them.
 * - Every CPU tensor of 1 MiB or more made while a ring group is alive (DDP's
 *   gradient buckets among them): the backend installs a CPU allocator
 *   (c10::SetCPUAllocator) that serves those from the arena of the oldest
 *   group still open, up to half of that arena (the rest stays for staging),
 *   and everything else from torch's own allocator.
 *
 * Memory from the arena stays valid for as long as a tensor uses it, also
 * after its group is closed: libring hands the mapping over
 * (ring_arena_keep), and it is unmapped when the group is closed and its last
 * block is freed (ringd no longer sees it after the close).  A forked child
 * (a DataLoader worker, os.fork) gets the blocks as private maps of the same
 * memory: nothing is copied at the fork, a page is copied the first time the
 * child writes it, and what the child writes is never seen by its parent.
 * Until then the child reads the page as its parent has it, the parent's
 * (and ringd's) later writes included, as a MAP_PRIVATE map of a file reads
 * it.
 *
 * The caller's tensors are never moved into the arena: their memory may be
 * seen by something that would not follow a move (a numpy array from
 * .numpy(), a DLPack capsule, a memoryview, a ctypes pointer, another group's
 * operation in flight), and torch cannot tell whether it is.  Those made
 * elsewhere are staged by libring.  RING_TORCH_ZEROCOPY=0 keeps every tensor
 * out of the arena.
 */
#pragma once

#include <memory>
#include <mutex>

#include <ATen/ATen.h>

#include "libring/ring.h"

namespace ringd_torch {

class Arena {
 public:
	/* comm's arena, for its group's buffers and (when it is the oldest group
	 * open) for large tensors. */
	explicit Arena(ring_comm *comm);
	~Arena();

	/* A tensor of numel elements for the operation's own use: in the arena
	 * when there is room (and zero-copy is on), else ordinary memory. */
	at::Tensor empty(int64_t numel, const at::TensorOptions &opts);
	/* Leaves the job (ring_close): after this the arena serves nothing; its
	 * blocks still alive stay valid, and it is unmapped with the last. */
	void close(ring_comm *comm);
	/* Bytes of the group's own buffers placed in the arena so far. */
	size_t arena_bytes() const;

	struct Owner;			/* one arena, shared with its blocks */

 private:
	std::shared_ptr<Owner> owner_;
	mutable std::mutex mu_;
	size_t arena_bytes_ = 0;
};

/* Whether t's memory lies in a ring group's arena (made there by the
 * allocator or an operation). */
bool in_arena(const at::Tensor &t);
/* Bytes of tensors the allocator has in arenas now. */
size_t arena_tensor_bytes();

}  // namespace ringd_torch
