/*
 * ring_p2p.cpp - send, recv and recvAnysource, with tags matched as gloo
 * matches them: a receive takes the first message of its tag from its source
 * (or from any rank), whatever other tags came before it.
 *
 * ringd pairs a rank's sends to a peer with that peer's receives from it in
 * order, and checks their dtype and shape; it knows nothing of tags or of
 * receiving from any source.  So every send here is two: a header (tag,
 * dtype, element count, a magic number) and the payload.  The receiving side
 * reads headers from a peer while some receive could take a message from it
 * (one header receive in flight per peer); a header that matches the first
 * such receive (posting order) has its payload received straight into that
 * receive's tensor, any other into a stash of its own size, which a later
 * receive of that source and tag copies out.  Every header and payload
 * receive is posted by the p2p thread (p2p_round), never while the group is
 * coalescing (a libring group would record it).  A receive that no message
 * matches fails after the group's operation bound; so does one whose source
 * failed (its header receive's error is the receive's).
 */
#include <cstring>
#include <stdexcept>

#include "bindings/torch/ring_pg.hpp"

namespace ringd_torch {

using c10d::OpType;
using WorkP = c10::intrusive_ptr<c10d::Work>;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int64_t kMagic = 0x72696e6774616731;	/* "ringtag1" */
constexpr size_t kHeaderLen = 4;
const size_t kHeaderShape[1] = { kHeaderLen };

void
check_peer(int peer, int rank, int size, const char *fn, const char *what)
{
	if (peer < 0 || peer >= size)
		fail(fn, std::string(what) + " " + std::to_string(peer) +
			 " is not a rank of this size-" + std::to_string(size) + " group");
	if (peer == rank)
		fail(fn, std::string(what) + " " + std::to_string(peer) + " is this rank");
}

}  // namespace

WorkP
ProcessGroupRing::send(std::vector<at::Tensor> &tensors, int dst, int tag)
{
	const char *fn = "send";
	at::Tensor &t = single(tensors, fn);
	int64_t per;
	enum ring_dtype dt = dtype_of(t, fn, &per);

	check_peer(dst, rank_, size_, fn, "destination");
	WorkPtr w = make_work(OpType::SEND, fn, {t});
	at::Tensor in = w->input(t);
	size_t shape = (size_t)(t.numel() * per);
	at::Tensor hdr = w->scratch(kHeaderLen, at::TensorOptions().dtype(at::kLong));
	int64_t *h = hdr.data_ptr<int64_t>();

	h[0] = tag;
	h[1] = dt;
	h[2] = (int64_t)shape;
	h[3] = kMagic;
	std::lock_guard<std::mutex> lock(eng_->issue_mu);
	issue(*w, [&](ring_request **r) {
		return ring_isend(comm_, hdr.data_ptr(), RING_INT64, 1, kHeaderShape, dst, r);
	});
	issue(*w, [&](ring_request **r) {
		return ring_isend(comm_, in.data_ptr(), dt, 1, &shape, dst, r);
	});
	return submit(w);
}

WorkP
ProcessGroupRing::recv(std::vector<at::Tensor> &tensors, int src, int tag)
{
	const char *fn = "recv";
	at::Tensor &t = single(tensors, fn);
	int64_t per;
	enum ring_dtype dt = dtype_of(t, fn, &per);

	check_peer(src, rank_, size_, fn, "source");
	WorkPtr w = make_work(OpType::RECV, fn, {t});
	at::Tensor out = w->inout(t);

	eng_->p2p_post_recv(w, out, src, tag, dt, (size_t)(t.numel() * per));
	return submit(w);
}

WorkP
ProcessGroupRing::recvAnysource(std::vector<at::Tensor> &tensors, int tag)
{
	const char *fn = "recv";
	at::Tensor &t = single(tensors, fn);
	int64_t per;
	enum ring_dtype dt = dtype_of(t, fn, &per);

	if (size_ < 2)
		fail(fn, "a group of one has no other rank to receive from");
	WorkPtr w = make_work(OpType::RECVANYSOURCE, fn, {t});
	at::Tensor out = w->inout(t);

	eng_->p2p_post_recv(w, out, -1, tag, dt, (size_t)(t.numel() * per));
	return submit(w);
}

/* "recv from rank 1 with tag 0 expected 3 float32; rank 1 sent 5 float32":
 * what the receive asked for, then what the sender sent. */
static std::string
mismatch(int src, int tag, enum ring_dtype want_dt, size_t want, enum ring_dtype dt,
	 size_t count)
{
	std::string from = "rank " + std::to_string(src);

	return "ring: recv from " + from + " with tag " + std::to_string(tag) + " expected " +
	       std::to_string(want) + " " + ring_dtype_name(want_dt) + "; " + from + " sent " +
	       std::to_string(count) + " " + ring_dtype_name(dt);
}

/* Takes a stashed message when one matches, else waits for one. */
void
Engine::p2p_post_recv(const WorkPtr &w, at::Tensor buf, int src, int tag,
				enum ring_dtype dt, size_t count)
{
	std::lock_guard<std::mutex> lock(mu);

	for (auto it = match.arrived.begin(); it != match.arrived.end(); ++it) {
		if ((src >= 0 && it->src != src) || it->tag != tag)
			continue;
		P2P::Arrived a = *it;
		match.arrived.erase(it);
		w->add_request(a.payload);
		w->keep(a.stash);
		w->set_source_rank(a.src);
		if (a.dt != dt || a.count != count) {
			w->fail(mismatch(a.src, tag, dt, count, a.dt, a.count));
			return;
		}
		size_t bytes = count * ring_dtype_size(dt);
		at::Tensor stash = a.stash;
		w->then_first([buf, stash, bytes]() {
			if (bytes)
				memcpy(buf.data_ptr(), stash.data_ptr(), bytes);
		});
		return;
	}
	w->set_pending(true);
	match.pending.push_back(P2P::Pending{
		w, buf, src, tag, dt, count,
		Clock::now() + std::chrono::milliseconds(op_timeout_ms + 1000) });
}

bool
Engine::p2p_busy() const
{
	if (!match.pending.empty() || !match.arrived.empty())
		return true;
	for (const P2P::Reader &rd : match.readers)
		if (rd.req)
			return true;
	return false;
}

/* Works to fail once the locks are let go (their futures' callbacks may
 * issue operations). */
using Failures = std::vector<std::pair<c10::intrusive_ptr<WorkRing>, std::string>>;

/* Takes every receive that waits for a message from src alone off the
 * queue, to fail (any-source ones wait for their bound). */
static void
fail_waiting_for(P2P &m, int src, const std::string &why, Failures &out)
{
	for (auto it = m.pending.begin(); it != m.pending.end();) {
		if (it->src == src) {
			it->w->set_pending(false);
			out.emplace_back(it->w, why);
			it = m.pending.erase(it);
		} else {
			++it;
		}
	}
}

bool
Engine::p2p_round()
{
	Failures fails;
	bool moved = p2p_match(fails);

	for (auto &f : fails)
		f.first->fail(f.second);
	return moved;
}

bool
Engine::p2p_match(Failures &fails)
{
	std::lock_guard<std::mutex> issue(issue_mu);
	std::lock_guard<std::mutex> lock(mu);
	bool moved = false;
	auto now = Clock::now();

	if (coalescing || aborted)
		return false;
	/* Receives past their bound. */
	for (auto it = match.pending.begin(); it != match.pending.end();) {
		if (now < it->deadline) {
			++it;
			continue;
		}
		it->w->set_pending(false);
		fails.emplace_back(it->w, "ring: recv: no message " +
			    (it->src >= 0 ? "from rank " + std::to_string(it->src)
					  : std::string("from any rank")) +
			    " with tag " + std::to_string(it->tag) + " within " +
			    std::to_string(op_timeout_ms) + " ms");
		it = match.pending.erase(it);
		moved = true;
	}
	/* Headers that came. */
	for (int q = 0; q < size; q++) {
		P2P::Reader &rd = match.readers[(size_t)q];
		int done = 0, rc;

		if (!rd.req)
			continue;
		rc = ring_test(rd.req, &done);
		if (!done)
			continue;
		moved = true;
		std::string err = rc ? ring_request_error(rd.req) : "";
		ring_request_free(rd.req);
		rd.req = nullptr;
		const int64_t *h = rd.hdr.data_ptr<int64_t>();
		if (!rc && (h[3] != kMagic || h[1] < 0 || h[1] >= RING_DTYPE_COUNT || h[2] < 0))
			err = "a message from rank " + std::to_string(q) + " is not a tagged send's "
			      "header (does that rank run an older ringd.torch?)";
		if (!err.empty()) {
			rd.err = err;
			rd.retry = now + std::chrono::milliseconds(100);
			fail_waiting_for(match, q, "ring: recv: " + err, fails);
			continue;
		}
		rd.err.clear();
		int tag = (int)h[0];
		auto dt = (enum ring_dtype)h[1];
		size_t count = (size_t)h[2];
		auto p = match.pending.begin();
		for (; p != match.pending.end(); ++p)
			if ((p->src == q || p->src < 0) && p->tag == tag)
				break;
		at::Tensor into;
		bool direct = p != match.pending.end() && p->dt == dt && p->count == count;
		if (direct)
			into = p->buf;
		else
			into = at::empty({(int64_t)(count * ring_dtype_size(dt))},
					 at::TensorOptions().dtype(at::kByte));
		ring_request *r = nullptr;
		rc = ring_irecv(comm, into.data_ptr(), dt, 1, &count, q, &r);
		if (rc) {
			std::string why = std::string("ring: recv: ") + ring_last_error(comm);
			if (p != match.pending.end()) {
				p->w->set_pending(false);
				fails.emplace_back(p->w, why);
				match.pending.erase(p);
			}
			rd.err = why;
			rd.retry = now + std::chrono::milliseconds(100);
			continue;
		}
		if (p == match.pending.end()) {
			match.arrived.push_back(P2P::Arrived{ q, tag, dt, count, into, r });
			continue;
		}
		WorkPtr w = p->w;
		w->add_request(r);
		w->set_source_rank(q);
		w->set_pending(false);
		if (!direct) {
			w->keep(into);
			fails.emplace_back(w, mismatch(q, tag, p->dt, p->count, dt, count));
		}
		match.pending.erase(p);
	}
	/* Header receives where a receive waits and none is in flight. */
	for (int q = 0; q < size; q++) {
		P2P::Reader &rd = match.readers[(size_t)q];
		bool wanted = false;

		if (q == rank || rd.req || (!rd.err.empty() && now < rd.retry))
			continue;
		for (const P2P::Pending &p : match.pending)
			if (p.src == q || p.src < 0) {
				wanted = true;
				break;
			}
		if (!wanted)
			continue;
		if (!rd.hdr.defined())
			rd.hdr = at::zeros({(int64_t)kHeaderLen}, at::TensorOptions().dtype(at::kLong));
		if (ring_irecv(comm, rd.hdr.data_ptr(), RING_INT64, 1, kHeaderShape, q, &rd.req)) {
			rd.req = nullptr;
			rd.err = ring_last_error(comm);
			rd.retry = now + std::chrono::milliseconds(100);
			fail_waiting_for(match, q, "ring: recv: " + rd.err, fails);
			continue;
		}
		moved = true;
	}
	return moved;
}

/* After ring_close: every request here is done (failed by the close). */
void
Engine::p2p_free()
{
	for (P2P::Pending &p : match.pending) {
		p.w->set_pending(false);
		p.w->fail("ring: recv: the group was closed");
	}
	match.pending.clear();
	for (P2P::Reader &rd : match.readers) {
		ring_request_free(rd.req);
		rd.req = nullptr;
	}
	for (P2P::Arrived &a : match.arrived)
		ring_request_free(a.payload);
	match.arrived.clear();
}

}  // namespace ringd_torch
