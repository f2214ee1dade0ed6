//! Non-blocking operations.  They run inside a [`Scope`], as threads do inside
//! `std::thread::scope`: an operation's buffers stay borrowed until the scope
//! ends, and the scope waits for every request it issued before it returns.
//!
//! Why a scope, and not a request that borrows its buffers for its own life:
//! libring writes into a receive buffer during later calls on the
//! communicator, until the request completes.  A `Request` dropped early waits
//! (so the borrow could end there), but `std::mem::forget` is safe Rust and
//! skips the drop; the buffer would then be free while libring still writes
//! it.  The scope keeps its own list of the requests it issued and finishes
//! every one of them whatever happened to their handles, so no safe program
//! can reach a buffer that libring still owns.
use crate::comm::{c_int_of, Communicator};
use crate::dtype::{Element, ReduceOp};
use crate::error::{Error, Result};
use ringd_sys as sys;
use std::marker::PhantomData;
use std::os::raw::{c_int, c_void};
use std::ptr;
use std::sync::Mutex;

/// One request of a scope, and the bool buffer to normalise once it is done.
struct Slot {
    req: *mut sys::ring_request,
    settle: Option<Settle>,
}

impl Slot {
    /// Waits (again, if its handle already did: the status is kept), reads the
    /// outcome, settles the buffer and frees the request.
    fn complete(self) -> Result<()> {
        // SAFETY: a live request, completed and freed once (the slot is
        // consumed); waiting is bounded.
        unsafe {
            let rc = sys::ring_wait(self.req);
            let outcome = if rc == 0 {
                Ok(())
            } else {
                Err(Error::of_request(rc, self.req))
            };
            if let Some(s) = &self.settle {
                // The request is complete: libring is done with the buffer,
                // which the scope still borrows.  Byte-wise: no bool is read.
                for i in 0..s.len {
                    *s.ptr.add(i) = (*s.ptr.add(i) != 0) as u8;
                }
            }
            sys::ring_request_free(self.req);
            outcome
        }
    }
}

/// The requests of a scope that are not yet complete and freed.
struct Live {
    slots: Mutex<Vec<Option<Slot>>>,
}

// SAFETY: a ring_request may be waited for from any thread (ring.h); the slots
// are behind the mutex, and each is completed by the one who takes it.
unsafe impl Send for Live {}
unsafe impl Sync for Live {}

impl Live {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Option<Slot>>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push(&self, slot: Slot) -> usize {
        let mut slots = self.lock();
        slots.push(Some(slot));
        slots.len() - 1
    }

    /// The slot at index, unless it was completed already.
    fn take(&self, index: usize) -> Option<Slot> {
        self.lock()[index].take()
    }

    /// Completes every request whose handle did not (outside the lock: a wait
    /// may take a while).
    fn finish_all(&self) {
        let rest: Vec<Slot> = self.lock().iter_mut().filter_map(Option::take).collect();
        for slot in rest {
            let _ = slot.complete();
        }
    }
}

/// Issues non-blocking operations whose buffers live at least as long as the
/// scope; see [`Communicator::scope`].
pub struct Scope<'scope, 'env: 'scope> {
    comm: &'env Communicator,
    live: Live,
    scope: PhantomData<&'scope mut &'scope ()>,
    env: PhantomData<&'env mut &'env ()>,
}

/// Finishes the scope's requests when the closure returns or panics.
struct FinishGuard<'a>(&'a Live);

impl Drop for FinishGuard<'_> {
    fn drop(&mut self) {
        self.0.finish_all();
    }
}

impl Communicator {
    /// Runs `f` with a [`Scope`] for non-blocking operations and returns its
    /// result once every request issued in it has completed (requests still
    /// unwaited are waited for here; their errors are then lost, so wait for
    /// the ones whose outcome matters).  Buffers passed to the scope stay
    /// borrowed until `scope` returns; read the results after it.
    ///
    /// ```no_run
    /// # fn main() -> ringd::Result<()> {
    /// let comm = ringd::Communicator::from_env()?;
    /// let (mut a, mut b) = (vec![1.0f32; 1024], vec![2.0f32; 1024]);
    /// comm.scope(|s| {
    ///     let ra = s.iallreduce_in_place(&mut a, ringd::ReduceOp::Sum)?;
    ///     let rb = s.iallreduce_in_place(&mut b, ringd::ReduceOp::Max)?;
    ///     ringd::Request::wait_all(vec![ra, rb])
    /// })?;
    /// # Ok(()) }
    /// ```
    pub fn scope<'env, F, R>(&'env self, f: F) -> R
    where
        F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> R,
    {
        let scope = Scope {
            comm: self,
            live: Live {
                slots: Mutex::new(Vec::new()),
            },
            scope: PhantomData,
            env: PhantomData,
        };
        let _guard = FinishGuard(&scope.live);
        f(&scope)
    }
}

impl<'scope, 'env> Scope<'scope, 'env> {
    /// The communicator the scope issues on.
    pub fn comm(&self) -> &'env Communicator {
        self.comm
    }

    /// Registers a request just issued (rc is the issuing call's result).
    pub(crate) fn issued(
        &'scope self,
        rc: c_int,
        req: *mut sys::ring_request,
        settle: Option<Settle>,
    ) -> Result<Request<'scope>> {
        self.comm.check(rc)?;
        if req.is_null() {
            return Err(Error::invalid("libring issued no request"));
        }
        let index = self.live.push(Slot { req, settle });
        Ok(Request {
            live: &self.live,
            index,
            raw: req,
        })
    }

    /// What to normalise in buf once the request completes (bool only).
    pub(crate) fn settle_of<T: Element>(&self, buf: &mut [T]) -> Option<Settle> {
        Settle::of(buf)
    }

    /// Non-blocking [`Communicator::allreduce`].
    pub fn iallreduce<T: Element>(
        &'scope self,
        send: &'scope [T],
        recv: &'scope mut [T],
        op: ReduceOp,
    ) -> Result<Request<'scope>> {
        self.comm
            .want("iallreduce", send.len(), recv.len(), "recv")?;
        let mut req = ptr::null_mut();
        // SAFETY: the buffers are borrowed for the scope, which outlives the request.
        let rc = unsafe {
            sys::ring_iallreduce(
                self.comm.as_raw(),
                send.as_ptr().cast(),
                recv.as_mut_ptr().cast(),
                send.len(),
                T::DTYPE.raw(),
                op.raw(),
                &mut req,
            )
        };
        self.issued(rc, req, None)
    }

    /// Non-blocking [`Communicator::allreduce_in_place`].
    pub fn iallreduce_in_place<T: Element>(
        &'scope self,
        buf: &'scope mut [T],
        op: ReduceOp,
    ) -> Result<Request<'scope>> {
        let p = buf.as_mut_ptr().cast::<c_void>();
        let mut req = ptr::null_mut();
        // SAFETY: as iallreduce.
        let rc = unsafe {
            sys::ring_iallreduce(
                self.comm.as_raw(),
                p,
                p,
                buf.len(),
                T::DTYPE.raw(),
                op.raw(),
                &mut req,
            )
        };
        self.issued(rc, req, None)
    }

    /// Non-blocking [`Communicator::allgather`].
    pub fn iallgather<T: Element>(
        &'scope self,
        send: &'scope [T],
        recv: &'scope mut [T],
    ) -> Result<Request<'scope>> {
        self.comm.want(
            "iallgather",
            send.len() * self.comm.size(),
            recv.len(),
            "recv",
        )?;
        let mut req = ptr::null_mut();
        // SAFETY: as iallreduce.
        let rc = unsafe {
            sys::ring_iallgather(
                self.comm.as_raw(),
                send.as_ptr().cast(),
                recv.as_mut_ptr().cast(),
                send.len(),
                T::DTYPE.raw(),
                &mut req,
            )
        };
        self.issued(rc, req, Settle::of(recv))
    }

    /// Non-blocking [`Communicator::reduce_scatter`].
    pub fn ireduce_scatter<T: Element>(
        &'scope self,
        send: &'scope [T],
        recv: &'scope mut [T],
        op: ReduceOp,
    ) -> Result<Request<'scope>> {
        self.comm.want(
            "ireduce_scatter",
            recv.len() * self.comm.size(),
            send.len(),
            "send",
        )?;
        let mut req = ptr::null_mut();
        // SAFETY: as iallreduce.
        let rc = unsafe {
            sys::ring_ireduce_scatter(
                self.comm.as_raw(),
                send.as_ptr().cast(),
                recv.as_mut_ptr().cast(),
                recv.len(),
                T::DTYPE.raw(),
                op.raw(),
                &mut req,
            )
        };
        self.issued(rc, req, None)
    }

    /// Non-blocking [`Communicator::broadcast`].
    pub fn ibroadcast<T: Element>(
        &'scope self,
        buf: &'scope mut [T],
        root: usize,
    ) -> Result<Request<'scope>> {
        let root = c_int_of("root", root)?;
        let mut req = ptr::null_mut();
        // SAFETY: as iallreduce.
        let rc = unsafe {
            sys::ring_ibroadcast(
                self.comm.as_raw(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                T::DTYPE.raw(),
                root,
                &mut req,
            )
        };
        self.issued(rc, req, Settle::of(buf))
    }

    /// Non-blocking [`Communicator::barrier`].
    pub fn ibarrier(&'scope self) -> Result<Request<'scope>> {
        let mut req = ptr::null_mut();
        // SAFETY: a live communicator.
        let rc = unsafe { sys::ring_ibarrier(self.comm.as_raw(), &mut req) };
        self.issued(rc, req, None)
    }

    /// Non-blocking [`Communicator::send`].
    pub fn isend<T: Element>(
        &'scope self,
        buf: &'scope [T],
        shape: &[usize],
        dst: usize,
    ) -> Result<Request<'scope>> {
        let (ndim, dst) = self.comm.p2p_args("isend", buf.len(), shape, dst)?;
        let mut req = ptr::null_mut();
        // SAFETY: as iallreduce; libring copies the shape.
        let rc = unsafe {
            sys::ring_isend(
                self.comm.as_raw(),
                buf.as_ptr().cast(),
                T::DTYPE.raw(),
                ndim,
                shape.as_ptr(),
                dst,
                &mut req,
            )
        };
        self.issued(rc, req, None)
    }

    /// Non-blocking [`Communicator::recv`].
    pub fn irecv<T: Element>(
        &'scope self,
        buf: &'scope mut [T],
        shape: &[usize],
        src: usize,
    ) -> Result<Request<'scope>> {
        let (ndim, src) = self.comm.p2p_args("irecv", buf.len(), shape, src)?;
        let mut req = ptr::null_mut();
        // SAFETY: as iallreduce; libring copies the shape.
        let rc = unsafe {
            sys::ring_irecv(
                self.comm.as_raw(),
                buf.as_mut_ptr().cast(),
                T::DTYPE.raw(),
                ndim,
                shape.as_ptr(),
                src,
                &mut req,
            )
        };
        self.issued(rc, req, Settle::of(buf))
    }
}

/// A buffer to normalise once its request completes (bool only).
pub(crate) struct Settle {
    ptr: *mut u8,
    len: usize,
}

impl Settle {
    fn of<T: Element>(buf: &mut [T]) -> Option<Settle> {
        if T::ANY_BITS {
            return None;
        }
        Some(Settle {
            ptr: buf.as_mut_ptr().cast(),
            len: std::mem::size_of_val(buf),
        })
    }
}

/// One operation in flight.  [`wait`](Self::wait) for it; dropping it waits
/// too (and drops the outcome).  Its buffers stay borrowed until the scope ends.
#[must_use = "a request must be waited for: drop waits and loses its error"]
pub struct Request<'scope> {
    live: &'scope Live,
    index: usize,
    raw: *mut sys::ring_request,
}

// SAFETY: a request may be waited for or tested from any thread; its buffers
// are borrowed by the scope, not by a thread.
unsafe impl Send for Request<'_> {}

impl<'scope> Request<'scope> {
    /// Waits until the operation completes (within its bound) and returns its
    /// outcome, with the request's own error text.
    pub fn wait(mut self) -> Result<()> {
        self.finish()
    }

    /// True once the operation has completed (an Err when it failed); never
    /// waits.  The request still needs [`wait`](Self::wait) or a drop.
    pub fn test(&mut self) -> Result<bool> {
        let mut done: c_int = 0;
        // SAFETY: a live request owned by this handle.
        let rc = unsafe { sys::ring_test(self.raw, &mut done) };
        if rc != 0 {
            return Err(Error::of_request(rc, self.raw));
        }
        Ok(done != 0)
    }

    /// Waits for all of `reqs` and returns the first failure in their order.
    pub fn wait_all(reqs: Vec<Request<'scope>>) -> Result<()> {
        let mut raws: Vec<*mut sys::ring_request> = reqs.iter().map(|r| r.raw).collect();
        let n = c_int_of("requests", raws.len())?;
        // SAFETY: live requests owned by the handles in reqs.
        let rc = unsafe { sys::ring_wait_all(n, raws.as_mut_ptr()) };
        let mut first = Ok(());
        for mut r in reqs {
            let outcome = r.finish();
            if first.is_ok() && rc != 0 {
                first = outcome;
            }
        }
        first
    }

    /// Completes the request unless that was done already.
    fn finish(&mut self) -> Result<()> {
        match self.live.take(self.index) {
            Some(slot) => slot.complete(),
            None => Ok(()),
        }
    }
}

impl Drop for Request<'_> {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

/// Issues the operations of a group (see [`Communicator::group`]): they are
/// recorded, start together when the group ends, and are waited for then.
pub struct GroupScope<'scope, 'env: 'scope> {
    inner: Scope<'scope, 'env>,
}

/// Records one operation of a group: its request stays in the scope's list.
fn record(issued: Result<Request<'_>>) -> Result<()> {
    issued.map(std::mem::forget)
}

impl<'scope, 'env> GroupScope<'scope, 'env> {
    /// [`Communicator::allreduce`], in the group.
    pub fn allreduce<T: Element>(
        &'scope self,
        send: &'scope [T],
        recv: &'scope mut [T],
        op: ReduceOp,
    ) -> Result<()> {
        record(self.inner.iallreduce(send, recv, op))
    }

    /// [`Communicator::allreduce_in_place`], in the group.
    pub fn allreduce_in_place<T: Element>(
        &'scope self,
        buf: &'scope mut [T],
        op: ReduceOp,
    ) -> Result<()> {
        record(self.inner.iallreduce_in_place(buf, op))
    }

    /// [`Communicator::allgather`], in the group.
    pub fn allgather<T: Element>(
        &'scope self,
        send: &'scope [T],
        recv: &'scope mut [T],
    ) -> Result<()> {
        record(self.inner.iallgather(send, recv))
    }

    /// [`Communicator::reduce_scatter`], in the group.
    pub fn reduce_scatter<T: Element>(
        &'scope self,
        send: &'scope [T],
        recv: &'scope mut [T],
        op: ReduceOp,
    ) -> Result<()> {
        record(self.inner.ireduce_scatter(send, recv, op))
    }

    /// [`Communicator::broadcast`], in the group.
    pub fn broadcast<T: Element>(&'scope self, buf: &'scope mut [T], root: usize) -> Result<()> {
        record(self.inner.ibroadcast(buf, root))
    }

    /// [`Communicator::send`], in the group.
    pub fn send<T: Element>(
        &'scope self,
        buf: &'scope [T],
        shape: &[usize],
        dst: usize,
    ) -> Result<()> {
        record(self.inner.isend(buf, shape, dst))
    }

    /// [`Communicator::recv`], in the group.
    pub fn recv<T: Element>(
        &'scope self,
        buf: &'scope mut [T],
        shape: &[usize],
        src: usize,
    ) -> Result<()> {
        record(self.inner.irecv(buf, shape, src))
    }
}

impl Live {
    /// Completes every request left and returns the first failure in issue
    /// order.
    fn finish_all_checked(&self) -> Result<()> {
        let rest: Vec<Slot> = self.lock().iter_mut().filter_map(Option::take).collect();
        let mut first = Ok(());
        for slot in rest {
            let outcome = slot.complete();
            if first.is_ok() {
                first = outcome;
            }
        }
        first
    }
}

/// Ends a group that a panic left open, then finishes its requests.
struct GroupGuard<'a> {
    comm: *mut sys::ring_comm,
    live: &'a Live,
    open: bool,
}

impl Drop for GroupGuard<'_> {
    fn drop(&mut self) {
        if self.open {
            // SAFETY: the group this guard opened on a live communicator.
            unsafe { sys::ring_group_end(self.comm) };
        }
        self.live.finish_all();
    }
}

impl Communicator {
    /// A group, as NCCL's ncclGroupStart/End: the operations issued on the
    /// [`GroupScope`] are recorded and start together when `f` returns, as a
    /// whole (sends and receives never deadlock, whatever their order; small
    /// all-reduces of one dtype and op share one ring pass); `group` returns
    /// once all of them completed, with `f`'s result or the first failure.
    /// Every rank must group the same collectives in the same order.  It takes
    /// the communicator exclusively: nothing else may issue on it meanwhile.
    ///
    /// The buffers are borrowed until the group ends, so they must be named
    /// variables declared before it, as here (a ring shift and an all-reduce):
    ///
    /// ```no_run
    /// # fn main() -> ringd::Result<()> {
    /// let mut comm = ringd::Communicator::open(&ringd::Options::new())?;
    /// let (me, n) = (comm.rank(), comm.size());
    /// let out = vec![me as f32; 4];
    /// let mut inbox = vec![0.0f32; 4];
    /// let mut grads = vec![1.0f32; 256];
    /// comm.group(|g| {
    ///     g.send(&out, &[4], (me + 1) % n)?;
    ///     g.recv(&mut inbox, &[4], (me + n - 1) % n)?;
    ///     g.allreduce_in_place(&mut grads, ringd::ReduceOp::Sum)
    /// })?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// A temporary made inside the closure is dropped at the end of its
    /// statement while the group still holds it, and does not compile
    /// (E0716, "temporary value dropped while borrowed"):
    ///
    /// ```compile_fail,E0716
    /// # fn main() -> ringd::Result<()> {
    /// let mut comm = ringd::Communicator::open(&ringd::Options::new())?;
    /// comm.group(|g| g.send(&vec![1.0f32; 4], &[4], 1))?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn group<'env, F, R>(&'env mut self, f: F) -> Result<R>
    where
        F: for<'scope> FnOnce(&'scope GroupScope<'scope, 'env>) -> Result<R>,
    {
        let comm: &'env Communicator = self;
        // SAFETY: a live communicator, which we hold exclusively.
        comm.check(unsafe { sys::ring_group_start(comm.as_raw()) })?;
        let group = GroupScope {
            inner: Scope {
                comm,
                live: Live {
                    slots: Mutex::new(Vec::new()),
                },
                scope: PhantomData,
                env: PhantomData,
            },
        };
        let mut guard = GroupGuard {
            comm: comm.as_raw(),
            live: &group.inner.live,
            open: true,
        };
        let out = f(&group);
        guard.open = false;
        // SAFETY: the group opened above.
        let end = comm.check(unsafe { sys::ring_group_end(comm.as_raw()) });
        let waited = group.inner.live.finish_all_checked();
        let out = out?;
        end?;
        waited?;
        Ok(out)
    }
}
