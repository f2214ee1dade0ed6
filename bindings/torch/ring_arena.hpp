/*
 * ring_arena.hpp - the backend's own buffers in libring's shared arena.
 *
 * ringd reads and writes operands in libring's shared arena in place; any
 * other buffer libring stages through it, copying it in and the result out in
 * pieces while ringd works.  The buffers an operation allocates for itself
 * (the flat blocks of an all-gather, a gather, a scatter, a reduce-scatter or
 * an all-to-all of tensor lists) are placed in the arena, so that those need
 * no staging: nothing but the operation ever sees them, and they are freed
 * when it finishes, before the group closes (ring_close unmaps the arena).
 *
 * The caller's tensors are never moved into the arena: their memory may be
 * seen by something that would not follow a move (a numpy array from
 * .numpy(), a DLPack capsule, a memoryview, a ctypes pointer, another group's
 * operation in flight), and torch cannot tell whether it is.  They are staged
 * by libring.  RING_TORCH_ZEROCOPY=0 keeps the backend's buffers out of the
 * arena too.
 */
#pragma once

#include <memory>
#include <mutex>

#include <ATen/ATen.h>

#include "libring/ring.h"

namespace ringd_torch {

class Arena {
 public:
	explicit Arena(ring_comm *comm);
	~Arena();

	/* A tensor of numel elements for the operation's own use: in the arena
	 * when there is room (and zero-copy is on), else ordinary memory. */
	at::Tensor empty(int64_t numel, const at::TensorOptions &opts);
	/* After this the arena is never touched again (blocks still alive are
	 * not freed to it).  Call it before ring_close. */
	void release();
	/* Bytes of arena blocks handed out so far. */
	size_t arena_bytes() const;

 private:
	struct Owner;			/* what the blocks' deleters share */
	struct Block;			/* one data pointer's arena block */
	static void free_block(void *ctx);

	std::shared_ptr<Owner> owner_;
	bool enabled_;
	mutable std::mutex mu_;
	size_t arena_bytes_ = 0;
};

}  // namespace ringd_torch
