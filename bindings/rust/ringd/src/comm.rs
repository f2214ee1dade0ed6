//! The communicator: opening (options or the environment), the place of this
//! process in the job, and the blocking collectives and point-to-point calls
//! over slices of any [`Element`].
use crate::dtype::{settle, Element, ReduceOp, Wire};
use crate::error::{check, Error, ErrorCode, Result};
use ringd_sys as sys;
use std::ffi::CString;
use std::os::raw::{c_int, c_void};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr::{self, NonNull};

/// How to open a communicator; what is left unset comes from the environment
/// (RING_SOCKET, RING_JOB, the launcher's RANK / LOCAL_RANK ..., RING_TIMEOUT_MS,
/// RING_ARENA_MB), then libring's defaults.  libring reads the environment in
/// `ring_open`, so prefer these fields to changing the environment of a running
/// (multi-threaded) program.
#[derive(Debug, Clone, Default)]
pub struct Options {
    socket: Option<Vec<u8>>,
    job: Option<String>,
    local: Option<(usize, usize)>,
    timeout_ms: Option<u32>,
    arena_bytes: Option<usize>,
    wire: Option<Wire>,
    join: bool,
}

impl Options {
    /// All unset: everything from the environment.
    pub fn new() -> Options {
        Options::default()
    }

    /// The daemon's client socket (RING_SOCKET).
    pub fn socket(mut self, path: impl AsRef<Path>) -> Options {
        self.socket = Some(path.as_ref().as_os_str().as_bytes().to_vec());
        self
    }

    /// The job name, the same on every rank (RING_JOB).
    pub fn job(mut self, name: impl Into<String>) -> Options {
        self.job = Some(name.into());
        self
    }

    /// This process's index among the job's processes on its host, and their
    /// number (RING_LOCAL_RANK / RING_LOCAL_SIZE).
    pub fn local(mut self, local_rank: usize, local_size: usize) -> Options {
        self.local = Some((local_rank, local_size));
        self
    }

    /// The bound of every operation, in milliseconds (RING_TIMEOUT_MS).
    pub fn timeout_ms(mut self, ms: u32) -> Options {
        self.timeout_ms = Some(ms);
        self
    }

    /// The shared arena's size in bytes (RING_ARENA_MB).
    pub fn arena_bytes(mut self, bytes: usize) -> Options {
        self.arena_bytes = Some(bytes);
        self
    }

    /// The wire format of the job's float32 sums and averages (RING_WIRE);
    /// every rank must give the same.  The `_wire` calls override it.
    pub fn wire(mut self, wire: Wire) -> Options {
        self.wire = Some(wire);
        self
    }

    /// A newcomer (RING_JOIN=1): `open` waits until the running job `job`
    /// admits it with [`Communicator::grow`], and returns its place in the
    /// grown job.
    pub fn join(mut self, join: bool) -> Options {
        self.join = join;
        self
    }
}

/// Converts a count or rank for a C `int` argument.
pub(crate) fn c_int_of(what: &str, v: usize) -> Result<c_int> {
    c_int::try_from(v).map_err(|_| Error::invalid(format!("{} {} does not fit a C int", what, v)))
}

fn cstring(what: &str, bytes: Vec<u8>) -> Result<CString> {
    CString::new(bytes).map_err(|_| Error::invalid(format!("{} contains a NUL byte", what)))
}

/// One rank's handle on a job: a `ring_comm`.  Closed on drop.
///
/// `Communicator` is `Send + Sync`: libring serialises the calls on one
/// communicator with a mutex of its own (released while a call waits, so one
/// thread may issue while another waits), and a request may be waited for from
/// any thread.  The two calls that must not race with others are
/// `ring_close`, which runs only in `Drop`/[`close`](Self::close) when no
/// borrow of the communicator is left, and `ring_request_free`, which runs only
/// when a [`Request`](crate::Request) is consumed or dropped by its one owner.
/// Collectives issued from several threads at once run in whatever order the
/// threads reach libring; every rank must issue its collectives in the same
/// order, so a program that does that needs its own ordering between threads.
/// The detail text of a failed blocking call is read from `ring_last_error`,
/// which is per communicator: with several threads failing at once, it may be
/// another thread's (a request's text, from `ring_request_error`, never is).
#[derive(Debug)]
pub struct Communicator {
    raw: NonNull<sys::ring_comm>,
    place: Place,
}

/// The numbers that never change for a communicator, read once at open.
#[derive(Debug, Clone, Copy)]
struct Place {
    rank: usize,
    size: usize,
    local_rank: usize,
    local_size: usize,
    host_rank: usize,
    host_count: usize,
}

// SAFETY: see the type's documentation: libring serialises calls on a
// ring_comm, and the calls that must not race (close) need ownership here.
unsafe impl Send for Communicator {}
unsafe impl Sync for Communicator {}

impl Communicator {
    /// Opens a communicator: joins the job on the local ringd and returns once
    /// every rank has joined (or fails after the operation timeout).
    ///
    /// A process attaches to a job once per local rank: a second open of the
    /// same job and local rank while the first communicator lives fails with
    /// [`ErrorCode::Invalid`](crate::ErrorCode::Invalid).  Share the open one
    /// (it is `Send + Sync`, and the synchroniser's
    /// [`with_communicator`](crate::sync::GradientSynchronizer::with_communicator)
    /// takes it), or [`split`](Self::split) it for a second communicator of
    /// the same ranks.
    pub fn open(opts: &Options) -> Result<Communicator> {
        let socket = opts
            .socket
            .clone()
            .map(|s| cstring("the socket path", s))
            .transpose()?;
        let job = opts
            .job
            .clone()
            .map(|j| cstring("the job name", j.into_bytes()))
            .transpose()?;
        let (local_rank, local_size) = match opts.local {
            Some((r, s)) => (c_int_of("local_rank", r)?, c_int_of("local_size", s)?),
            None => (0, 0),
        };
        let timeout = opts
            .timeout_ms
            .map_or(Ok(0), |t| c_int_of("timeout_ms", t as usize))?;
        let wire = opts
            .wire
            .map(|w| cstring("the wire format", w.name().into()))
            .transpose()?;
        let raw_opts = sys::ring_options {
            socket: socket.as_ref().map_or(ptr::null(), |s| s.as_ptr()),
            job: job.as_ref().map_or(ptr::null(), |j| j.as_ptr()),
            local_rank,
            local_size,
            timeout_ms: timeout,
            arena_bytes: opts.arena_bytes.unwrap_or(0),
            rank: 0,
            size: 0,
            algo: ptr::null(),
            wire: wire.as_ref().map_or(ptr::null(), |w| w.as_ptr()),
            join: c_int::from(opts.join),
        };
        let mut comm = ptr::null_mut();
        // SAFETY: raw_opts' strings outlive the call; comm is written on success.
        let rc = unsafe { sys::ring_open(&mut comm, &raw_opts) };
        check(rc, ptr::null())?;
        let raw = NonNull::new(comm)
            .ok_or_else(|| Error::invalid("ring_open returned success and no communicator"))?;
        // SAFETY: raw is a live communicator we own.
        Ok(unsafe { Communicator::from_raw(raw) })
    }

    /// Opens a communicator from the environment alone (`ring_open(.., NULL)`):
    /// RING_SOCKET, RING_JOB and the launcher's variables.  With no daemon and
    /// `RING_SINGLE=1` this is a size-1 group.
    pub fn from_env() -> Result<Communicator> {
        Communicator::open(&Options::new())
    }

    /// Takes ownership of an open `ring_comm`.
    ///
    /// # Safety
    /// `raw` is an open communicator that nothing else will close or use after
    /// the returned value is dropped.
    pub unsafe fn from_raw(raw: NonNull<sys::ring_comm>) -> Communicator {
        let p = raw.as_ptr();
        let get = |v: c_int| v.max(0) as usize;
        let place = Place {
            rank: get(sys::ring_rank(p)),
            size: get(sys::ring_size(p)),
            local_rank: get(sys::ring_local_rank(p)),
            local_size: get(sys::ring_local_size(p)),
            host_rank: get(sys::ring_host_rank(p)),
            host_count: get(sys::ring_host_count(p)),
        };
        Communicator { raw, place }
    }

    /// The `ring_comm` for calls this crate does not wrap (it stays owned here).
    pub fn as_raw(&self) -> *mut sys::ring_comm {
        self.raw.as_ptr()
    }

    /// Closes the communicator, returning libring's verdict (drop ignores it).
    pub fn close(self) -> Result<()> {
        let raw = self.raw.as_ptr();
        std::mem::forget(self);
        // SAFETY: we owned raw and nothing borrows it (close takes self).
        check(unsafe { sys::ring_close(raw) }, ptr::null())
    }

    /// This process's global rank.
    pub fn rank(&self) -> usize {
        self.place.rank
    }
    /// The number of ranks of the job.
    pub fn size(&self) -> usize {
        self.place.size
    }
    /// This process's index among the job's processes on its host.
    pub fn local_rank(&self) -> usize {
        self.place.local_rank
    }
    /// The number of the job's processes on this host.
    pub fn local_size(&self) -> usize {
        self.place.local_size
    }
    /// This host's place in the ring (among the job's hosts).
    pub fn host_rank(&self) -> usize {
        self.place.host_rank
    }
    /// The number of hosts the job spans.
    pub fn host_count(&self) -> usize {
        self.place.host_count
    }

    /// The failure of the last call, as an Err.
    pub(crate) fn check(&self, rc: c_int) -> Result<()> {
        check(rc, self.raw.as_ptr())
    }

    pub(crate) fn want(&self, what: &str, expect: usize, got: usize, name: &str) -> Result<()> {
        if expect == got {
            return Ok(());
        }
        Err(Error::invalid(format!(
            "{}: {} has {} elements, {} expected (size {})",
            what, name, got, expect, self.place.size
        )))
    }

    /// All-reduce: `recv[i]` = op over every rank's `send[i]`.
    pub fn allreduce<T: Element>(&self, send: &[T], recv: &mut [T], op: ReduceOp) -> Result<()> {
        self.allreduce_raw(send, recv, op.raw())
    }

    /// All-reduce whose data travels in `wire` whatever the job's format:
    /// float32 `Sum` and `Avg` only (else [`ErrorCode::Invalid`]), or
    /// [`Wire::F32`] for any.
    pub fn allreduce_wire<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: ReduceOp,
        wire: Wire,
    ) -> Result<()> {
        self.allreduce_raw(send, recv, op.raw() | wire.bits())
    }

    /// [`allreduce_wire`](Self::allreduce_wire) in place.
    pub fn allreduce_in_place_wire<T: Element>(
        &self,
        buf: &mut [T],
        op: ReduceOp,
        wire: Wire,
    ) -> Result<()> {
        let p = buf.as_mut_ptr().cast::<c_void>();
        // SAFETY: send == recv is libring's in-place form; buf outlives the call.
        let rc = unsafe {
            sys::ring_allreduce(
                self.as_raw(),
                p,
                p,
                buf.len(),
                T::DTYPE.raw(),
                op.raw() | wire.bits(),
            )
        };
        self.check(rc)
    }

    fn allreduce_raw<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: sys::ring_op,
    ) -> Result<()> {
        self.want("allreduce", send.len(), recv.len(), "recv")?;
        // SAFETY: both slices hold count elements of the dtype and outlive the call.
        let rc = unsafe {
            sys::ring_allreduce(
                self.as_raw(),
                send.as_ptr().cast(),
                recv.as_mut_ptr().cast(),
                send.len(),
                T::DTYPE.raw(),
                op,
            )
        };
        self.check(rc)
    }

    /// All-reduce in place.
    pub fn allreduce_in_place<T: Element>(&self, buf: &mut [T], op: ReduceOp) -> Result<()> {
        let p = buf.as_mut_ptr().cast::<c_void>();
        // SAFETY: send == recv is libring's in-place form; buf outlives the call.
        let rc = unsafe {
            sys::ring_allreduce(self.as_raw(), p, p, buf.len(), T::DTYPE.raw(), op.raw())
        };
        self.check(rc)
    }

    /// All-gather: `recv` holds every rank's `send` in rank order
    /// (`size * send.len()` elements).
    pub fn allgather<T: Element>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        self.want("allgather", send.len() * self.size(), recv.len(), "recv")?;
        // SAFETY: recv holds size * count elements; both outlive the call.
        let rc = unsafe {
            sys::ring_allgather(
                self.as_raw(),
                send.as_ptr().cast(),
                recv.as_mut_ptr().cast(),
                send.len(),
                T::DTYPE.raw(),
            )
        };
        self.check(rc)?;
        // SAFETY: recv was written by libring and is ours again.
        unsafe { settle(recv.as_mut_ptr(), recv.len()) };
        Ok(())
    }

    /// Reduce-scatter: rank r's `recv` is op over every rank's block r of `send`
    /// (`send` holds `size * recv.len()` elements).
    pub fn reduce_scatter<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: ReduceOp,
    ) -> Result<()> {
        self.reduce_scatter_raw(send, recv, op.raw())
    }

    /// Reduce-scatter whose data travels in `wire` (as
    /// [`allreduce_wire`](Self::allreduce_wire)).
    pub fn reduce_scatter_wire<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: ReduceOp,
        wire: Wire,
    ) -> Result<()> {
        self.reduce_scatter_raw(send, recv, op.raw() | wire.bits())
    }

    fn reduce_scatter_raw<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: sys::ring_op,
    ) -> Result<()> {
        self.want(
            "reduce_scatter",
            recv.len() * self.size(),
            send.len(),
            "send",
        )?;
        // SAFETY: send holds size * recvcount elements; both outlive the call.
        let rc = unsafe {
            sys::ring_reduce_scatter(
                self.as_raw(),
                send.as_ptr().cast(),
                recv.as_mut_ptr().cast(),
                recv.len(),
                T::DTYPE.raw(),
                op,
            )
        };
        self.check(rc)
    }

    /// Broadcast: every rank's `buf` gets root's.
    pub fn broadcast<T: Element>(&self, buf: &mut [T], root: usize) -> Result<()> {
        let root = c_int_of("root", root)?;
        // SAFETY: buf outlives the call.
        let rc = unsafe {
            sys::ring_broadcast(
                self.as_raw(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                T::DTYPE.raw(),
                root,
            )
        };
        self.check(rc)?;
        // SAFETY: buf was written by libring and is ours again.
        unsafe { settle(buf.as_mut_ptr(), buf.len()) };
        Ok(())
    }

    /// Returns once every rank has called it.
    pub fn barrier(&self) -> Result<()> {
        // SAFETY: a live communicator.
        self.check(unsafe { sys::ring_barrier(self.as_raw()) })
    }

    /// Sends `buf`, an array of `shape`, to rank `dst`.  The message carries the
    /// dtype and shape; a receiver that posted others fails with
    /// [`ErrorCode::Mismatch`](crate::ErrorCode::Mismatch) naming both.
    pub fn send<T: Element>(&self, buf: &[T], shape: &[usize], dst: usize) -> Result<()> {
        let (ndim, dst) = self.p2p_args("send", buf.len(), shape, dst)?;
        // SAFETY: buf holds the shape's elements; shape is copied by libring.
        let rc = unsafe {
            sys::ring_send(
                self.as_raw(),
                buf.as_ptr().cast(),
                T::DTYPE.raw(),
                ndim,
                shape.as_ptr(),
                dst,
            )
        };
        self.check(rc)
    }

    /// Receives an array of `shape` from rank `src` into `buf`.
    pub fn recv<T: Element>(&self, buf: &mut [T], shape: &[usize], src: usize) -> Result<()> {
        let (ndim, src) = self.p2p_args("recv", buf.len(), shape, src)?;
        // SAFETY: buf holds the shape's elements and outlives the call.
        let rc = unsafe {
            sys::ring_recv(
                self.as_raw(),
                buf.as_mut_ptr().cast(),
                T::DTYPE.raw(),
                ndim,
                shape.as_ptr(),
                src,
            )
        };
        self.check(rc)?;
        // SAFETY: buf was written by libring and is ours again.
        unsafe { settle(buf.as_mut_ptr(), buf.len()) };
        Ok(())
    }

    /// Checks a shape against a buffer; returns ndim and the peer as C ints.
    pub(crate) fn p2p_args(
        &self,
        what: &str,
        len: usize,
        shape: &[usize],
        peer: usize,
    ) -> Result<(c_int, c_int)> {
        if shape.len() > sys::RING_MAX_NDIM as usize {
            return Err(Error::invalid(format!(
                "{}: shape {:?} has more than {} dimensions",
                what,
                shape,
                sys::RING_MAX_NDIM
            )));
        }
        let n = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
        if n != Some(len) {
            return Err(Error::invalid(format!(
                "{}: shape {:?} does not hold the buffer's {} elements",
                what, shape, len
            )));
        }
        Ok((shape.len() as c_int, c_int_of("peer rank", peer)?))
    }

    /// MPI_Comm_split: every rank calls it; those with the same `color >= 0`
    /// form a new communicator ordered by `key`, then by rank here.  A negative
    /// color joins none: `Ok(None)`.
    pub fn split(&self, color: i32, key: i32) -> Result<Option<Communicator>> {
        let mut out = ptr::null_mut();
        // SAFETY: a live communicator; out is written on success.
        let rc = unsafe { sys::ring_split(self.as_raw(), color, key, &mut out) };
        self.check(rc)?;
        // SAFETY: a new communicator that we own.
        Ok(NonNull::new(out).map(|raw| unsafe { Communicator::from_raw(raw) }))
    }

    /// ring_comm_revoke (ULFM's revoke): every pending and later operation of
    /// the job fails at once on every rank with [`ErrorCode::Revoked`].  It does
    /// not wait, and may be called from another thread while one waits on the
    /// communicator.  Revoking again is `Ok`.
    pub fn revoke(&self) -> Result<()> {
        // SAFETY: a live communicator; libring serialises the call.
        let rc = unsafe { sys::ring_comm_revoke(self.as_raw()) };
        self.check(rc)
    }

    /// ring_comm_shrink: after a [`ErrorCode::Peer`], [`ErrorCode::Aborted`]
    /// or [`ErrorCode::Revoked`] failure, a new communicator of the surviving
    /// ranks (those not on a host the local daemon knows the job lost),
    /// renumbered densely in this one's order.  This one can then only be
    /// dropped.  A healthy communicator is not shrunk: [`ErrorCode::Invalid`].
    pub fn shrink(&self) -> Result<Communicator> {
        let mut out = ptr::null_mut();
        // SAFETY: a live communicator; out is written on success.
        let rc = unsafe { sys::ring_comm_shrink(self.as_raw(), &mut out) };
        self.check(rc)?;
        let raw = NonNull::new(out)
            .ok_or_else(|| Error::new(ErrorCode::Proto, "ring_comm_shrink gave no communicator"))?;
        // SAFETY: a new communicator that we own.
        Ok(unsafe { Communicator::from_raw(raw) })
    }

    /// ring_comm_grow: every rank calls it; admits `add` newcomers (processes
    /// that opened the job's name with [`Options::join`] or RING_JOIN=1) and
    /// returns a communicator of `size() + add` ranks, this one keeping its
    /// rank, the newcomers after.  This one stays usable.  Newcomers that do
    /// not come within half the timeout: [`ErrorCode::TimedOut`] saying how
    /// many came; refused ([`ErrorCode::Invalid`]) for `add` 0, a size that
    /// does not fit, or a job that is not healthy.
    pub fn grow(&self, add: usize) -> Result<Communicator> {
        let add = c_int_of("add", add)?;
        let mut out = ptr::null_mut();
        // SAFETY: a live communicator; out is written on success.
        let rc = unsafe { sys::ring_comm_grow(self.as_raw(), add, &mut out) };
        self.check(rc)?;
        let raw = NonNull::new(out)
            .ok_or_else(|| Error::new(ErrorCode::Proto, "ring_comm_grow gave no communicator"))?;
        // SAFETY: a new communicator that we own.
        Ok(unsafe { Communicator::from_raw(raw) })
    }

    /// A buffer of `len` zeroed elements in the shared arena: the daemon reads
    /// and writes it in place (zero-copy).  Freed on drop; it borrows the
    /// communicator, whose close would free it.
    pub fn alloc<T: Element>(&self, len: usize) -> Result<ArenaBuf<'_, T>> {
        ArenaBuf::new(self, len)
    }
}

impl Drop for Communicator {
    fn drop(&mut self) {
        // SAFETY: we own raw, and drop runs when no borrow of self is left.
        unsafe { sys::ring_close(self.raw.as_ptr()) };
    }
}

/// Elements of T in the communicator's shared arena (`ring_alloc`): collectives
/// on it move no data between the process and the daemon.  Derefs to `[T]`.
pub struct ArenaBuf<'c, T: Element> {
    comm: &'c Communicator,
    ptr: NonNull<T>,
    len: usize,
}

// SAFETY: the memory is plain shared memory owned by this value; ring_free is
// serialised by libring like every call on the communicator.
unsafe impl<'c, T: Element> Send for ArenaBuf<'c, T> {}
unsafe impl<'c, T: Element> Sync for ArenaBuf<'c, T> {}

impl<'c, T: Element> ArenaBuf<'c, T> {
    fn new(comm: &'c Communicator, len: usize) -> Result<ArenaBuf<'c, T>> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .ok_or_else(|| Error::invalid(format!("alloc: {} elements overflow", len)))?;
        if bytes == 0 {
            return Ok(ArenaBuf {
                comm,
                ptr: NonNull::dangling(),
                len: 0,
            });
        }
        // SAFETY: a live communicator.
        let p = unsafe { sys::ring_alloc(comm.as_raw(), bytes) };
        let ptr = NonNull::new(p.cast::<T>())
            .ok_or_else(|| Error::last(sys::RING_ENOMEM, comm.as_raw()))?;
        // Arena blocks are LR_ALIGN (64-byte) aligned; zeroes are a valid T.
        debug_assert_eq!(ptr.as_ptr() as usize % std::mem::align_of::<T>(), 0);
        // SAFETY: a fresh block of `bytes` bytes that only we use.
        unsafe { ptr::write_bytes(ptr.as_ptr().cast::<u8>(), 0, bytes) };
        Ok(ArenaBuf { comm, ptr, len })
    }

    /// The communicator whose arena holds this buffer.
    pub fn comm(&self) -> &'c Communicator {
        self.comm
    }
}

impl<'c, T: Element> std::ops::Deref for ArenaBuf<'c, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: len initialised elements (zeroed at allocation, then written
        // through safe slices or settled after libring wrote them).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<'c, T: Element> std::ops::DerefMut for ArenaBuf<'c, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as deref, and &mut self is the only access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<'c, T: Element> Drop for ArenaBuf<'c, T> {
    fn drop(&mut self) {
        if self.len > 0 && std::mem::size_of::<T>() > 0 {
            // SAFETY: a block ring_alloc gave us, freed once.
            unsafe { sys::ring_free(self.comm.as_raw(), self.ptr.as_ptr().cast()) };
        }
    }
}

impl<'c, T: Element + std::fmt::Debug> std::fmt::Debug for ArenaBuf<'c, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}
