/*
 * ring_module.cpp - ringd._torch, the Python face of the backend: the
 * ProcessGroupRing class, registered as a subclass of torch's ProcessGroup on
 * torch 1.13 and of its Backend on torch 2.x (so torch.distributed takes it
 * wherever it takes gloo's), built by ringd.torch's creator with (store,
 * rank, size, timeout).  This extension is
 * compiled with the pybind11 ABI torch was built with (torch.mk passes
 * torch's own PYBIND11_* values), else torch's Store and ProcessGroup types
 * would not be recognised here.
 */
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "bindings/torch/ring_pg.hpp"

namespace py = pybind11;
using ringd_torch::ProcessGroupRing;

PYBIND11_MODULE(_torch, m)
{
	m.doc() = "torch.distributed's \"ring\" backend on ringd (see ringd.torch)";
	/* The base classes must be registered before ours derives from them. */
	py::module::import("torch.distributed");
	/* Futures' callbacks run on threads of the backend's own (ring_pg.cpp):
	 * one still running when the interpreter finalizes is ended where it
	 * waits for the GIL, and std::terminate aborts the process.  At exit,
	 * atexit's handlers still run before that: let them finish (5 s). */
	py::module::import("atexit").attr("register")(py::cpp_function([] {
		py::gil_scoped_release nogil;
		ringd_torch::drain_completions(std::chrono::seconds(5));
	}));

	m.attr("TORCH_API") = RINGD_TORCH2 ? "backend" : "process_group";
	m.def("in_arena", &ringd_torch::in_arena, py::arg("tensor"),
	      "Whether the tensor's memory lies in a ring group's shared arena (its "
	      "all-reduces need no staging copy).");
	m.def("arena_tensor_bytes", &ringd_torch::arena_tensor_bytes,
	      "Bytes of tensors made in ring groups' arenas that are alive now.");
	py::class_<ProcessGroupRing, ringd_torch::GroupBase, c10::intrusive_ptr<ProcessGroupRing>>(
		m, "ProcessGroupRing",
		"A torch.distributed process group whose operations run on ringd.")
		.def(py::init([](const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
				 std::chrono::milliseconds timeout) {
			     return c10::make_intrusive<ProcessGroupRing>(store, rank, size, timeout);
		     }),
		     py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
		     py::call_guard<py::gil_scoped_release>())
		.def_property_readonly("job", [](const ProcessGroupRing &pg) {
			return pg.placement().job;
		}, "The ringd job this group runs as (ringctl jobs shows it).")
		.def_property_readonly("local_rank", [](const ProcessGroupRing &pg) {
			return ring_local_rank(pg.comm());
		})
		.def_property_readonly("local_size", [](const ProcessGroupRing &pg) {
			return ring_local_size(pg.comm());
		})
		.def_property_readonly("host_rank", [](const ProcessGroupRing &pg) {
			return ring_host_rank(pg.comm());
		})
		.def_property_readonly("host_count", [](const ProcessGroupRing &pg) {
			return ring_host_count(pg.comm());
		})
		.def_property_readonly("arena_bytes", &ProcessGroupRing::arena_bytes,
				       "Bytes of the group's own buffers placed in libring's "
				       "arena so far (zero-copy; see RING_TORCH_ZEROCOPY).")
		.def_property_readonly("placement_source", [](const ProcessGroupRing &pg) {
			return pg.placement().source;
		}, "Where the local rank and size came from (a launcher, or the store).")
		.def("abort_group", [](ProcessGroupRing &pg) { pg.abort_all("abort_group()"); },
		     "Fails every operation in flight now, on every rank (the job is "
		     "revoked), and refuses new ones.",
		     py::call_guard<py::gil_scoped_release>())
		.def("abort", [](ProcessGroupRing &pg) { pg.abort_all("abort()"); },
		     "As abort_group(): ProcessGroupNCCL's name.",
		     py::call_guard<py::gil_scoped_release>())
		.def("shutdown", [](ProcessGroupRing &pg) { pg.shutdown(); },
		     "abort(), then close(): ends pending work at once and leaves the job "
		     "(destroy_process_group then re-init, as torchrun's restarts do).",
		     py::call_guard<py::gil_scoped_release>())
		.def("close", [](ProcessGroupRing &pg) { pg.close(); },
		     "Waits for the operations in flight, then leaves the job.",
		     py::call_guard<py::gil_scoped_release>())
		.def("start_coalescing", &ProcessGroupRing::start_coalescing,
		     py::call_guard<py::gil_scoped_release>())
		.def("end_coalescing", &ProcessGroupRing::end_coalescing,
		     py::call_guard<py::gil_scoped_release>())
		.def("state_sync", &ProcessGroupRing::state_sync, py::arg("tensors"),
		     "ring_state_sync over the group: the tensors (CPU, contiguous) made "
		     "bit-identical on every rank; returns the source table (size entries "
		     "a tensor: the rank each got it from, -1 where it held the agreed "
		     "bytes).  ringd.torch.sync_state wraps it.",
		     py::call_guard<py::gil_scoped_release>())
		.def_property_readonly("aborted", &ProcessGroupRing::aborted);
}
