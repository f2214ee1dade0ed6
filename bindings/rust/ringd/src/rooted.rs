//! The rest of the collective set (ring.h 0.3), as MPI's: reduce, gather and
//! scatter to or from a root, all-gather with per-rank counts, all-to-all (with
//! and without per-peer counts) and sendrecv, blocking on [`Communicator`] and
//! non-blocking on [`Scope`].  libring writes blocks at the displacements it is
//! given without knowing the buffers' lengths, so every block is checked
//! against its buffer here first.
//!
//! Each operation has one `*_raw` function that checks its arguments and calls
//! libring, in the blocking form or (given the place of a request) the
//! non-blocking one; the methods of both forms go through it.
use crate::comm::{c_int_of, Communicator};
use crate::dtype::{settle, Element, ReduceOp};
use crate::error::{Error, Result};
use crate::request::{Request, Scope, Settle};
use ringd_sys as sys;
use std::os::raw::c_int;
use std::ptr;

/// Where the non-blocking form puts its request; None: the blocking form.
type ReqOut<'a> = Option<&'a mut *mut sys::ring_request>;

/// libring's blocking `$block(args)`, or `$nb(args, req)` where `$req` is
/// Some(req): each non-blocking call is its blocking twin's with the place of
/// the request last.
macro_rules! either_form {
    ($req:expr, $block:ident, $nb:ident; $($arg:expr),* $(,)?) => {
        match $req {
            None => sys::$block($($arg),*),
            Some(req) => sys::$nb($($arg,)* req),
        }
    };
}

/// A null pointer for libring where no displacements are given (packed).
fn displs_ptr(d: Option<&[usize]>) -> *const usize {
    d.map_or(ptr::null(), |d| d.as_ptr())
}

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

/// Each operation's argument checks and libring's call, for both forms.  They
/// are unsafe: given `req` (the non-blocking form), the caller keeps the
/// buffers borrowed until the request completes.
impl Communicator {
    /// The root as libring's int, and whether this rank is it, once the root's
    /// buffer (`len`; None where not given) is found to hold `want` elements.
    fn root_of(
        &self,
        what: &str,
        root: usize,
        len: Option<usize>,
        want: usize,
    ) -> Result<(c_int, bool)> {
        let is_root = self.rank() == root;
        rooted_len(what, is_root, len, want)?;
        Ok((c_int_of("root", root)?, is_root))
    }

    /// [`root_of`](Self::root_of) for a root's `recv`: with the pointer libring
    /// gets for it (null off the root, where it is not written).
    fn root_recv<T>(
        &self,
        what: &str,
        root: usize,
        recv: Option<&mut [T]>,
        want: usize,
    ) -> Result<(c_int, *mut T)> {
        let (root, is_root) = self.root_of(what, root, recv.as_ref().map(|r| r.len()), want)?;
        let p = recv
            .filter(|_| is_root)
            .map_or(ptr::null_mut(), |r| r.as_mut_ptr());
        Ok((root, p))
    }

    unsafe fn reduce_raw<T: Element>(
        &self,
        send: &[T],
        recv: Option<&mut [T]>,
        op: ReduceOp,
        root: usize,
        req: ReqOut,
    ) -> Result<c_int> {
        let (root, p) = self.root_recv("reduce", root, recv, send.len())?;
        Ok(either_form!(req, ring_reduce, ring_ireduce;
            self.as_raw(),
            send.as_ptr().cast(),
            p.cast(),
            send.len(),
            T::DTYPE.raw(),
            op.raw(),
            root,
        ))
    }

    unsafe fn gather_raw<T: Element>(
        &self,
        send: &[T],
        recv: Option<&mut [T]>,
        root: usize,
        req: ReqOut,
    ) -> Result<c_int> {
        let want = send.len() * self.size();
        let (root, p) = self.root_recv("gather", root, recv, want)?;
        Ok(either_form!(req, ring_gather, ring_igather;
            self.as_raw(),
            send.as_ptr().cast(),
            p.cast(),
            send.len(),
            T::DTYPE.raw(),
            root,
        ))
    }

    unsafe fn scatter_raw<T: Element>(
        &self,
        send: Option<&[T]>,
        recv: &mut [T],
        root: usize,
        req: ReqOut,
    ) -> Result<c_int> {
        let want = recv.len() * self.size();
        let (root, is_root) = self.root_of("scatter", root, send.map(|s| s.len()), want)?;
        let p = send.filter(|_| is_root).map_or(ptr::null(), |s| s.as_ptr());
        Ok(either_form!(req, ring_scatter, ring_iscatter;
            self.as_raw(),
            p.cast(),
            recv.as_mut_ptr().cast(),
            recv.len(),
            T::DTYPE.raw(),
            root,
        ))
    }

    unsafe fn allgatherv_raw<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
        displs: Option<&[usize]>,
        req: ReqOut,
    ) -> Result<c_int> {
        check_blocks(
            "allgatherv",
            "recv",
            counts,
            displs,
            recv.len(),
            self.size(),
        )?;
        if counts[self.rank()] != send.len() {
            return Err(Error::invalid(format!(
                "allgatherv: send has {} elements, recvcounts[{}] is {}",
                send.len(),
                self.rank(),
                counts[self.rank()]
            )));
        }
        // libring copies the counts and displacements.
        Ok(either_form!(req, ring_allgatherv, ring_iallgatherv;
            self.as_raw(),
            send.as_ptr().cast(),
            send.len(),
            recv.as_mut_ptr().cast(),
            counts.as_ptr(),
            displs_ptr(displs),
            T::DTYPE.raw(),
        ))
    }

    unsafe fn alltoall_raw<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        req: ReqOut,
    ) -> Result<c_int> {
        let n = self.size();
        if send.len() != recv.len() || send.len() % n != 0 {
            return Err(Error::invalid(format!(
                "alltoall: send ({}) and recv ({}) must hold {} equal blocks",
                send.len(),
                recv.len(),
                n
            )));
        }
        Ok(either_form!(req, ring_alltoall, ring_ialltoall;
            self.as_raw(),
            send.as_ptr().cast(),
            recv.as_mut_ptr().cast(),
            send.len() / n,
            T::DTYPE.raw(),
        ))
    }

    #[allow(clippy::too_many_arguments)]
    unsafe fn alltoallv_raw<T: Element>(
        &self,
        send: &[T],
        sendcounts: &[usize],
        sdispls: Option<&[usize]>,
        recv: &mut [T],
        recvcounts: &[usize],
        rdispls: Option<&[usize]>,
        req: ReqOut,
    ) -> Result<c_int> {
        let what = if req.is_some() {
            "ialltoallv"
        } else {
            "alltoallv"
        };
        let size = self.size();
        check_blocks(what, "send", sendcounts, sdispls, send.len(), size)?;
        check_blocks(what, "recv", recvcounts, rdispls, recv.len(), size)?;
        // libring copies the counts and displacements.
        Ok(either_form!(req, ring_alltoallv, ring_ialltoallv;
            self.as_raw(),
            send.as_ptr().cast(),
            sendcounts.as_ptr(),
            displs_ptr(sdispls),
            recv.as_mut_ptr().cast(),
            recvcounts.as_ptr(),
            displs_ptr(rdispls),
            T::DTYPE.raw(),
        ))
    }

    unsafe fn sendrecv_raw<T: Element>(
        &self,
        send: &[T],
        dst: usize,
        recv: &mut [T],
        src: usize,
        req: ReqOut,
    ) -> Result<c_int> {
        let (dst, src) = (c_int_of("dst", dst)?, c_int_of("src", src)?);
        Ok(either_form!(req, ring_sendrecv, ring_isendrecv;
            self.as_raw(),
            send.as_ptr().cast(),
            send.len(),
            dst,
            recv.as_mut_ptr().cast(),
            recv.len(),
            src,
            T::DTYPE.raw(),
        ))
    }
}

/// The blocking forms: every buffer outlives the call.
impl Communicator {
    /// rc as a Result; `buf`, written by libring, is the caller's again.
    fn settled<T: Element>(&self, rc: c_int, buf: &mut [T]) -> Result<()> {
        self.check(rc)?;
        // SAFETY: the blocking call has returned: libring is done with buf.
        unsafe { settle(buf.as_mut_ptr(), buf.len()) };
        Ok(())
    }

    /// Reduce to `root`: root's `recv` (Some, as long as `send`) gets the
    /// reduction; the others pass None.
    pub fn reduce<T: Element>(
        &self,
        send: &[T],
        recv: Option<&mut [T]>,
        op: ReduceOp,
        root: usize,
    ) -> Result<()> {
        // SAFETY: blocking.
        self.check(unsafe { self.reduce_raw(send, recv, op, root, None)? })
    }

    /// Gather to `root`: root's `recv` (size blocks of `send.len()`) gets every
    /// rank's `send` in rank order; the others pass None.
    pub fn gather<T: Element>(
        &self,
        send: &[T],
        mut recv: Option<&mut [T]>,
        root: usize,
    ) -> Result<()> {
        // SAFETY: blocking.
        let rc = unsafe { self.gather_raw(send, recv.as_deref_mut(), root, None)? };
        self.settled(rc, recv.unwrap_or_default())
    }

    /// Scatter from `root`: rank r's `recv` gets block r of root's `send` (size
    /// blocks of `recv.len()`); the others pass None.
    pub fn scatter<T: Element>(
        &self,
        send: Option<&[T]>,
        recv: &mut [T],
        root: usize,
    ) -> Result<()> {
        // SAFETY: blocking.
        let rc = unsafe { self.scatter_raw(send, recv, root, None)? };
        self.settled(rc, recv)
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
        // SAFETY: blocking.
        let rc = unsafe { self.allgatherv_raw(send, recv, recvcounts, displs, None)? };
        self.settled(rc, recv)
    }

    /// All-to-all: block r of `send` goes to rank r, block r of `recv` comes
    /// from rank r (both hold size equal blocks).
    pub fn alltoall<T: Element>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        // SAFETY: blocking.
        let rc = unsafe { self.alltoall_raw(send, recv, None)? };
        self.settled(rc, recv)
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
        // SAFETY: blocking.
        let rc = unsafe {
            self.alltoallv_raw(send, sendcounts, sdispls, recv, recvcounts, rdispls, None)?
        };
        self.settled(rc, recv)
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
        // SAFETY: blocking.
        let rc = unsafe { self.sendrecv_raw(send, dst, recv, src, None)? };
        self.settled(rc, recv)
    }
}

/// The non-blocking forms.
impl<'scope, 'env> Scope<'scope, 'env> {
    /// Issues `call` (an operation's `*_raw`, given the place of its request)
    /// and registers the request, with the buffer to settle once it completes.
    fn issue(
        &'scope self,
        settle: Option<Settle>,
        call: impl FnOnce(&Communicator, ReqOut) -> Result<c_int>,
    ) -> Result<Request<'scope>> {
        let mut req = ptr::null_mut();
        let rc = call(self.comm(), Some(&mut req))?;
        self.issued(rc, req, settle)
    }

    /// Non-blocking [`Communicator::reduce`].
    pub fn ireduce<T: Element>(
        &'scope self,
        send: &'scope [T],
        recv: Option<&'scope mut [T]>,
        op: ReduceOp,
        root: usize,
    ) -> Result<Request<'scope>> {
        // SAFETY: the buffers are borrowed for the scope, which outlives the request.
        self.issue(None, |c, req| unsafe {
            c.reduce_raw(send, recv, op, root, req)
        })
    }

    /// Non-blocking [`Communicator::gather`].
    pub fn igather<T: Element>(
        &'scope self,
        send: &'scope [T],
        mut recv: Option<&'scope mut [T]>,
        root: usize,
    ) -> Result<Request<'scope>> {
        let settle = recv.as_deref_mut().and_then(|r| self.settle_of(r));
        // SAFETY: as ireduce.
        self.issue(settle, |c, req| unsafe {
            c.gather_raw(send, recv, root, req)
        })
    }

    /// Non-blocking [`Communicator::scatter`].
    pub fn iscatter<T: Element>(
        &'scope self,
        send: Option<&'scope [T]>,
        recv: &'scope mut [T],
        root: usize,
    ) -> Result<Request<'scope>> {
        let settle = self.settle_of(recv);
        // SAFETY: as ireduce.
        self.issue(settle, |c, req| unsafe {
            c.scatter_raw(send, recv, root, req)
        })
    }

    /// Non-blocking [`Communicator::allgatherv`] (libring copies the counts).
    pub fn iallgatherv<T: Element>(
        &'scope self,
        send: &'scope [T],
        recv: &'scope mut [T],
        recvcounts: &[usize],
        displs: Option<&[usize]>,
    ) -> Result<Request<'scope>> {
        let settle = self.settle_of(recv);
        // SAFETY: as ireduce.
        self.issue(settle, |c, req| unsafe {
            c.allgatherv_raw(send, recv, recvcounts, displs, req)
        })
    }

    /// Non-blocking [`Communicator::alltoall`].
    pub fn ialltoall<T: Element>(
        &'scope self,
        send: &'scope [T],
        recv: &'scope mut [T],
    ) -> Result<Request<'scope>> {
        let settle = self.settle_of(recv);
        // SAFETY: as ireduce.
        self.issue(settle, |c, req| unsafe { c.alltoall_raw(send, recv, req) })
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
        let settle = self.settle_of(recv);
        // SAFETY: as ireduce.
        self.issue(settle, |c, req| unsafe {
            c.alltoallv_raw(send, sendcounts, sdispls, recv, recvcounts, rdispls, req)
        })
    }

    /// Non-blocking [`Communicator::sendrecv`].
    pub fn isendrecv<T: Element>(
        &'scope self,
        send: &'scope [T],
        dst: usize,
        recv: &'scope mut [T],
        src: usize,
    ) -> Result<Request<'scope>> {
        let settle = self.settle_of(recv);
        // SAFETY: as ireduce.
        self.issue(settle, |c, req| unsafe {
            c.sendrecv_raw(send, dst, recv, src, req)
        })
    }
}
