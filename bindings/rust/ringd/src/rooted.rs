//! The rest of the collective set (ring.h 0.3), as MPI's: reduce, gather and
//! scatter to or from a root, all-gather with per-rank counts, all-to-all (with
//! and without per-peer counts) and sendrecv, blocking on [`Communicator`] and
//! non-blocking on [`Scope`].  libring writes blocks at the displacements it is
//! given without knowing the buffers' lengths, so every block is checked
//! against its buffer here first.
use crate::comm::{c_int_of, Communicator};
use crate::dtype::{settle, Element, ReduceOp};
use crate::error::{Error, Result};
use crate::request::{Request, Scope};
use ringd_sys as sys;
use std::os::raw::c_int;
use std::ptr;

/// Checks that `counts` (one per rank) at `displs` (None: packed) lie inside a
/// buffer of `len` elements.
fn check_blocks(
    what: &str,
    side: &str,
    counts: &[usize],
    displs: Option<&[usize]>,
    len: usize,
    size: usize,
) -> Result<()> {
    let bad = |why: String| Err(Error::invalid(format!("{}: {} {}", what, side, why)));
    if counts.len() != size {
        return bad(format!(
            "counts has {} entries for {} ranks",
            counts.len(),
            size
        ));
    }
    if let Some(d) = displs {
        if d.len() != size {
            return bad(format!(
                "displacements have {} entries for {} ranks",
                d.len(),
                size
            ));
        }
    }
    let mut at = 0usize;
    for (r, &n) in counts.iter().enumerate() {
        let start = displs.map_or(at, |d| d[r]);
        let end = start.checked_add(n).filter(|&e| e <= len);
        match end {
            Some(e) => at = e,
            None => {
                return bad(format!(
                    "block {} ({} at {}) overruns its {} elements",
                    r, n, start, len
                ))
            }
        }
    }
    Ok(())
}

/// The root's buffer: present (of `want` elements) on the root, ignored elsewhere.
fn rooted_len(what: &str, is_root: bool, len: Option<usize>, want: usize) -> Result<()> {
    match (is_root, len) {
        (true, None) => Err(Error::invalid(format!(
            "{}: the root needs its buffer",
            what
        ))),
        (true, Some(n)) if n != want => Err(Error::invalid(format!(
            "{}: the root's buffer has {} elements, {} expected",
            what, n, want
        ))),
        _ => Ok(()),
    }
}

/// Arguments of the rooted and variable-count calls, checked once for both
/// the blocking and the non-blocking form.
impl Communicator {
    fn reduce_args<T: Element>(
        &self,
        send: &[T],
        recv: &mut Option<&mut [T]>,
        root: usize,
    ) -> Result<(c_int, *mut T)> {
        let is_root = self.rank() == root;
        rooted_len(
            "reduce",
            is_root,
            recv.as_ref().map(|r| r.len()),
            send.len(),
        )?;
        let p = match recv {
            Some(r) if is_root => r.as_mut_ptr(),
            _ => ptr::null_mut(),
        };
        Ok((c_int_of("root", root)?, p))
    }

    fn gather_args<T: Element>(
        &self,
        send: &[T],
        recv: &mut Option<&mut [T]>,
        root: usize,
    ) -> Result<(c_int, *mut T)> {
        let is_root = self.rank() == root;
        rooted_len(
            "gather",
            is_root,
            recv.as_ref().map(|r| r.len()),
            send.len() * self.size(),
        )?;
        let p = match recv {
            Some(r) if is_root => r.as_mut_ptr(),
            _ => ptr::null_mut(),
        };
        Ok((c_int_of("root", root)?, p))
    }

    fn scatter_args<T: Element>(
        &self,
        send: Option<&[T]>,
        recv: &[T],
        root: usize,
    ) -> Result<(c_int, *const T)> {
        let is_root = self.rank() == root;
        rooted_len(
            "scatter",
            is_root,
            send.map(|s| s.len()),
            recv.len() * self.size(),
        )?;
        let p = match send {
            Some(s) if is_root => s.as_ptr(),
            _ => ptr::null(),
        };
        Ok((c_int_of("root", root)?, p))
    }

    fn allgatherv_args(
        &self,
        sendlen: usize,
        recvlen: usize,
        counts: &[usize],
        displs: Option<&[usize]>,
    ) -> Result<()> {
        check_blocks("allgatherv", "recv", counts, displs, recvlen, self.size())?;
        if counts[self.rank()] != sendlen {
            return Err(Error::invalid(format!(
                "allgatherv: send has {} elements, recvcounts[{}] is {}",
                sendlen,
                self.rank(),
                counts[self.rank()]
            )));
        }
        Ok(())
    }

    fn alltoall_count(&self, sendlen: usize, recvlen: usize) -> Result<usize> {
        let n = self.size();
        if sendlen != recvlen || sendlen % n != 0 {
            return Err(Error::invalid(format!(
                "alltoall: send ({}) and recv ({}) must hold {} equal blocks",
                sendlen, recvlen, n
            )));
        }
        Ok(sendlen / n)
    }

    /// Reduce to `root`: root's `recv` (Some, as long as `send`) gets the
    /// reduction; the others pass None.
    pub fn reduce<T: Element>(
        &self,
        send: &[T],
        mut recv: Option<&mut [T]>,
        op: ReduceOp,
        root: usize,
    ) -> Result<()> {
        let (root, p) = self.reduce_args(send, &mut recv, root)?;
        // SAFETY: recv is null or root's buffer of count elements; both outlive the call.
        self.check(unsafe {
            sys::ring_reduce(
                self.as_raw(),
                send.as_ptr().cast(),
                p.cast(),
                send.len(),
                T::DTYPE.raw(),
                op.raw(),
                root,
            )
        })
    }

    /// Gather to `root`: root's `recv` (size blocks of `send.len()`) gets every
    /// rank's `send` in rank order; the others pass None.
    pub fn gather<T: Element>(
        &self,
        send: &[T],
        mut recv: Option<&mut [T]>,
        root: usize,
    ) -> Result<()> {
        let (root, p) = self.gather_args(send, &mut recv, root)?;
        // SAFETY: recv is null or root's buffer of size * count elements.
        self.check(unsafe {
            sys::ring_gather(
                self.as_raw(),
                send.as_ptr().cast(),
                p.cast(),
                send.len(),
                T::DTYPE.raw(),
                root,
            )
        })?;
        if let Some(r) = recv {
            // SAFETY: written by libring, ours again.
            unsafe { settle(r.as_mut_ptr(), r.len()) };
        }
        Ok(())
    }

    /// Scatter from `root`: rank r's `recv` gets block r of root's `send` (size
    /// blocks of `recv.len()`); the others pass None.
    pub fn scatter<T: Element>(
        &self,
        send: Option<&[T]>,
        recv: &mut [T],
        root: usize,
    ) -> Result<()> {
        let (root, p) = self.scatter_args(send, recv, root)?;
        // SAFETY: send is null or root's size * count elements; recv holds count.
        self.check(unsafe {
            sys::ring_scatter(
                self.as_raw(),
                p.cast(),
                recv.as_mut_ptr().cast(),
                recv.len(),
                T::DTYPE.raw(),
                root,
            )
        })?;
        // SAFETY: written by libring, ours again.
        unsafe { settle(recv.as_mut_ptr(), recv.len()) };
        Ok(())
    }

    /// All-gather with per-rank counts: rank r's `send` (`recvcounts[r]`
    /// elements) lands at `displs[r]` of every rank's `recv` (None: packed).
    pub fn allgatherv<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        recvcounts: &[usize],
        displs: Option<&[usize]>,
    ) -> Result<()> {
        self.allgatherv_args(send.len(), recv.len(), recvcounts, displs)?;
        // SAFETY: every block was checked to lie inside recv; libring copies the arrays.
        self.check(unsafe {
            sys::ring_allgatherv(
                self.as_raw(),
                send.as_ptr().cast(),
                send.len(),
                recv.as_mut_ptr().cast(),
                recvcounts.as_ptr(),
                displs.map_or(ptr::null(), |d| d.as_ptr()),
                T::DTYPE.raw(),
            )
        })?;
        // SAFETY: written by libring, ours again.
        unsafe { settle(recv.as_mut_ptr(), recv.len()) };
        Ok(())
    }

    /// All-to-all: block r of `send` goes to rank r, block r of `recv` comes
    /// from rank r (both hold size equal blocks).
    pub fn alltoall<T: Element>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        let count = self.alltoall_count(send.len(), recv.len())?;
        // SAFETY: both hold size * count elements.
        self.check(unsafe {
            sys::ring_alltoall(
                self.as_raw(),
                send.as_ptr().cast(),
                recv.as_mut_ptr().cast(),
                count,
                T::DTYPE.raw(),
            )
        })?;
        // SAFETY: written by libring, ours again.
        unsafe { settle(recv.as_mut_ptr(), recv.len()) };
        Ok(())
    }

    /// All-to-all with per-peer counts and displacements (None: packed); what
    /// rank a sends to b must be what b receives from a.
    #[allow(clippy::too_many_arguments)]
    pub fn alltoallv<T: Element>(
        &self,
        send: &[T],
        sendcounts: &[usize],
        sdispls: Option<&[usize]>,
        recv: &mut [T],
        recvcounts: &[usize],
        rdispls: Option<&[usize]>,
    ) -> Result<()> {
        check_blocks(
            "alltoallv",
            "send",
            sendcounts,
            sdispls,
            send.len(),
            self.size(),
        )?;
        check_blocks(
            "alltoallv",
            "recv",
            recvcounts,
            rdispls,
            recv.len(),
            self.size(),
        )?;
        let d = |x: Option<&[usize]>| x.map_or(ptr::null(), |d| d.as_ptr());
        // SAFETY: every block was checked to lie inside its buffer.
        self.check(unsafe {
            sys::ring_alltoallv(
                self.as_raw(),
                send.as_ptr().cast(),
                sendcounts.as_ptr(),
                d(sdispls),
                recv.as_mut_ptr().cast(),
                recvcounts.as_ptr(),
                d(rdispls),
                T::DTYPE.raw(),
            )
        })?;
        // SAFETY: written by libring, ours again.
        unsafe { settle(recv.as_mut_ptr(), recv.len()) };
        Ok(())
    }

    /// Sends `send` to `dst` and receives `recv` from `src` at once (never
    /// deadlocks, whatever the peers' order).
    pub fn sendrecv<T: Element>(
        &self,
        send: &[T],
        dst: usize,
        recv: &mut [T],
        src: usize,
    ) -> Result<()> {
        let (dst, src) = (c_int_of("dst", dst)?, c_int_of("src", src)?);
        // SAFETY: both buffers outlive the call.
        self.check(unsafe {
            sys::ring_sendrecv(
                self.as_raw(),
                send.as_ptr().cast(),
                send.len(),
                dst,
                recv.as_mut_ptr().cast(),
                recv.len(),
                src,
                T::DTYPE.raw(),
            )
        })?;
        // SAFETY: written by libring, ours again.
        unsafe { settle(recv.as_mut_ptr(), recv.len()) };
        Ok(())
    }
}

impl<'scope, 'env> Scope<'scope, 'env> {
    /// Non-blocking [`Communicator::reduce`].
    pub fn ireduce<T: Element>(
        &'scope self,
        send: &'scope [T],
        mut recv: Option<&'scope mut [T]>,
        op: ReduceOp,
        root: usize,
    ) -> Result<Request<'scope>> {
        let (root, p) = self.comm().reduce_args(send, &mut recv, root)?;
        let mut req = ptr::null_mut();
        // SAFETY: the buffers are borrowed for the scope, which outlives the request.
        let rc = unsafe {
            sys::ring_ireduce(
                self.comm().as_raw(),
                send.as_ptr().cast(),
                p.cast(),
                send.len(),
                T::DTYPE.raw(),
                op.raw(),
                root,
                &mut req,
            )
        };
        self.issued(rc, req, None)
    }

    /// Non-blocking [`Communicator::gather`].
    pub fn igather<T: Element>(
        &'scope self,
        send: &'scope [T],
        mut recv: Option<&'scope mut [T]>,
        root: usize,
    ) -> Result<Request<'scope>> {
        let (root, p) = self.comm().gather_args(send, &mut recv, root)?;
        let mut req = ptr::null_mut();
        // SAFETY: as ireduce.
        let rc = unsafe {
            sys::ring_igather(
                self.comm().as_raw(),
                send.as_ptr().cast(),
                p.cast(),
                send.len(),
                T::DTYPE.raw(),
                root,
                &mut req,
            )
        };
        self.issued(rc, req, recv.and_then(|r| self.settle_of(r)))
    }

    /// Non-blocking [`Communicator::scatter`].
    pub fn iscatter<T: Element>(
        &'scope self,
        send: Option<&'scope [T]>,
        recv: &'scope mut [T],
        root: usize,
    ) -> Result<Request<'scope>> {
        let (root, p) = self.comm().scatter_args(send, recv, root)?;
        let mut req = ptr::null_mut();
        // SAFETY: as ireduce.
        let rc = unsafe {
            sys::ring_iscatter(
                self.comm().as_raw(),
                p.cast(),
                recv.as_mut_ptr().cast(),
                recv.len(),
                T::DTYPE.raw(),
                root,
                &mut req,
            )
        };
        self.issued(rc, req, self.settle_of(recv))
    }

    /// Non-blocking [`Communicator::allgatherv`] (libring copies the counts).
    pub fn iallgatherv<T: Element>(
        &'scope self,
        send: &'scope [T],
        recv: &'scope mut [T],
        recvcounts: &[usize],
        displs: Option<&[usize]>,
    ) -> Result<Request<'scope>> {
        self.comm()
            .allgatherv_args(send.len(), recv.len(), recvcounts, displs)?;
        let mut req = ptr::null_mut();
        // SAFETY: as ireduce; every block lies inside recv.
        let rc = unsafe {
            sys::ring_iallgatherv(
                self.comm().as_raw(),
                send.as_ptr().cast(),
                send.len(),
                recv.as_mut_ptr().cast(),
                recvcounts.as_ptr(),
                displs.map_or(ptr::null(), |d| d.as_ptr()),
                T::DTYPE.raw(),
                &mut req,
            )
        };
        self.issued(rc, req, self.settle_of(recv))
    }

    /// Non-blocking [`Communicator::alltoall`].
    pub fn ialltoall<T: Element>(
        &'scope self,
        send: &'scope [T],
        recv: &'scope mut [T],
    ) -> Result<Request<'scope>> {
        let count = self.comm().alltoall_count(send.len(), recv.len())?;
        let mut req = ptr::null_mut();
        // SAFETY: as ireduce.
        let rc = unsafe {
            sys::ring_ialltoall(
                self.comm().as_raw(),
                send.as_ptr().cast(),
                recv.as_mut_ptr().cast(),
                count,
                T::DTYPE.raw(),
                &mut req,
            )
        };
        self.issued(rc, req, self.settle_of(recv))
    }

    /// Non-blocking [`Communicator::alltoallv`] (libring copies the counts and
    /// displacements: they need not outlive the call).
    #[allow(clippy::too_many_arguments)]
    pub fn ialltoallv<T: Element>(
        &'scope self,
        send: &'scope [T],
        sendcounts: &[usize],
        sdispls: Option<&[usize]>,
        recv: &'scope mut [T],
        recvcounts: &[usize],
        rdispls: Option<&[usize]>,
    ) -> Result<Request<'scope>> {
        let size = self.comm().size();
        check_blocks("ialltoallv", "send", sendcounts, sdispls, send.len(), size)?;
        check_blocks("ialltoallv", "recv", recvcounts, rdispls, recv.len(), size)?;
        let d = |x: Option<&[usize]>| x.map_or(ptr::null(), |d| d.as_ptr());
        let mut req = ptr::null_mut();
        // SAFETY: as ireduce; every block lies inside its buffer.
        let rc = unsafe {
            sys::ring_ialltoallv(
                self.comm().as_raw(),
                send.as_ptr().cast(),
                sendcounts.as_ptr(),
                d(sdispls),
                recv.as_mut_ptr().cast(),
                recvcounts.as_ptr(),
                d(rdispls),
                T::DTYPE.raw(),
                &mut req,
            )
        };
        self.issued(rc, req, self.settle_of(recv))
    }

    /// Non-blocking [`Communicator::sendrecv`].
    pub fn isendrecv<T: Element>(
        &'scope self,
        send: &'scope [T],
        dst: usize,
        recv: &'scope mut [T],
        src: usize,
    ) -> Result<Request<'scope>> {
        let (dst, src) = (c_int_of("dst", dst)?, c_int_of("src", src)?);
        let mut req = ptr::null_mut();
        // SAFETY: as ireduce.
        let rc = unsafe {
            sys::ring_isendrecv(
                self.comm().as_raw(),
                send.as_ptr().cast(),
                send.len(),
                dst,
                recv.as_mut_ptr().cast(),
                recv.len(),
                src,
                T::DTYPE.raw(),
                &mut req,
            )
        };
        self.issued(rc, req, self.settle_of(recv))
    }
}
