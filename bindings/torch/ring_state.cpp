/*
 * ring_state.cpp - ProcessGroupRing::state_sync, ring_state_sync over the
 * group's own communicator: tensors (CPU, contiguous) made bit-identical on
 * every rank of the group, for ringd.torch's helpers that heal and check a
 * module's and an optimizer's state.  It is issued under the group's issue
 * lock, so no collective of torch's slips between its own, and runs after
 * every collective issued before it, as libring orders them; not while a
 * send or receive of the group is in flight (ringd pairs a peer's messages
 * in order, so a header receive of the tag matcher would take its data).
 */
#include "bindings/torch/ring_pg.hpp"

namespace ringd_torch {

std::vector<int>
ProcessGroupRing::state_sync(const std::vector<at::Tensor> &tensors)
{
	const char *fn = "state_sync";
	std::vector<void *> bufs;
	std::vector<size_t> sizes;

	check_open(fn);
	for (const at::Tensor &t : tensors) {
		check_tensor(t, fn);
		if (!t.is_contiguous())
			fail(fn, "tensors must be contiguous (ringd.torch.sync_state copies "
				 "the others)");
		bufs.push_back(t.numel() ? t.data_ptr() : nullptr);
		sizes.push_back((size_t)t.numel() * t.element_size());
	}
	if (tensors.size() > (size_t)INT32_MAX / (size_t)(size_ > 0 ? size_ : 1))
		fail(fn, "too many tensors");
	std::vector<int> source(tensors.size() * (size_t)size_ + 1, -1);
	std::lock_guard<std::mutex> lock(eng_->issue_mu);
	if (eng_->coalescing)
		fail(fn, "not between start_coalescing and end_coalescing");
	{
		/* ringd pairs a peer's sends with receives in order, tag-less: a
		 * header receive of ours in flight would take this sync's data */
		std::lock_guard<std::mutex> busy(eng_->mu);
		if (!eng_->p2p.empty())
			fail(fn, "a send or receive of the group is in flight: wait for it "
				 "first (the sync's own transfers would be paired with it)");
	}
	int rc = ring_state_sync(comm_, (int)tensors.size(), bufs.data(), sizes.data(),
				 source.data());
	if (rc != 0)
		fail(fn, ring_last_error(comm_));
	source.pop_back();
	return source;
}

}  // namespace ringd_torch
