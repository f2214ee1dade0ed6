//! State sync (`ring_state_sync`): buffers made bit-identical on every rank,
//! with a report of whose copies differed, so a training loop heals a replica
//! that diverged (or a newcomer that has nothing yet) and checks for silent
//! divergence with one call.  Buffers are byte slices of any length (0 too);
//! [`state_bytes`] views a slice of numbers as its bytes.
use crate::comm::{c_int_of, Communicator};
use crate::dtype::{Element, BF16, F16};
use crate::error::{Error, Result};
use ringd_sys as sys;
use std::os::raw::{c_int, c_void};

/// Element types every bit pattern of which is a valid value (all but
/// `bool`): their slices may take another rank's bytes as they are.
pub trait AnyBits: Element {}
impl AnyBits for i8 {}
impl AnyBits for u8 {}
impl AnyBits for i16 {}
impl AnyBits for u16 {}
impl AnyBits for i32 {}
impl AnyBits for u32 {}
impl AnyBits for i64 {}
impl AnyBits for u64 {}
impl AnyBits for f32 {}
impl AnyBits for f64 {}
impl AnyBits for F16 {}
impl AnyBits for BF16 {}

/// The bytes of a slice of numbers, for [`Communicator::sync_state`].
pub fn state_bytes<T: AnyBits>(s: &mut [T]) -> &mut [u8] {
    let len = std::mem::size_of_val(s);
    // SAFETY: T is plain data with no padding (Element's contract), any byte
    // pattern is a valid T (AnyBits), and the borrow of s is carried over.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr() as *mut u8, len) }
}

/// What [`Communicator::sync_state`] found: per buffer, the ranks whose copy
/// differed from the agreed version and the rank each received it from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateReport {
    size: usize,
    source: Vec<c_int>,
}

impl StateReport {
    /// True when every rank held the same bytes in every buffer.
    pub fn is_clean(&self) -> bool {
        self.source.iter().all(|&s| s < 0)
    }

    /// The number of buffers synced.
    pub fn buffers(&self) -> usize {
        self.source.len().checked_div(self.size).unwrap_or(0)
    }

    /// The ranks whose copy of `buffer` differed (and were repaired).
    pub fn differed(&self, buffer: usize) -> Vec<usize> {
        (0..self.size)
            .filter(|&r| self.source(buffer, r).is_some())
            .collect()
    }

    /// The rank that `rank` received `buffer` from; None when its copy was
    /// already the agreed one.
    pub fn source(&self, buffer: usize, rank: usize) -> Option<usize> {
        let s = *self.source.get(buffer * self.size + rank)?;
        usize::try_from(s).ok()
    }
}

impl Communicator {
    /// ring_state_sync: a collective that makes `buffers` bit-identical on
    /// every rank.  Per buffer the version most ranks hold wins (a tie: the
    /// lowest rank's) and only the ranks whose copy differs receive it; when
    /// all agree only 64 bytes per rank travel.  Every rank passes the same
    /// number of buffers, of the same lengths, else every rank gets
    /// [`ErrorCode::Mismatch`](crate::ErrorCode::Mismatch) naming the buffer.
    pub fn sync_state(&self, buffers: &mut [&mut [u8]]) -> Result<StateReport> {
        let n = c_int_of("the number of buffers", buffers.len())?;
        let size = self.size();
        let cells = buffers
            .len()
            .checked_mul(size)
            .ok_or_else(|| Error::invalid("sync_state: too many buffers".to_string()))?;
        let ptrs: Vec<*mut c_void> = buffers
            .iter_mut()
            .map(|b| b.as_mut_ptr() as *mut c_void)
            .collect();
        let sizes: Vec<usize> = buffers.iter().map(|b| b.len()).collect();
        let mut source: Vec<c_int> = vec![-1; cells];
        // SAFETY: a live communicator; ptrs/sizes describe n disjoint
        // writable slices (distinct &mut borrows) that outlive the call, and
        // source has n * size cells.
        let rc = unsafe {
            sys::ring_state_sync(
                self.as_raw(),
                n,
                ptrs.as_ptr(),
                sizes.as_ptr(),
                source.as_mut_ptr(),
            )
        };
        self.check(rc)?;
        Ok(StateReport { size, source })
    }
}
