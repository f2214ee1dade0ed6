//! The MLX-style interface: a [`Communicator`] trait over byte buffers and a
//! dtype (what an array framework's distributed backend implements), ringd's
//! implementation [`RingCommunicator`], a size-1 [`SingleCommunicator`] that
//! needs no daemon, and [`Group`], the typed handle that programs use
//! (`all_sum`, `all_gather`, `send`, `recv`, `split`, as `mx.distributed`).
//!
//! Semantics follow MLX: bool reduces as sum = OR, max = OR, min = AND (libring's
//! bool kernels are exactly these, any non-zero byte being true); a size-1
//! group makes every collective the identity; `send`/`recv` carry the dtype and
//! the shape, and a receiver that expects others gets
//! [`ErrorCode::Mismatch`](crate::ErrorCode::Mismatch) naming both while the
//! link stays aligned for the next message.
use crate::dtype::{settle, Dtype, Element};
use crate::error::{Error, Result};
use crate::{Options, ReduceOp as RingOp};
use std::sync::Arc;

/// The reductions of MLX's `all_sum`, `all_max`, `all_min`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    Sum,
    Max,
    Min,
}

impl From<ReduceOp> for RingOp {
    fn from(op: ReduceOp) -> RingOp {
        match op {
            ReduceOp::Sum => RingOp::Sum,
            ReduceOp::Max => RingOp::Max,
            ReduceOp::Min => RingOp::Min,
        }
    }
}

/// A distributed backend as an array framework sees it: buffers are bytes, a
/// reduction also gets their dtype.
pub trait Communicator: Send + Sync {
    /// This process's rank in the group.
    fn rank(&self) -> usize;
    /// The number of ranks.
    fn size(&self) -> usize;
    /// Reduces `data` (elements of `dtype`) over every rank, in place.
    fn all_reduce(&self, op: ReduceOp, dtype: Dtype, data: &mut [u8]) -> Result<()>;
    /// `output` gets every rank's `input`, in rank order.
    fn all_gather(&self, input: &[u8], output: &mut [u8]) -> Result<()>;
    /// Sends bytes to `dst` (the receiver must post the same length).
    fn send(&self, dst: usize, data: &[u8]) -> Result<()>;
    /// Receives bytes from `src`.
    fn recv(&self, src: usize, data: &mut [u8]) -> Result<()>;
    /// Sends an array of `dtype` and `shape`; the header carries both.
    fn send_typed(&self, dst: usize, dtype: Dtype, shape: &[usize], data: &[u8]) -> Result<()>;
    /// Receives an array that must have `dtype` and `shape` (else `Mismatch`).
    fn recv_typed(&self, src: usize, dtype: Dtype, shape: &[usize], data: &mut [u8]) -> Result<()>;
    /// A new group of the ranks that pass the same `color >= 0`, ordered by
    /// `key` (then rank); `None` for a negative color.  Every rank calls it.
    fn split(&self, color: i32, key: i32) -> Result<Option<Box<dyn Communicator>>>;
}

/// Bytes of `dtype` elements: the count, or an error naming the call.
fn count_of(what: &str, dtype: Dtype, bytes: usize) -> Result<usize> {
    if bytes % dtype.size() != 0 {
        return Err(Error::invalid(format!(
            "{}: {} bytes is not a whole number of {} elements",
            what,
            bytes,
            dtype.name()
        )));
    }
    Ok(bytes / dtype.size())
}

/// ringd's implementation: a [`crate::Communicator`].
#[derive(Debug)]
pub struct RingCommunicator {
    comm: crate::Communicator,
}

impl RingCommunicator {
    /// Wraps an open communicator.
    pub fn new(comm: crate::Communicator) -> RingCommunicator {
        RingCommunicator { comm }
    }

    /// Opens one with `opts`.
    pub fn open(opts: &Options) -> Result<RingCommunicator> {
        crate::Communicator::open(opts).map(RingCommunicator::new)
    }

    /// The underlying communicator, for the typed and non-blocking API.
    pub fn inner(&self) -> &crate::Communicator {
        &self.comm
    }

    /// Runs a raw byte-level call with a C int peer and dtype.
    fn p2p(
        &self,
        what: &str,
        dtype: Dtype,
        shape: &[usize],
        len: usize,
        peer: usize,
    ) -> Result<(std::os::raw::c_int, std::os::raw::c_int)> {
        let count = count_of(what, dtype, len)?;
        self.comm.p2p_args(what, count, shape, peer)
    }
}

impl Communicator for RingCommunicator {
    fn rank(&self) -> usize {
        self.comm.rank()
    }

    fn size(&self) -> usize {
        self.comm.size()
    }

    fn all_reduce(&self, op: ReduceOp, dtype: Dtype, data: &mut [u8]) -> Result<()> {
        let count = count_of("all_reduce", dtype, data.len())?;
        let p = data.as_mut_ptr().cast();
        let op = RingOp::from(op).raw();
        // SAFETY: data holds count elements of dtype; in place (send == recv).
        let rc =
            unsafe { crate::sys::ring_allreduce(self.comm.as_raw(), p, p, count, dtype.raw(), op) };
        self.comm.check(rc)
    }

    fn all_gather(&self, input: &[u8], output: &mut [u8]) -> Result<()> {
        self.comm.allgather(input, output)
    }

    fn send(&self, dst: usize, data: &[u8]) -> Result<()> {
        self.comm.send(data, &[data.len()], dst)
    }

    fn recv(&self, src: usize, data: &mut [u8]) -> Result<()> {
        let len = data.len();
        self.comm.recv(data, &[len], src)
    }

    fn send_typed(&self, dst: usize, dtype: Dtype, shape: &[usize], data: &[u8]) -> Result<()> {
        let (ndim, dst) = self.p2p("send", dtype, shape, data.len(), dst)?;
        // SAFETY: data holds the shape's elements of dtype; libring copies shape.
        let rc = unsafe {
            crate::sys::ring_send(
                self.comm.as_raw(),
                data.as_ptr().cast(),
                dtype.raw(),
                ndim,
                shape.as_ptr(),
                dst,
            )
        };
        self.comm.check(rc)
    }

    fn recv_typed(&self, src: usize, dtype: Dtype, shape: &[usize], data: &mut [u8]) -> Result<()> {
        let (ndim, src) = self.p2p("recv", dtype, shape, data.len(), src)?;
        // SAFETY: as send_typed; data is bytes, any value is valid.
        let rc = unsafe {
            crate::sys::ring_recv(
                self.comm.as_raw(),
                data.as_mut_ptr().cast(),
                dtype.raw(),
                ndim,
                shape.as_ptr(),
                src,
            )
        };
        self.comm.check(rc)
    }

    fn split(&self, color: i32, key: i32) -> Result<Option<Box<dyn Communicator>>> {
        let sub = self.comm.split(color, key)?;
        Ok(sub.map(|c| Box::new(RingCommunicator::new(c)) as Box<dyn Communicator>))
    }
}

/// The size-1 group: no daemon, every collective the identity, no peer to
/// send to.  What [`Group::single`] holds.
#[derive(Debug, Default, Clone, Copy)]
pub struct SingleCommunicator;

fn no_peer(what: &str) -> Error {
    Error::invalid(format!("{}: a size-1 group has no peer", what))
}

impl Communicator for SingleCommunicator {
    fn rank(&self) -> usize {
        0
    }

    fn size(&self) -> usize {
        1
    }

    fn all_reduce(&self, _op: ReduceOp, dtype: Dtype, data: &mut [u8]) -> Result<()> {
        count_of("all_reduce", dtype, data.len()).map(|_| ())
    }

    fn all_gather(&self, input: &[u8], output: &mut [u8]) -> Result<()> {
        if input.len() != output.len() {
            return Err(Error::invalid(format!(
                "all_gather: output has {} bytes, {} expected (size 1)",
                output.len(),
                input.len()
            )));
        }
        output.copy_from_slice(input);
        Ok(())
    }

    fn send(&self, _dst: usize, _data: &[u8]) -> Result<()> {
        Err(no_peer("send"))
    }

    fn recv(&self, _src: usize, _data: &mut [u8]) -> Result<()> {
        Err(no_peer("recv"))
    }

    fn send_typed(&self, _: usize, _: Dtype, _: &[usize], _: &[u8]) -> Result<()> {
        Err(no_peer("send"))
    }

    fn recv_typed(&self, _: usize, _: Dtype, _: &[usize], _: &mut [u8]) -> Result<()> {
        Err(no_peer("recv"))
    }

    fn split(&self, color: i32, _key: i32) -> Result<Option<Box<dyn Communicator>>> {
        Ok(if color < 0 {
            None
        } else {
            Some(Box::new(SingleCommunicator))
        })
    }
}

/// The bytes of a slice of elements.
fn bytes_of<T: Element>(data: &[T]) -> &[u8] {
    // SAFETY: Element types are plain data without padding.
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast(), std::mem::size_of_val(data)) }
}

/// Runs `f` on the bytes of `data`, then makes them valid values of T again
/// (a [`Communicator`] is safe to implement, so it may write any byte).  The
/// making valid is a guard's `Drop`, so it also runs when `f` panics: safe
/// code that catches the unwind (`catch_unwind`) never sees a bool that is
/// neither false nor true.
fn with_bytes_mut<T: Element, R>(data: &mut [T], f: impl FnOnce(&mut [u8]) -> R) -> R {
    /// Settles the elements when dropped, on return and on unwind alike.
    struct Settled<T: Element> {
        p: *mut T,
        len: usize,
    }
    impl<T: Element> Drop for Settled<T> {
        fn drop(&mut self) {
            // SAFETY: p holds len elements borrowed mutably by with_bytes_mut
            // for the guard's whole life; the byte view is gone when this runs
            // (the guard is declared before it, so it is dropped after it).
            unsafe { settle(self.p, self.len) };
        }
    }
    let bytes = std::mem::size_of_val(data);
    let guard = Settled {
        p: data.as_mut_ptr(),
        len: data.len(),
    };
    // SAFETY: Element types are plain data; the byte view ends before the
    // guard settles the elements, and nothing else touches them meanwhile.
    let view = unsafe { std::slice::from_raw_parts_mut(guard.p.cast::<u8>(), bytes) };
    let out = f(view);
    drop(guard);
    out
}

/// A group of ranks, as `mx.distributed.Group`: cheap to clone, typed.
#[derive(Clone)]
pub struct Group {
    comm: Arc<dyn Communicator>,
}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Group(rank {} of {})", self.rank(), self.size())
    }
}

impl Default for Group {
    fn default() -> Group {
        Group::single()
    }
}

impl Group {
    /// The size-1 group: works with no daemon and no environment.
    pub fn single() -> Group {
        Group::new(SingleCommunicator)
    }

    /// A group over any implementation of the trait.
    pub fn new(comm: impl Communicator + 'static) -> Group {
        Group {
            comm: Arc::new(comm),
        }
    }

    /// The world group from the environment (RING_SOCKET, RING_JOB, the
    /// launcher's variables), as `mx.distributed.init()`.  libring decides,
    /// as MLX does, whether a run with no daemon and no launcher is a size-1
    /// group (RING_SINGLE=1 asks for one, RING_STRICT=1 refuses).
    pub fn init() -> Result<Group> {
        crate::Communicator::from_env().map(|c| Group::new(RingCommunicator::new(c)))
    }

    /// The implementation behind the group.
    pub fn comm(&self) -> &dyn Communicator {
        &*self.comm
    }

    pub fn rank(&self) -> usize {
        self.comm.rank()
    }

    pub fn size(&self) -> usize {
        self.comm.size()
    }

    /// Sum over every rank, in place (bool: OR).
    pub fn all_sum<T: Element>(&self, data: &mut [T]) -> Result<()> {
        self.all_reduce(ReduceOp::Sum, data)
    }

    /// Maximum over every rank, in place (bool: OR).
    pub fn all_max<T: Element>(&self, data: &mut [T]) -> Result<()> {
        self.all_reduce(ReduceOp::Max, data)
    }

    /// Minimum over every rank, in place (bool: AND).
    pub fn all_min<T: Element>(&self, data: &mut [T]) -> Result<()> {
        self.all_reduce(ReduceOp::Min, data)
    }

    fn all_reduce<T: Element>(&self, op: ReduceOp, data: &mut [T]) -> Result<()> {
        with_bytes_mut(data, |b| self.comm.all_reduce(op, T::DTYPE, b))
    }

    /// `output` gets every rank's `input` in rank order.
    pub fn all_gather<T: Element>(&self, input: &[T], output: &mut [T]) -> Result<()> {
        with_bytes_mut(output, |b| self.comm.all_gather(bytes_of(input), b))
    }

    /// Sends an array of `shape` to `dst`; the message carries dtype and shape.
    pub fn send<T: Element>(&self, data: &[T], shape: &[usize], dst: usize) -> Result<()> {
        self.comm.send_typed(dst, T::DTYPE, shape, bytes_of(data))
    }

    /// Receives an array of `shape` from `src`; another dtype or shape from the
    /// sender is [`ErrorCode::Mismatch`](crate::ErrorCode::Mismatch).
    pub fn recv<T: Element>(&self, data: &mut [T], shape: &[usize], src: usize) -> Result<()> {
        with_bytes_mut(data, |b| self.comm.recv_typed(src, T::DTYPE, shape, b))
    }

    /// Splits the group (every rank calls it): ranks with the same `color >= 0`
    /// form a new group ordered by `key`, or by rank when `key` is negative
    /// (MLX's default of -1).  `None` for a negative color.
    pub fn split(&self, color: i32, key: i32) -> Result<Option<Group>> {
        let key = if key < 0 { self.rank() as i32 } else { key };
        let sub = self.comm.split(color, key)?;
        Ok(sub.map(|c| Group { comm: Arc::from(c) }))
    }
}
