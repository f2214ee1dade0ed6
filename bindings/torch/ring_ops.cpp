/*
 * ring_ops.cpp - torch.distributed's operations on libring requests.  Each
 * checks its arguments (every failure a RuntimeError that names the call and
 * what was wrong, before anything is issued, so the ranks stay in step), makes
 * the tensors libring reads and writes contiguous (copying results back into
 * non-contiguous ones when the work finishes), issues its requests under the
 * issue lock and submits the work.  Complex tensors travel as pairs of reals.
 *
 * Vocabulary: a block is one rank's share of a gathered, scattered or
 * exchanged buffer; `per` is how many ring elements make one tensor element.
 */
#include <stdexcept>
#include <string>

#include "bindings/torch/ring_pg.hpp"

namespace ringd_torch {

using c10d::OpType;
using WorkP = c10::intrusive_ptr<c10d::Work>;

[[noreturn]] void
fail(const char *fn, const std::string &why)
{
	throw std::runtime_error(std::string("ring: ") + fn + ": " + why);
}

void
check_tensor(const at::Tensor &t, const char *fn)
{
	if (!t.defined())
		fail(fn, "a tensor is undefined");
	if (!t.device().is_cpu())
		fail(fn, "tensors must be on the CPU, not " + t.device().str() +
			 " (this build of the ring backend has no CUDA path)");
	if (t.layout() != at::kStrided)
		fail(fn, "sparse tensors are not supported");
}

/* torch passes lists; the ring backend takes one tensor per process, as NCCL
 * takes one per device. */
at::Tensor &
single(std::vector<at::Tensor> &v, const char *fn)
{
	if (v.size() != 1)
		fail(fn, "takes one tensor per process, got " + std::to_string(v.size()));
	check_tensor(v[0], fn);
	return v[0];
}

/* t must hold numel elements of ref's dtype. */
static void
check_like(const at::Tensor &t, const at::Tensor &ref, int64_t numel, const char *fn,
	   const char *what)
{
	check_tensor(t, fn);
	if (t.scalar_type() != ref.scalar_type())
		fail(fn, std::string(what) + " has dtype " + c10::toString(t.scalar_type()) +
			 ", the input " + c10::toString(ref.scalar_type()));
	if (t.numel() != numel)
		fail(fn, std::string(what) + " has " + std::to_string(t.numel()) +
			 " elements where " + std::to_string(numel) + " are needed");
}

static void
check_list(const std::vector<at::Tensor> &v, size_t n, const char *fn, const char *what)
{
	if (v.size() != n)
		fail(fn, std::string(what) + " holds " + std::to_string(v.size()) +
			 " tensors; the group has " + std::to_string(n) + " ranks");
}

static int
check_root(int64_t root, int size, const char *fn)
{
	if (root < 0 || root >= size)
		fail(fn, "root " + std::to_string(root) + " is not a rank of this size-" +
			 std::to_string(size) + " group");
	return (int)root;
}

enum ring_dtype
dtype_of(const at::Tensor &t, const char *fn, int64_t *per)
{
	*per = 1;
	switch (t.scalar_type()) {
	case at::kBool:		return RING_BOOL;
	case at::kChar:		return RING_INT8;
	case at::kByte:		return RING_UINT8;
	case at::kShort:	return RING_INT16;
	case at::kInt:		return RING_INT32;
	case at::kLong:		return RING_INT64;
	case at::kHalf:		return RING_FLOAT16;
	case at::kBFloat16:	return RING_BFLOAT16;
	case at::kFloat:	return RING_FLOAT32;
	case at::kDouble:	return RING_FLOAT64;
	case at::kComplexHalf:	*per = 2; return RING_FLOAT16;
	case at::kComplexFloat:	*per = 2; return RING_FLOAT32;
	case at::kComplexDouble: *per = 2; return RING_FLOAT64;
	default:
		fail(fn, std::string("dtype ") + c10::toString(t.scalar_type()) +
			 " has no ringd equivalent");
	}
}

enum ring_op
op_of(const c10d::ReduceOp &op, const at::Tensor &t, const char *fn)
{
	static const char *const names[] = { "SUM", "AVG", "PRODUCT", "MIN", "MAX",
					     "BAND", "BOR", "BXOR", "PREMUL_SUM" };
	enum ring_op r;

	switch (op.op_) {
	case c10d::ReduceOp::SUM:	r = RING_SUM; break;
	case c10d::ReduceOp::AVG:	r = RING_AVG; break;
	case c10d::ReduceOp::PRODUCT:	r = RING_PROD; break;
	case c10d::ReduceOp::MIN:	r = RING_MIN; break;
	case c10d::ReduceOp::MAX:	r = RING_MAX; break;
	case c10d::ReduceOp::BAND:
	case c10d::ReduceOp::BOR:
		if (t.scalar_type() == at::kBool) {	/* and: min, or: max */
			r = op.op_ == c10d::ReduceOp::BAND ? RING_MIN : RING_MAX;
			break;
		}
		/* fall through */
	default:
		fail(fn, std::string("ReduceOp.") +
			 (op.op_ < 9 ? names[op.op_] : "?") +
			 " is not supported here (SUM, AVG, PRODUCT, MIN and MAX are, and "
			 "all_reduce takes BAND, BOR and BXOR of integers too)");
	}
	if (t.is_complex() && r != RING_SUM && r != RING_AVG)
		fail(fn, std::string("complex tensors can be summed or averaged, not ReduceOp.") +
			 names[op.op_]);
	return r;
}

/* The n-th of `blocks` equal blocks of a contiguous tensor, flat. */
static at::Tensor
block(const at::Tensor &flat, int64_t n, int64_t count)
{
	return flat.view({-1}).narrow(0, n * count, count);
}

/* ---- one-tensor collectives ---- */

WorkP
ProcessGroupRing::broadcast(std::vector<at::Tensor> &tensors, const c10d::BroadcastOptions &opts)
{
	const char *fn = "broadcast";
	at::Tensor &t = single(tensors, fn);
	int root = check_root(opts.rootRank, size_, fn);
	int64_t per;
	enum ring_dtype dt = dtype_of(t, fn, &per);
	WorkPtr w = make_work(OpType::BROADCAST, fn, {t});
	w->set_deadline(opts.timeout);
	at::Tensor buf = rank_ == root ? w->input(t) : w->inout(t);
	size_t n = (size_t)(t.numel() * per);

	std::lock_guard<std::mutex> lock(eng_->issue_mu);
	issue(*w, [&](ring_request **r) {
		return ring_ibroadcast(comm_, buf.data_ptr(), n, dt, root, r);
	});
	return submit(w);
}

/* ringd reduces arithmetically only: the bitwise reductions of integers
 * gather every rank's tensor and fold the blocks here, in rank order. */
WorkP
ProcessGroupRing::allreduce_bitwise(std::vector<at::Tensor> &tensors,
				    c10d::ReduceOp::RedOpType op, const char *fn)
{
	at::Tensor &t = single(tensors, fn);
	int64_t per, numel = t.numel();
	enum ring_dtype dt = dtype_of(t, fn, &per);

	if (!at::isIntegralType(t.scalar_type(), /*includeBool=*/false))
		fail(fn, std::string("bitwise reductions take integer or bool tensors, not ") +
			 c10::toString(t.scalar_type()));
	WorkPtr w = make_work(OpType::ALLREDUCE, fn, {t});
	at::Tensor in = w->input(t);
	at::Tensor flat = w->scratch(numel * size_, t.options());
	int size = size_;
	w->then([t, flat, numel, size, op]() mutable {
		at::Tensor acc = block(flat, 0, numel).clone();
		for (int64_t r = 1; r < size; r++) {
			at::Tensor b = block(flat, r, numel);
			if (op == c10d::ReduceOp::BAND)
				acc.bitwise_and_(b);
			else if (op == c10d::ReduceOp::BOR)
				acc.bitwise_or_(b);
			else
				acc.bitwise_xor_(b);
		}
		t.copy_(acc.view(t.sizes()));
	});
	std::lock_guard<std::mutex> lock(eng_->issue_mu);
	issue(*w, [&](ring_request **r) {
		return ring_iallgather(comm_, in.data_ptr(), flat.data_ptr(), (size_t)numel, dt, r);
	});
	return submit(w);
}

WorkP
ProcessGroupRing::allreduce(std::vector<at::Tensor> &tensors, const c10d::AllreduceOptions &opts)
{
	const char *fn = "all_reduce";
	auto rop = opts.reduceOp.op_;

	if ((rop == c10d::ReduceOp::BAND || rop == c10d::ReduceOp::BOR ||
	     rop == c10d::ReduceOp::BXOR) && tensors.size() == 1 && tensors[0].defined() &&
	    tensors[0].scalar_type() != at::kBool)
		return allreduce_bitwise(tensors, rop, fn);
	at::Tensor &t = single(tensors, fn);
	int64_t per;
	enum ring_dtype dt = dtype_of(t, fn, &per);
	enum ring_op op = op_of(opts.reduceOp, t, fn);
	WorkPtr w = make_work(OpType::ALLREDUCE, fn, {t});
	w->set_deadline(opts.timeout);
	at::Tensor buf = w->inout(t);
	size_t n = (size_t)(t.numel() * per);

	std::lock_guard<std::mutex> lock(eng_->issue_mu);
	issue(*w, [&](ring_request **r) {
		return ring_iallreduce(comm_, buf.data_ptr(), buf.data_ptr(), n, dt, op, r);
	});
	return submit(w);
}

/* One libring group: the small all-reduces of one dtype share a ring pass
 * there, the large ones run in place with no flattening copy. */
WorkP
ProcessGroupRing::allreduce_coalesced(std::vector<at::Tensor> &tensors,
				      const c10d::AllreduceCoalescedOptions &opts)
{
	const char *fn = "all_reduce_coalesced";
	std::vector<Starter> starts;

	if (tensors.empty())
		fail(fn, "no tensors given");
	WorkPtr w = make_work(OpType::ALLREDUCE_COALESCED, fn, tensors);
	w->set_deadline(opts.timeout);
	for (at::Tensor &t : tensors) {
		check_tensor(t, fn);
		int64_t per;
		enum ring_dtype dt = dtype_of(t, fn, &per);
		enum ring_op op = op_of(opts.reduceOp, t, fn);
		at::Tensor buf = w->inout(t);
		size_t n = (size_t)(t.numel() * per);

		starts.push_back([this, buf, n, dt, op](ring_request **r) {
			return ring_iallreduce(comm_, buf.data_ptr(), buf.data_ptr(), n, dt, op, r);
		});
	}
	std::lock_guard<std::mutex> lock(eng_->issue_mu);
	issue_group(*w, starts);
	return submit(w);
}

/* Only the root's tensor changes; the others pass no result buffer. */
WorkP
ProcessGroupRing::reduce(std::vector<at::Tensor> &tensors, const c10d::ReduceOptions &opts)
{
	const char *fn = "reduce";
	at::Tensor &t = single(tensors, fn);
	int root = check_root(opts.rootRank, size_, fn);
	int64_t per;
	enum ring_dtype dt = dtype_of(t, fn, &per);
	enum ring_op op = op_of(opts.reduceOp, t, fn);
	WorkPtr w = make_work(OpType::REDUCE, fn, {t});
	w->set_deadline(opts.timeout);
	at::Tensor in = rank_ == root ? w->inout(t) : w->input(t);
	void *out = rank_ == root ? in.data_ptr() : nullptr;
	size_t n = (size_t)(t.numel() * per);

	std::lock_guard<std::mutex> lock(eng_->issue_mu);
	issue(*w, [&](ring_request **r) {
		return ring_ireduce(comm_, in.data_ptr(), out, n, dt, op, root, r);
	});
	return submit(w);
}

/* ---- gathers ---- */

WorkP
ProcessGroupRing::allgather(std::vector<std::vector<at::Tensor>> &outputs,
			    std::vector<at::Tensor> &inputs, const c10d::AllgatherOptions &opts)
{
	const char *fn = "all_gather";
	at::Tensor &t = single(inputs, fn);
	int64_t per, numel = t.numel();
	enum ring_dtype dt = dtype_of(t, fn, &per);

	if (outputs.size() != 1)
		fail(fn, "takes one output list per process, got " + std::to_string(outputs.size()));
	std::vector<at::Tensor> &outs = outputs[0];
	check_list(outs, (size_t)size_, fn, "the output list");
	for (const at::Tensor &o : outs)
		check_like(o, t, numel, fn, "an output tensor");
	WorkPtr w = make_work(OpType::ALLGATHER, fn, outs);
	w->set_deadline(opts.timeout);
	at::Tensor in = w->input(t);
	at::Tensor flat = w->scratch(numel * size_, t.options());
	w->then([outs, flat, numel]() mutable {
		for (size_t i = 0; i < outs.size(); i++)
			outs[i].copy_(block(flat, (int64_t)i, numel).view(outs[i].sizes()));
	});
	std::lock_guard<std::mutex> lock(eng_->issue_mu);
	issue(*w, [&](ring_request **r) {
		return ring_iallgather(comm_, in.data_ptr(), flat.data_ptr(), (size_t)(numel * per),
				       dt, r);
	});
	return submit(w);
}

WorkP
ProcessGroupRing::_allgather_base(at::Tensor &output, at::Tensor &input,
				  const c10d::AllgatherOptions &opts)
{
	const char *fn = "_all_gather_base";
	int64_t per;

	check_tensor(input, fn);
	enum ring_dtype dt = dtype_of(input, fn, &per);
	check_like(output, input, input.numel() * size_, fn, "the output tensor");
	WorkPtr w = make_work(OpType::_ALLGATHER_BASE, fn, {output});
	w->set_deadline(opts.timeout);
	at::Tensor in = w->input(input);
	at::Tensor out = w->inout(output);

	std::lock_guard<std::mutex> lock(eng_->issue_mu);
	issue(*w, [&](ring_request **r) {
		return ring_iallgather(comm_, in.data_ptr(), out.data_ptr(),
				       (size_t)(input.numel() * per), dt, r);
	});
	return submit(w);
}

/* One all-gather per input tensor, in one libring group. */
WorkP
ProcessGroupRing::allgather_coalesced(std::vector<std::vector<at::Tensor>> &outputs,
				      std::vector<at::Tensor> &inputs,
				      const c10d::AllgatherOptions &opts)
{
	const char *fn = "all_gather_coalesced";
	std::vector<Starter> starts;
	std::vector<at::Tensor> flat_outs;

	if (outputs.size() != (size_t)size_)
		fail(fn, "takes one output list per rank (" + std::to_string(size_) + "), got " +
			 std::to_string(outputs.size()));
	for (const auto &list : outputs) {
		check_list(list, inputs.size(), fn, "an output list");
		for (size_t j = 0; j < inputs.size(); j++) {
			check_tensor(inputs[j], fn);
			check_like(list[j], inputs[j], inputs[j].numel(), fn, "an output tensor");
			flat_outs.push_back(list[j]);
		}
	}
	WorkPtr w = make_work(OpType::ALLGATHER_COALESCED, fn, flat_outs);
	w->set_deadline(opts.timeout);
	for (size_t j = 0; j < inputs.size(); j++) {
		int64_t per, numel = inputs[j].numel();
		enum ring_dtype dt = dtype_of(inputs[j], fn, &per);
		at::Tensor in = w->input(inputs[j]);
		at::Tensor flat = w->scratch(numel * size_, inputs[j].options());
		std::vector<at::Tensor> dst;

		for (const auto &list : outputs)
			dst.push_back(list[j]);
		w->then([dst, flat, numel]() mutable {
			for (size_t r = 0; r < dst.size(); r++)
				dst[r].copy_(block(flat, (int64_t)r, numel).view(dst[r].sizes()));
		});
		starts.push_back([this, in, flat, numel, per, dt](ring_request **r) {
			return ring_iallgather(comm_, in.data_ptr(), flat.data_ptr(),
					       (size_t)(numel * per), dt, r);
		});
	}
	std::lock_guard<std::mutex> lock(eng_->issue_mu);
	issue_group(*w, starts);
	return submit(w);
}

/* The root gathers into one buffer and copies each block to its tensor. */
WorkP
ProcessGroupRing::gather(std::vector<std::vector<at::Tensor>> &outputs,
			 std::vector<at::Tensor> &inputs, const c10d::GatherOptions &opts)
{
	const char *fn = "gather";
	at::Tensor &t = single(inputs, fn);
	int root = check_root(opts.rootRank, size_, fn);
	int64_t per, numel = t.numel();
	enum ring_dtype dt = dtype_of(t, fn, &per);
	std::vector<at::Tensor> outs;

	if (rank_ == root) {
		if (outputs.size() != 1)
			fail(fn, "the root takes one output list, got " +
				 std::to_string(outputs.size()));
		outs = outputs[0];
		check_list(outs, (size_t)size_, fn, "the output list");
		for (const at::Tensor &o : outs)
			check_like(o, t, numel, fn, "an output tensor");
	} else if (!outputs.empty()) {
		fail(fn, "only the root (rank " + std::to_string(root) + ") takes output tensors");
	}
	WorkPtr w = make_work(OpType::GATHER, fn, outs);
	w->set_deadline(opts.timeout);
	at::Tensor in = w->input(t);
	void *flat_p = nullptr;
	if (rank_ == root) {
		at::Tensor flat = w->scratch(numel * size_, t.options());
		flat_p = flat.data_ptr();
		w->then([outs, flat, numel]() mutable {
			for (size_t i = 0; i < outs.size(); i++)
				outs[i].copy_(block(flat, (int64_t)i, numel).view(outs[i].sizes()));
		});
	}
	std::lock_guard<std::mutex> lock(eng_->issue_mu);
	issue(*w, [&](ring_request **r) {
		return ring_igather(comm_, in.data_ptr(), flat_p, (size_t)(numel * per), dt, root,
				    r);
	});
	return submit(w);
}

/* The root packs its blocks into one buffer; every rank receives its own. */
WorkP
ProcessGroupRing::scatter(std::vector<at::Tensor> &outputs,
			  std::vector<std::vector<at::Tensor>> &inputs,
			  const c10d::ScatterOptions &opts)
{
	const char *fn = "scatter";
	at::Tensor &t = single(outputs, fn);
	int root = check_root(opts.rootRank, size_, fn);
	int64_t per, numel = t.numel();
	enum ring_dtype dt = dtype_of(t, fn, &per);

	if (rank_ == root) {
		if (inputs.size() != 1)
			fail(fn, "the root takes one input list, got " + std::to_string(inputs.size()));
		check_list(inputs[0], (size_t)size_, fn, "the input list");
		for (const at::Tensor &i : inputs[0])
			check_like(i, t, numel, fn, "an input tensor");
	} else if (!inputs.empty()) {
		fail(fn, "only the root (rank " + std::to_string(root) + ") takes input tensors");
	}
	WorkPtr w = make_work(OpType::SCATTER, fn, {t});
	w->set_deadline(opts.timeout);
	void *flat_p = nullptr;
	if (rank_ == root) {
		at::Tensor flat = w->scratch(numel * size_, t.options());
		for (int r = 0; r < size_; r++)
			block(flat, r, numel).copy_(inputs[0][r].reshape({-1}));
		flat_p = flat.data_ptr();
	}
	at::Tensor out = w->inout(t);

	std::lock_guard<std::mutex> lock(eng_->issue_mu);
	issue(*w, [&](ring_request **r) {
		return ring_iscatter(comm_, flat_p, out.data_ptr(), (size_t)(numel * per), dt,
				     root, r);
	});
	return submit(w);
}

/* ---- reduce-scatters ---- */

WorkP
ProcessGroupRing::reduce_scatter(std::vector<at::Tensor> &outputs,
				 std::vector<std::vector<at::Tensor>> &inputs,
				 const c10d::ReduceScatterOptions &opts)
{
	const char *fn = "reduce_scatter";
	at::Tensor &t = single(outputs, fn);
	int64_t per, numel = t.numel();
	enum ring_dtype dt = dtype_of(t, fn, &per);
	enum ring_op op = op_of(opts.reduceOp, t, fn);

	if (inputs.size() != 1)
		fail(fn, "takes one input list per process, got " + std::to_string(inputs.size()));
	check_list(inputs[0], (size_t)size_, fn, "the input list");
	for (const at::Tensor &i : inputs[0])
		check_like(i, t, numel, fn, "an input tensor");
	WorkPtr w = make_work(OpType::REDUCE_SCATTER, fn, {t});
	w->set_deadline(opts.timeout);
	at::Tensor flat = w->scratch(numel * size_, t.options());
	for (int r = 0; r < size_; r++)
		block(flat, r, numel).copy_(inputs[0][r].reshape({-1}));
	at::Tensor out = w->inout(t);

	std::lock_guard<std::mutex> lock(eng_->issue_mu);
	issue(*w, [&](ring_request **r) {
		return ring_ireduce_scatter(comm_, flat.data_ptr(), out.data_ptr(),
					    (size_t)(numel * per), dt, op, r);
	});
	return submit(w);
}

WorkP
ProcessGroupRing::_reduce_scatter_base(at::Tensor &output, at::Tensor &input,
				       const c10d::ReduceScatterOptions &opts)
{
	const char *fn = "_reduce_scatter_base";
	int64_t per;

	check_tensor(output, fn);
	enum ring_dtype dt = dtype_of(output, fn, &per);
	enum ring_op op = op_of(opts.reduceOp, output, fn);
	check_like(input, output, output.numel() * size_, fn, "the input tensor");
	WorkPtr w = make_work(OpType::_REDUCE_SCATTER_BASE, fn, {output});
	w->set_deadline(opts.timeout);
	at::Tensor in = w->input(input);
	at::Tensor out = w->inout(output);

	std::lock_guard<std::mutex> lock(eng_->issue_mu);
	issue(*w, [&](ring_request **r) {
		return ring_ireduce_scatter(comm_, in.data_ptr(), out.data_ptr(),
					    (size_t)(output.numel() * per), dt, op, r);
	});
	return submit(w);
}

#if RINGD_TORCH2
/* all_gather_into_tensor in a coalescing manager: one libring group. */
WorkP
ProcessGroupRing::allgather_into_tensor_coalesced(std::vector<at::Tensor> &outputs,
						  std::vector<at::Tensor> &inputs,
						  const c10d::AllgatherOptions &opts)
{
	const char *fn = "all_gather_into_tensor_coalesced";
	std::vector<Starter> starts;

	if (inputs.empty() || inputs.size() != outputs.size())
		fail(fn, "takes as many outputs as inputs (" + std::to_string(outputs.size()) +
			 " and " + std::to_string(inputs.size()) + "), at least one");
	for (size_t i = 0; i < inputs.size(); i++) {
		check_tensor(inputs[i], fn);
		check_like(outputs[i], inputs[i], inputs[i].numel() * size_, fn, "an output tensor");
	}
	WorkPtr w = make_work(OpType::COALESCED, fn, outputs);
	w->set_deadline(opts.timeout);
	for (size_t i = 0; i < inputs.size(); i++) {
		int64_t per;
		enum ring_dtype dt = dtype_of(inputs[i], fn, &per);
		at::Tensor in = w->input(inputs[i]);
		at::Tensor out = w->inout(outputs[i]);
		size_t n = (size_t)(inputs[i].numel() * per);

		starts.push_back([this, in, out, n, dt](ring_request **r) {
			return ring_iallgather(comm_, in.data_ptr(), out.data_ptr(), n, dt, r);
		});
	}
	std::lock_guard<std::mutex> lock(eng_->issue_mu);
	issue_group(*w, starts);
	return submit(w);
}

/* reduce_scatter_tensor in a coalescing manager: one libring group. */
WorkP
ProcessGroupRing::reduce_scatter_tensor_coalesced(std::vector<at::Tensor> &outputs,
						  std::vector<at::Tensor> &inputs,
						  const c10d::ReduceScatterOptions &opts)
{
	const char *fn = "reduce_scatter_tensor_coalesced";
	std::vector<Starter> starts;

	if (inputs.empty() || inputs.size() != outputs.size())
		fail(fn, "takes as many outputs as inputs (" + std::to_string(outputs.size()) +
			 " and " + std::to_string(inputs.size()) + "), at least one");
	for (size_t i = 0; i < inputs.size(); i++) {
		check_tensor(outputs[i], fn);
		check_like(inputs[i], outputs[i], outputs[i].numel() * size_, fn, "an input tensor");
		op_of(opts.reduceOp, outputs[i], fn);
	}
	WorkPtr w = make_work(OpType::COALESCED, fn, outputs);
	w->set_deadline(opts.timeout);
	for (size_t i = 0; i < inputs.size(); i++) {
		int64_t per;
		enum ring_dtype dt = dtype_of(outputs[i], fn, &per);
		enum ring_op op = op_of(opts.reduceOp, outputs[i], fn);
		at::Tensor in = w->input(inputs[i]);
		at::Tensor out = w->inout(outputs[i]);
		size_t n = (size_t)(outputs[i].numel() * per);

		starts.push_back([this, in, out, n, dt, op](ring_request **r) {
			return ring_ireduce_scatter(comm_, in.data_ptr(), out.data_ptr(), n, dt, op, r);
		});
	}
	std::lock_guard<std::mutex> lock(eng_->issue_mu);
	issue_group(*w, starts);
	return submit(w);
}
#endif

/* ---- all-to-all ---- */

/* Element offset and count of each rank's rows of t (dim 0), from splits
 * (empty: equal shares). */
static void
split_rows(const at::Tensor &t, const std::vector<int64_t> &splits, int size, const char *fn,
	   const char *which, std::vector<int64_t> &off, std::vector<int64_t> &cnt)
{
	int64_t rows = t.dim() ? t.size(0) : 1, sum = 0;
	int64_t row = rows ? t.numel() / rows : 0;

	if (splits.empty()) {
		if (rows % size)
			fail(fn, std::string("the ") + which + " tensor's first dimension (" +
				 std::to_string(rows) + ") does not divide into " +
				 std::to_string(size) + " equal blocks");
	} else if (splits.size() != (size_t)size) {
		fail(fn, std::string(which) + "_split_sizes has " + std::to_string(splits.size()) +
			 " entries; the group has " + std::to_string(size) + " ranks");
	}
	for (int r = 0; r < size; r++) {
		int64_t n = splits.empty() ? rows / size : splits[r];

		if (n < 0)
			fail(fn, std::string(which) + "_split_sizes has a negative entry");
		off.push_back(sum * row);
		cnt.push_back(n * row);
		sum += n;
	}
	if (sum != rows)
		fail(fn, std::string(which) + "_split_sizes add up to " + std::to_string(sum) +
			 " rows; the tensor has " + std::to_string(rows));
}

/* Equal blocks: ring_alltoall; split sizes: ring_alltoallv, whose counts
 * ringd checks against the senders'. */
WorkP
ProcessGroupRing::alltoall_base(at::Tensor &output, at::Tensor &input,
				std::vector<int64_t> &outputSplits,
				std::vector<int64_t> &inputSplits, const c10d::AllToAllOptions &opts)
{
	const char *fn = "all_to_all_single";
	std::vector<int64_t> ioff, icnt, ooff, ocnt;
	int64_t per;

	check_tensor(input, fn);
	enum ring_dtype dt = dtype_of(input, fn, &per);
	check_like(output, input, output.numel(), fn, "the output tensor");
	split_rows(input, inputSplits, size_, fn, "input", ioff, icnt);
	split_rows(output, outputSplits, size_, fn, "output", ooff, ocnt);
	bool equal = inputSplits.empty() && outputSplits.empty();
	if (equal && input.numel() != output.numel())
		fail(fn, "the input has " + std::to_string(input.numel()) +
			 " elements, the output " + std::to_string(output.numel()));
	WorkPtr w = make_work(OpType::ALLTOALL_BASE, fn, {output});
	w->set_deadline(opts.timeout);
	at::Tensor in = w->input(input);
	at::Tensor out = w->inout(output);

	std::lock_guard<std::mutex> lock(eng_->issue_mu);
	if (equal) {
		issue(*w, [&](ring_request **r) {
			return ring_ialltoall(comm_, in.data_ptr(), out.data_ptr(),
					      (size_t)(icnt[0] * per), dt, r);
		});
		return submit(w);
	}
	std::vector<size_t> sc, sd, rc, rd;
	for (int r = 0; r < size_; r++) {
		sc.push_back((size_t)(icnt[r] * per));
		sd.push_back((size_t)(ioff[r] * per));
		rc.push_back((size_t)(ocnt[r] * per));
		rd.push_back((size_t)(ooff[r] * per));
	}
	issue(*w, [&](ring_request **r) {
		return ring_ialltoallv(comm_, in.data_ptr(), sc.data(), sd.data(), out.data_ptr(),
				       rc.data(), rd.data(), dt, r);
	});
	return submit(w);
}

/* Lists of per-rank tensors: packed into one buffer each way, then
 * ring_alltoallv. */
WorkP
ProcessGroupRing::alltoall(std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
			   const c10d::AllToAllOptions &opts)
{
	const char *fn = "all_to_all";
	std::vector<size_t> sc, rc;
	int64_t per, itotal = 0, ototal = 0;

	check_list(inputs, (size_t)size_, fn, "the input list");
	check_list(outputs, (size_t)size_, fn, "the output list");
	for (int r = 0; r < size_; r++) {
		check_tensor(inputs[r], fn);
		check_like(outputs[r], inputs[0], outputs[r].numel(), fn, "an output tensor");
		check_like(inputs[r], inputs[0], inputs[r].numel(), fn, "an input tensor");
		itotal += inputs[r].numel();
		ototal += outputs[r].numel();
	}
	enum ring_dtype dt = dtype_of(inputs[0], fn, &per);
	WorkPtr w = make_work(OpType::ALLTOALL, fn, outputs);
	w->set_deadline(opts.timeout);
	at::Tensor sflat = w->scratch(itotal, inputs[0].options());
	at::Tensor rflat = w->scratch(ototal, inputs[0].options());
	for (int r = 0, off = 0; r < size_; off += (int)inputs[r].numel(), r++) {
		sflat.narrow(0, off, inputs[r].numel()).copy_(inputs[r].reshape({-1}));
		sc.push_back((size_t)(inputs[r].numel() * per));
		rc.push_back((size_t)(outputs[r].numel() * per));
	}
	std::vector<at::Tensor> outs = outputs;
	w->then([outs, rflat]() mutable {
		int64_t off = 0;
		for (at::Tensor &o : outs) {
			o.copy_(rflat.narrow(0, off, o.numel()).view(o.sizes()));
			off += o.numel();
		}
	});
	std::lock_guard<std::mutex> lock(eng_->issue_mu);
	issue(*w, [&](ring_request **r) {
		return ring_ialltoallv(comm_, sflat.data_ptr(), sc.data(), nullptr, rflat.data_ptr(),
				       rc.data(), nullptr, dt, r);
	});
	return submit(w);
}

/* ---- barrier (sends and receives: ring_p2p.cpp) ---- */

WorkP
ProcessGroupRing::barrier(const c10d::BarrierOptions &opts)
{
	WorkPtr w = make_work(OpType::BARRIER, "barrier", {});
	w->set_deadline(opts.timeout);

	std::lock_guard<std::mutex> lock(eng_->issue_mu);
	issue(*w, [&](ring_request **r) { return ring_ibarrier(comm_, r); });
	return submit(w);
}

}  // namespace ringd_torch
