// ring.h's CUDA entry points: only a libring built with CUDA has them
// (checked::LIBRING_HAS_CUDA, from libring.pc's `cuda` variable); build.rs
// reads this file like ffi.rs.  The buffers are device pointers.
use super::{ring_comm, ring_dtype, ring_op};
use std::os::raw::{c_int, c_void};

/// `struct CUstream_st` (a `cudaStream_t` points to one); null is the legacy
/// default stream.
#[repr(C)]
pub struct CUstream_st {
    _opaque: [u8; 0],
}

extern "C" {
    pub fn ring_allreduce_cuda(
        comm: *mut ring_comm,
        send: *const c_void,
        recv: *mut c_void,
        count: usize,
        dtype: ring_dtype,
        op: ring_op,
        stream: *mut CUstream_st,
    ) -> c_int;
    pub fn ring_allgather_cuda(
        comm: *mut ring_comm,
        send: *const c_void,
        recv: *mut c_void,
        count: usize,
        dtype: ring_dtype,
        stream: *mut CUstream_st,
    ) -> c_int;
    pub fn ring_reduce_scatter_cuda(
        comm: *mut ring_comm,
        send: *const c_void,
        recv: *mut c_void,
        recvcount: usize,
        dtype: ring_dtype,
        op: ring_op,
        stream: *mut CUstream_st,
    ) -> c_int;
    pub fn ring_broadcast_cuda(
        comm: *mut ring_comm,
        buf: *mut c_void,
        count: usize,
        dtype: ring_dtype,
        root: c_int,
        stream: *mut CUstream_st,
    ) -> c_int;
    pub fn ring_send_cuda(
        comm: *mut ring_comm,
        buf: *const c_void,
        dtype: ring_dtype,
        ndim: c_int,
        shape: *const usize,
        dst: c_int,
        stream: *mut CUstream_st,
    ) -> c_int;
    pub fn ring_recv_cuda(
        comm: *mut ring_comm,
        buf: *mut c_void,
        dtype: ring_dtype,
        ndim: c_int,
        shape: *const usize,
        src: c_int,
        stream: *mut CUstream_st,
    ) -> c_int;
    pub fn ring_reduce_cuda(
        comm: *mut ring_comm,
        send: *const c_void,
        recv: *mut c_void,
        count: usize,
        dtype: ring_dtype,
        op: ring_op,
        root: c_int,
        stream: *mut CUstream_st,
    ) -> c_int;
    pub fn ring_gather_cuda(
        comm: *mut ring_comm,
        send: *const c_void,
        recv: *mut c_void,
        count: usize,
        dtype: ring_dtype,
        root: c_int,
        stream: *mut CUstream_st,
    ) -> c_int;
    pub fn ring_scatter_cuda(
        comm: *mut ring_comm,
        send: *const c_void,
        recv: *mut c_void,
        count: usize,
        dtype: ring_dtype,
        root: c_int,
        stream: *mut CUstream_st,
    ) -> c_int;
    pub fn ring_allgatherv_cuda(
        comm: *mut ring_comm,
        send: *const c_void,
        sendcount: usize,
        recv: *mut c_void,
        recvcounts: *const usize,
        displs: *const usize,
        dtype: ring_dtype,
        stream: *mut CUstream_st,
    ) -> c_int;
    pub fn ring_alltoall_cuda(
        comm: *mut ring_comm,
        send: *const c_void,
        recv: *mut c_void,
        count: usize,
        dtype: ring_dtype,
        stream: *mut CUstream_st,
    ) -> c_int;
    pub fn ring_alltoallv_cuda(
        comm: *mut ring_comm,
        send: *const c_void,
        sendcounts: *const usize,
        sdispls: *const usize,
        recv: *mut c_void,
        recvcounts: *const usize,
        rdispls: *const usize,
        dtype: ring_dtype,
        stream: *mut CUstream_st,
    ) -> c_int;
    pub fn ring_sendrecv_cuda(
        comm: *mut ring_comm,
        sendbuf: *const c_void,
        sendcount: usize,
        dst: c_int,
        recvbuf: *mut c_void,
        recvcount: usize,
        src: c_int,
        dtype: ring_dtype,
        stream: *mut CUstream_st,
    ) -> c_int;
}
