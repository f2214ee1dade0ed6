//! A data-parallel gradient synchroniser, in the shape trainers give their
//! strategies: `synchronize_gradients` replaces every gradient by its average
//! over all ranks; `local_rank`, `world_size`, `is_primary`, `barrier`,
//! `is_distributed`.  The backend is chosen by name:
//!
//! - `single` ([`SyncBackend::Single`]): one process, nothing to do, no daemon.
//! - `cpu` ([`SyncBackend::CpuStaging`]): host gradients are packed into buckets
//!   of the shared arena (25 MiB by default) and each bucket's non-blocking
//!   all-reduce is issued as soon as it is full, so the daemon reduces one
//!   bucket while the next is packed (the daemon reads and writes the arena
//!   itself: it needs no call from this process to make progress); then every
//!   request is waited for and the averages are unpacked.  At most
//!   `buckets_in_flight` buckets are in the arena at once; more gradients than
//!   that go in waves.
//! - `ring` ([`SyncBackend::Ring`]): each gradient is all-reduced in place, all
//!   of them in flight at once; libring stages the host memory through the
//!   arena in pieces, and that staging progresses only inside libring calls,
//!   so this overlaps less than `cpu` but copies nothing into buckets.
//!
//! A GPU backend: this crate has no CUDA of its own, so gradients are host
//! memory.  With device memory, the same synchroniser would call
//! `ring_allreduce_cuda(comm, dgrad, dgrad, count, dtype, RING_AVG, stream)`
//! ([`crate::sys::ring_allreduce_cuda`], present only when libring was built with
//! CUDA: `ringd::sys::checked::LIBRING_HAS_CUDA`), which stages the device
//! buffer through page-locked arena slots with copies overlapped with the
//! network, on the GPU given by `gpu_ids[local_rank]`.  The names "gpu",
//! "cuda" and "nccl" are therefore refused with that explanation.
use crate::dtype::{Element, ReduceOp};
use crate::error::{Error, Result};
use crate::{ArenaBuf, Communicator, Options, Request};
use std::fmt;
use std::str::FromStr;

/// How gradients travel; see the [module](self) documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SyncBackend {
    /// One process: nothing to synchronise, no daemon.
    Single,
    /// Host gradients packed into arena buckets, reduced overlapped.
    CpuStaging,
    /// Each gradient all-reduced in place, staged by libring.
    Ring,
}

impl FromStr for SyncBackend {
    type Err = Error;

    /// "single" (or "none", "local"), "cpu" (or "cpu-staging", "cpu_staging",
    /// "staging", "host"), "ring" (or "ringd"); case-insensitive.
    fn from_str(name: &str) -> Result<SyncBackend> {
        match name.trim().to_ascii_lowercase().as_str() {
            "single" | "none" | "local" => Ok(SyncBackend::Single),
            "cpu" | "cpu-staging" | "cpu_staging" | "staging" | "host" => {
                Ok(SyncBackend::CpuStaging)
            }
            "ring" | "ringd" => Ok(SyncBackend::Ring),
            "gpu" | "cuda" | "nccl" => Err(Error::new(
                crate::ErrorCode::NotSupported,
                format!(
                    "sync backend \"{}\": the Rust binding has no CUDA; keep gradients in host \
                     memory and use \"cpu\" (a GPU backend would call ring_allreduce_cuda, \
                     present when libring is built with CUDA)",
                    name
                ),
            )),
            _ => Err(Error::invalid(format!(
                "sync backend \"{}\": expected one of single, cpu, ring",
                name
            ))),
        }
    }
}

impl fmt::Display for SyncBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SyncBackend::Single => "single",
            SyncBackend::CpuStaging => "cpu",
            SyncBackend::Ring => "ring",
        })
    }
}

/// The default bucket: 25 MiB, as PyTorch DDP's.
pub const DEFAULT_BUCKET_BYTES: usize = 25 << 20;

/// How to build a [`GradientSynchronizer`].
#[derive(Debug, Clone)]
pub struct SyncConfig {
    pub backend: SyncBackend,
    /// The GPUs of this host, indexed by local rank (the one this rank would
    /// drive is `gpu_ids[local_rank]`); empty: none named.
    pub gpu_ids: Vec<usize>,
    /// Bytes per bucket (CpuStaging).
    pub bucket_bytes: usize,
    /// Buckets in the arena at once (CpuStaging).
    pub buckets_in_flight: usize,
    /// How to open the communicator (unset fields: the environment).
    pub options: Options,
}

impl SyncConfig {
    /// The defaults for `backend`: 25 MiB buckets, 4 in flight, no GPU ids,
    /// the communicator from the environment.
    pub fn new(backend: SyncBackend) -> SyncConfig {
        SyncConfig {
            backend,
            gpu_ids: Vec::new(),
            bucket_bytes: DEFAULT_BUCKET_BYTES,
            buckets_in_flight: 4,
            options: Options::new(),
        }
    }
}

/// Averages gradients over every rank; `Send + Sync`.
#[derive(Debug)]
pub struct GradientSynchronizer {
    config: SyncConfig,
    comm: Option<Communicator>,
}

/// One stretch of one gradient in a bucket.
#[derive(Debug, Clone, Copy)]
struct Piece {
    grad: usize,
    start: usize,
    len: usize,
}

impl GradientSynchronizer {
    /// Opens the communicator the backend needs (none for Single), with
    /// `config.options` and the environment.
    ///
    /// A process holds one communicator per job and local rank.  A program
    /// that has already opened one for itself (`Communicator::from_env()`,
    /// `Communicator::open`, [`Group::init`](crate::mlx::Group::init)) and
    /// then calls `new` with the same job and local rank is refused by the
    /// daemon; the error ([`ErrorCode::Invalid`](crate::ErrorCode::Invalid))
    /// then says so and names the remedy: build the synchroniser on the open
    /// communicator with [`with_communicator`](Self::with_communicator)
    /// (or drop the other one first).
    pub fn new(config: SyncConfig) -> Result<GradientSynchronizer> {
        let comm = match config.backend {
            SyncBackend::Single => None,
            _ => Some(Communicator::open(&config.options).map_err(held_here)?),
        };
        GradientSynchronizer::build(config, comm)
    }

    /// Uses an open communicator (the backend must not be Single): the way to
    /// synchronise over a communicator the program also uses itself.
    ///
    /// ```no_run
    /// # fn main() -> ringd::Result<()> {
    /// use ringd::sync::{GradientSynchronizer, SyncBackend, SyncConfig};
    /// let comm = ringd::Communicator::from_env()?;
    /// // ... comm.rank(), comm.barrier() ...
    /// let cfg = SyncConfig::new(SyncBackend::CpuStaging);
    /// let sync = GradientSynchronizer::with_communicator(cfg, comm)?;
    /// sync.communicator().unwrap().barrier()?; // still reachable here
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_communicator(
        config: SyncConfig,
        comm: Communicator,
    ) -> Result<GradientSynchronizer> {
        if config.backend == SyncBackend::Single {
            return Err(Error::invalid("the single backend takes no communicator"));
        }
        GradientSynchronizer::build(config, Some(comm))
    }

    fn build(config: SyncConfig, comm: Option<Communicator>) -> Result<GradientSynchronizer> {
        if config.bucket_bytes == 0 || config.buckets_in_flight == 0 {
            return Err(Error::invalid(
                "bucket_bytes and buckets_in_flight must be above 0",
            ));
        }
        let sync = GradientSynchronizer { config, comm };
        let ids = &sync.config.gpu_ids;
        if !ids.is_empty() && sync.local_rank() >= ids.len() {
            return Err(Error::invalid(format!(
                "gpu_ids {:?} names no GPU for local rank {}",
                ids,
                sync.local_rank()
            )));
        }
        Ok(sync)
    }

    pub fn backend(&self) -> SyncBackend {
        self.config.backend
    }

    /// The communicator (None for Single).
    pub fn communicator(&self) -> Option<&Communicator> {
        self.comm.as_ref()
    }

    /// This process's global rank.
    pub fn rank(&self) -> usize {
        self.comm.as_ref().map_or(0, Communicator::rank)
    }

    /// This process's index on its host.
    pub fn local_rank(&self) -> usize {
        self.comm.as_ref().map_or(0, Communicator::local_rank)
    }

    /// The number of ranks.
    pub fn world_size(&self) -> usize {
        self.comm.as_ref().map_or(1, Communicator::size)
    }

    /// Rank 0: the one that logs and saves checkpoints.
    pub fn is_primary(&self) -> bool {
        self.rank() == 0
    }

    /// More than one rank.
    pub fn is_distributed(&self) -> bool {
        self.world_size() > 1
    }

    /// The GPU this rank would drive (`gpu_ids[local_rank]`), if ids were given.
    pub fn device_id(&self) -> Option<usize> {
        self.config.gpu_ids.get(self.local_rank()).copied()
    }

    /// Returns once every rank has called it.
    pub fn barrier(&self) -> Result<()> {
        match &self.comm {
            Some(c) => c.barrier(),
            None => Ok(()),
        }
    }

    /// Replaces every gradient by its average over all ranks, in place.  Every
    /// rank passes gradients of the same lengths in the same order.  Floating
    /// types only (f32, f64, F16, BF16).
    pub fn synchronize_gradients<T, G>(&self, grads: &mut [G]) -> Result<()>
    where
        T: Element,
        G: AsMut<[T]>,
    {
        if !T::DTYPE.is_float() {
            return Err(Error::invalid(format!(
                "synchronize_gradients: {} is not a floating type",
                T::DTYPE.name()
            )));
        }
        let comm = match &self.comm {
            Some(c) if c.size() > 1 => c,
            _ => return Ok(()), // the average over one rank
        };
        match self.config.backend {
            SyncBackend::Single => Ok(()),
            SyncBackend::Ring => sync_in_place(comm, grads),
            SyncBackend::CpuStaging => self.sync_buckets(comm, grads),
        }
    }

    /// CpuStaging: waves of up to buckets_in_flight arena buckets.
    fn sync_buckets<T: Element, G: AsMut<[T]>>(
        &self,
        comm: &Communicator,
        grads: &mut [G],
    ) -> Result<()> {
        let cap = (self.config.bucket_bytes / std::mem::size_of::<T>()).max(1);
        let lens: Vec<usize> = grads.iter_mut().map(|g| g.as_mut().len()).collect();
        let plan = plan_buckets(&lens, cap);
        let longest = plan
            .iter()
            .map(|b| b.iter().map(|p| p.len).sum())
            .max()
            .unwrap_or(0);
        let mut arena: Vec<ArenaBuf<'_, T>> = (0..plan.len().min(self.config.buckets_in_flight))
            .map(|_| comm.alloc(longest))
            .collect::<Result<_>>()?;
        for wave in plan.chunks(arena.len().max(1)) {
            comm.scope(|s| {
                let mut reqs = Vec::with_capacity(wave.len());
                for (buf, bucket) in arena.iter_mut().zip(wave) {
                    let n = pack(buf, bucket, grads);
                    reqs.push(s.iallreduce_in_place(&mut buf[..n], ReduceOp::Avg)?);
                }
                Request::wait_all(reqs)
            })?;
            for (buf, bucket) in arena.iter().zip(wave) {
                unpack(buf, bucket, grads);
            }
        }
        Ok(())
    }
}

/// `new`'s open refused because this process already holds the rank: the
/// daemon's text (written for two processes that were given the same
/// LOCAL_RANK) with what to do instead.
fn held_here(e: Error) -> Error {
    if !e.is_attached_by_this_process() {
        return e;
    }
    Error::new(
        e.code(),
        format!(
            "GradientSynchronizer::new: this process (pid {}) already has a communicator \
             open on this job as this local rank, and a process holds a local rank once; \
             build the synchroniser on that communicator with GradientSynchronizer::with_communicator\
             (config, comm) instead of opening a second one (the daemon said: {})",
            std::process::id(),
            e.detail()
        ),
    )
}

/// Ring: every gradient's all-reduce in flight at once, then all waited for.
fn sync_in_place<T: Element, G: AsMut<[T]>>(comm: &Communicator, grads: &mut [G]) -> Result<()> {
    comm.scope(|s| {
        let mut reqs = Vec::with_capacity(grads.len());
        for g in grads.iter_mut() {
            reqs.push(s.iallreduce_in_place(g.as_mut(), ReduceOp::Avg)?);
        }
        Request::wait_all(reqs)
    })
}

/// Cuts the gradients, in order, into buckets of at most cap elements (a
/// gradient larger than a bucket spans several).
fn plan_buckets(lens: &[usize], cap: usize) -> Vec<Vec<Piece>> {
    let mut plan = Vec::new();
    let mut bucket = Vec::new();
    let mut room = cap;
    for (grad, &len) in lens.iter().enumerate() {
        let mut start = 0;
        while start < len {
            let take = (len - start).min(room);
            bucket.push(Piece {
                grad,
                start,
                len: take,
            });
            start += take;
            room -= take;
            if room == 0 {
                plan.push(std::mem::take(&mut bucket));
                room = cap;
            }
        }
    }
    if !bucket.is_empty() {
        plan.push(bucket);
    }
    plan
}

/// Copies a bucket's pieces into buf; returns the elements used.
fn pack<T: Element, G: AsMut<[T]>>(buf: &mut [T], bucket: &[Piece], grads: &mut [G]) -> usize {
    let mut at = 0;
    for p in bucket {
        let src = &grads[p.grad].as_mut()[p.start..p.start + p.len];
        buf[at..at + p.len].copy_from_slice(src);
        at += p.len;
    }
    at
}

/// Copies the averaged bucket back into the gradients.
fn unpack<T: Element, G: AsMut<[T]>>(buf: &[T], bucket: &[Piece], grads: &mut [G]) {
    let mut at = 0;
    for p in bucket {
        grads[p.grad].as_mut()[p.start..p.start + p.len].copy_from_slice(&buf[at..at + p.len]);
        at += p.len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_element_once_in_order() {
        let lens = [5, 0, 12, 1, 3];
        let plan = plan_buckets(&lens, 4);
        assert!(plan
            .iter()
            .all(|b| b.iter().map(|p| p.len).sum::<usize>() <= 4));
        let flat: Vec<(usize, usize)> = plan
            .iter()
            .flatten()
            .flat_map(|p| (p.start..p.start + p.len).map(move |i| (p.grad, i)))
            .collect();
        let want: Vec<(usize, usize)> = lens
            .iter()
            .enumerate()
            .flat_map(|(g, &n)| (0..n).map(move |i| (g, i)))
            .collect();
        assert_eq!(flat, want);
        assert_eq!(plan.len(), 6); // 21 elements in buckets of 4
    }

    #[test]
    fn backend_names() {
        assert_eq!(
            "single".parse::<SyncBackend>().unwrap(),
            SyncBackend::Single
        );
        assert_eq!(
            "CPU".parse::<SyncBackend>().unwrap(),
            SyncBackend::CpuStaging
        );
        assert_eq!(
            "cpu_staging".parse::<SyncBackend>().unwrap(),
            SyncBackend::CpuStaging
        );
        assert_eq!("ring".parse::<SyncBackend>().unwrap(), SyncBackend::Ring);
        for b in [
            SyncBackend::Single,
            SyncBackend::CpuStaging,
            SyncBackend::Ring,
        ] {
            assert_eq!(b.to_string().parse::<SyncBackend>().unwrap(), b);
        }
        let e = "nccl".parse::<SyncBackend>().unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::NotSupported);
        assert!(e.detail().contains("ring_allreduce_cuda"), "{}", e);
        assert_eq!(
            "mpi".parse::<SyncBackend>().unwrap_err().code(),
            crate::ErrorCode::Invalid
        );
    }

    #[test]
    fn single_is_the_identity_and_send_sync() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<GradientSynchronizer>();
        send_sync::<Communicator>();
        let s = GradientSynchronizer::new(SyncConfig::new(SyncBackend::Single)).unwrap();
        assert_eq!((s.rank(), s.world_size(), s.local_rank()), (0, 1, 0));
        assert!(s.is_primary() && !s.is_distributed());
        let mut g = vec![vec![1.0f32, 2.0], vec![3.0]];
        s.synchronize_gradients(&mut g).unwrap();
        assert_eq!(g, vec![vec![1.0, 2.0], vec![3.0]]);
        s.barrier().unwrap();
        let mut ints = vec![vec![1i32]];
        assert!(s.synchronize_gradients(&mut ints).is_err());
    }
}
