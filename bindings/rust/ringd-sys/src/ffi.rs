// ring.h and ring_types.h, declaration by declaration, in the header's order.
// build.rs reads this file: keep one item per `pub fn`, `pub const` or `pub type`
// (a declaration may span lines) and spell the C types with the names below.
use std::os::raw::{c_char, c_int, c_uint, c_void};

/// `enum ring_dtype`: all its values are non-negative, so C gives it the type
/// `unsigned int` (build.rs checks that the header agrees).
pub type ring_dtype = c_uint;
pub const RING_BOOL: ring_dtype = 0;
pub const RING_INT8: ring_dtype = 1;
pub const RING_UINT8: ring_dtype = 2;
pub const RING_INT16: ring_dtype = 3;
pub const RING_UINT16: ring_dtype = 4;
pub const RING_INT32: ring_dtype = 5;
pub const RING_UINT32: ring_dtype = 6;
pub const RING_INT64: ring_dtype = 7;
pub const RING_UINT64: ring_dtype = 8;
pub const RING_FLOAT16: ring_dtype = 9;
pub const RING_BFLOAT16: ring_dtype = 10;
pub const RING_FLOAT32: ring_dtype = 11;
pub const RING_FLOAT64: ring_dtype = 12;
pub const RING_DTYPE_COUNT: ring_dtype = 13;

/// `enum ring_op`.
pub type ring_op = c_uint;
pub const RING_SUM: ring_op = 0;
pub const RING_PROD: ring_op = 1;
pub const RING_MAX: ring_op = 2;
pub const RING_MIN: ring_op = 3;
pub const RING_AVG: ring_op = 4;
pub const RING_OP_COUNT: ring_op = 5;

/// `enum ring_err`: it has negative values, so its C type is `int`.
pub type ring_err = c_int;
pub const RING_OK: ring_err = 0;
pub const RING_EINVAL: ring_err = -1;
pub const RING_ENOMEM: ring_err = -2;
pub const RING_EDAEMON: ring_err = -3;
pub const RING_EPEER: ring_err = -4;
pub const RING_ETIMEDOUT: ring_err = -5;
pub const RING_EMISMATCH: ring_err = -6;
pub const RING_EABORTED: ring_err = -7;
pub const RING_EPROTO: ring_err = -8;
pub const RING_EPERM: ring_err = -9;
pub const RING_ENOTSUP: ring_err = -10;
pub const RING_ECLOSED: ring_err = -11;
pub const RING_EDEVICE: ring_err = -12;
pub const RING_ERR_MIN: ring_err = -12;

pub const RING_MAX_NDIM: c_int = 8;
pub const RING_VERSION_MAJOR: c_int = 0;
pub const RING_VERSION_MINOR: c_int = 3;
/// `RING_DEFAULT_SOCKET`, NUL-terminated.
pub const RING_DEFAULT_SOCKET: &[u8] = b"/run/ringd/ringd.sock\0";

/// `ring_comm`: opaque.
#[repr(C)]
pub struct ring_comm {
    _opaque: [u8; 0],
}

/// `ring_request`: opaque, one operation in flight.
#[repr(C)]
pub struct ring_request {
    _opaque: [u8; 0],
}

/// `struct ring_options`: zeroed fields come from the environment, then the
/// defaults (`Default` gives the all-zero value).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ring_options {
    pub socket: *const c_char,
    pub job: *const c_char,
    pub local_rank: c_int,
    pub local_size: c_int,
    pub timeout_ms: c_int,
    pub arena_bytes: usize,
    /// Global rank and world size as a framework numbers them (size 0: from
    /// the launcher's variables; given, local_rank/local_size are needed too).
    pub rank: c_int,
    pub size: c_int,
}

impl Default for ring_options {
    fn default() -> Self {
        ring_options {
            socket: std::ptr::null(),
            job: std::ptr::null(),
            local_rank: 0,
            local_size: 0,
            timeout_ms: 0,
            arena_bytes: 0,
            rank: 0,
            size: 0,
        }
    }
}

extern "C" {
    pub fn ring_open(comm: *mut *mut ring_comm, opts: *const ring_options) -> c_int;
    pub fn ring_close(comm: *mut ring_comm) -> c_int;
    pub fn ring_rank(comm: *const ring_comm) -> c_int;
    pub fn ring_size(comm: *const ring_comm) -> c_int;
    pub fn ring_local_rank(comm: *const ring_comm) -> c_int;
    pub fn ring_local_size(comm: *const ring_comm) -> c_int;
    pub fn ring_host_rank(comm: *const ring_comm) -> c_int;
    pub fn ring_host_count(comm: *const ring_comm) -> c_int;
    pub fn ring_alloc(comm: *mut ring_comm, bytes: usize) -> *mut c_void;
    pub fn ring_free(comm: *mut ring_comm, p: *mut c_void);

    pub fn ring_allreduce(
        comm: *mut ring_comm,
        send: *const c_void,
        recv: *mut c_void,
        count: usize,
        dtype: ring_dtype,
        op: ring_op,
    ) -> c_int;
    pub fn ring_allgather(
        comm: *mut ring_comm,
        send: *const c_void,
        recv: *mut c_void,
        count: usize,
        dtype: ring_dtype,
    ) -> c_int;
    pub fn ring_reduce_scatter(
        comm: *mut ring_comm,
        send: *const c_void,
        recv: *mut c_void,
        recvcount: usize,
        dtype: ring_dtype,
        op: ring_op,
    ) -> c_int;
    pub fn ring_broadcast(
        comm: *mut ring_comm,
        buf: *mut c_void,
        count: usize,
        dtype: ring_dtype,
        root: c_int,
    ) -> c_int;
    pub fn ring_barrier(comm: *mut ring_comm) -> c_int;
    pub fn ring_send(
        comm: *mut ring_comm,
        buf: *const c_void,
        dtype: ring_dtype,
        ndim: c_int,
        shape: *const usize,
        dst: c_int,
    ) -> c_int;
    pub fn ring_recv(
        comm: *mut ring_comm,
        buf: *mut c_void,
        dtype: ring_dtype,
        ndim: c_int,
        shape: *const usize,
        src: c_int,
    ) -> c_int;

    pub fn ring_iallreduce(
        comm: *mut ring_comm,
        send: *const c_void,
        recv: *mut c_void,
        count: usize,
        dtype: ring_dtype,
        op: ring_op,
        req: *mut *mut ring_request,
    ) -> c_int;
    pub fn ring_iallgather(
        comm: *mut ring_comm,
        send: *const c_void,
        recv: *mut c_void,
        count: usize,
        dtype: ring_dtype,
        req: *mut *mut ring_request,
    ) -> c_int;
    pub fn ring_ireduce_scatter(
        comm: *mut ring_comm,
        send: *const c_void,
        recv: *mut c_void,
        recvcount: usize,
        dtype: ring_dtype,
        op: ring_op,
        req: *mut *mut ring_request,
    ) -> c_int;
    pub fn ring_ibroadcast(
        comm: *mut ring_comm,
        buf: *mut c_void,
        count: usize,
        dtype: ring_dtype,
        root: c_int,
        req: *mut *mut ring_request,
    ) -> c_int;
    pub fn ring_ibarrier(comm: *mut ring_comm, req: *mut *mut ring_request) -> c_int;
    pub fn ring_isend(
        comm: *mut ring_comm,
        buf: *const c_void,
        dtype: ring_dtype,
        ndim: c_int,
        shape: *const usize,
        dst: c_int,
        req: *mut *mut ring_request,
    ) -> c_int;
    pub fn ring_irecv(
        comm: *mut ring_comm,
        buf: *mut c_void,
        dtype: ring_dtype,
        ndim: c_int,
        shape: *const usize,
        src: c_int,
        req: *mut *mut ring_request,
    ) -> c_int;

    // The rest of the collective set (ring.h 0.3), blocking, then non-blocking.
    pub fn ring_reduce(
        comm: *mut ring_comm,
        send: *const c_void,
        recv: *mut c_void,
        count: usize,
        dtype: ring_dtype,
        op: ring_op,
        root: c_int,
    ) -> c_int;
    pub fn ring_gather(
        comm: *mut ring_comm,
        send: *const c_void,
        recv: *mut c_void,
        count: usize,
        dtype: ring_dtype,
        root: c_int,
    ) -> c_int;
    pub fn ring_scatter(
        comm: *mut ring_comm,
        send: *const c_void,
        recv: *mut c_void,
        count: usize,
        dtype: ring_dtype,
        root: c_int,
    ) -> c_int;
    pub fn ring_allgatherv(
        comm: *mut ring_comm,
        send: *const c_void,
        sendcount: usize,
        recv: *mut c_void,
        recvcounts: *const usize,
        displs: *const usize,
        dtype: ring_dtype,
    ) -> c_int;
    pub fn ring_alltoall(
        comm: *mut ring_comm,
        send: *const c_void,
        recv: *mut c_void,
        count: usize,
        dtype: ring_dtype,
    ) -> c_int;
    pub fn ring_alltoallv(
        comm: *mut ring_comm,
        send: *const c_void,
        sendcounts: *const usize,
        sdispls: *const usize,
        recv: *mut c_void,
        recvcounts: *const usize,
        rdispls: *const usize,
        dtype: ring_dtype,
    ) -> c_int;
    pub fn ring_sendrecv(
        comm: *mut ring_comm,
        sendbuf: *const c_void,
        sendcount: usize,
        dst: c_int,
        recvbuf: *mut c_void,
        recvcount: usize,
        src: c_int,
        dtype: ring_dtype,
    ) -> c_int;
    pub fn ring_ireduce(
        comm: *mut ring_comm,
        send: *const c_void,
        recv: *mut c_void,
        count: usize,
        dtype: ring_dtype,
        op: ring_op,
        root: c_int,
        req: *mut *mut ring_request,
    ) -> c_int;
    pub fn ring_igather(
        comm: *mut ring_comm,
        send: *const c_void,
        recv: *mut c_void,
        count: usize,
        dtype: ring_dtype,
        root: c_int,
        req: *mut *mut ring_request,
    ) -> c_int;
    pub fn ring_iscatter(
        comm: *mut ring_comm,
        send: *const c_void,
        recv: *mut c_void,
        count: usize,
        dtype: ring_dtype,
        root: c_int,
        req: *mut *mut ring_request,
    ) -> c_int;
    pub fn ring_iallgatherv(
        comm: *mut ring_comm,
        send: *const c_void,
        sendcount: usize,
        recv: *mut c_void,
        recvcounts: *const usize,
        displs: *const usize,
        dtype: ring_dtype,
        req: *mut *mut ring_request,
    ) -> c_int;
    pub fn ring_ialltoall(
        comm: *mut ring_comm,
        send: *const c_void,
        recv: *mut c_void,
        count: usize,
        dtype: ring_dtype,
        req: *mut *mut ring_request,
    ) -> c_int;
    pub fn ring_ialltoallv(
        comm: *mut ring_comm,
        send: *const c_void,
        sendcounts: *const usize,
        sdispls: *const usize,
        recv: *mut c_void,
        recvcounts: *const usize,
        rdispls: *const usize,
        dtype: ring_dtype,
        req: *mut *mut ring_request,
    ) -> c_int;
    pub fn ring_isendrecv(
        comm: *mut ring_comm,
        sendbuf: *const c_void,
        sendcount: usize,
        dst: c_int,
        recvbuf: *mut c_void,
        recvcount: usize,
        src: c_int,
        dtype: ring_dtype,
        req: *mut *mut ring_request,
    ) -> c_int;

    pub fn ring_wait(req: *mut ring_request) -> c_int;
    pub fn ring_test(req: *mut ring_request, done: *mut c_int) -> c_int;
    pub fn ring_wait_all(n: c_int, reqs: *mut *mut ring_request) -> c_int;
    pub fn ring_request_free(req: *mut ring_request);
    pub fn ring_request_error(req: *const ring_request) -> *const c_char;

    pub fn ring_group_start(comm: *mut ring_comm) -> c_int;
    pub fn ring_group_end(comm: *mut ring_comm) -> c_int;

    pub fn ring_split(comm: *mut ring_comm, color: c_int, key: c_int, out: *mut *mut ring_comm)
        -> c_int;

    pub fn ring_strerror(err: c_int) -> *const c_char;
    pub fn ring_last_error(comm: *const ring_comm) -> *const c_char;

    pub fn ring_dtype_size(dtype: ring_dtype) -> usize;
    pub fn ring_dtype_name(dtype: ring_dtype) -> *const c_char;
    pub fn ring_op_name(op: ring_op) -> *const c_char;
}
