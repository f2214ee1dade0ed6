//! The safe Rust API of ringd's client library, libring.
//!
//! A [`Communicator`] is one rank of a job on the local ringd daemon: open it
//! with [`Options`] or from the environment, run collectives over slices of any
//! [`Element`] type (`f32`, `f64`, `i8`..`u64`, `bool`, [`F16`], [`BF16`]), and
//! drop it to leave the job.  Non-blocking forms run inside a
//! [`Communicator::scope`] and return [`Request`]s; [`Communicator::group`]
//! starts several operations together (NCCL's groups); buffers in the shared arena
//! ([`ArenaBuf`], from [`Communicator::alloc`]) move no data between the process
//! and the daemon.  Every failure is an [`Error`]: libring's RING_E* code
//! ([`ErrorCode`]) and its detailed message.
//!
//! Two adapters give the shapes of the interfaces that Rust training code
//! expects: [`mlx`] (an MLX-style `Communicator` trait and `Group`, with a
//! size-1 group that needs no daemon) and [`sync`] (a data-parallel
//! `GradientSynchronizer` that averages gradients in buckets, overlapped).
//!
//! ```no_run
//! use ringd::{Communicator, Options, ReduceOp};
//! # fn main() -> ringd::Result<()> {
//! let comm = Communicator::open(&Options::new().job("train"))?;
//! let mut grads = vec![1.0f32; 1 << 20];
//! comm.allreduce_in_place(&mut grads, ReduceOp::Avg)?;
//! println!("rank {} of {}", comm.rank(), comm.size());
//! # Ok(()) }
//! ```
mod comm;
mod dtype;
mod error;
pub mod mlx;
mod request;
mod rooted;
mod state;
pub mod sync;

pub use comm::{ArenaBuf, Communicator, Options};
pub use dtype::{Dtype, Element, ReduceOp, Wire, BF16, F16};
pub use error::{Error, ErrorCode, Result};
pub use request::{GroupScope, Request, Scope};
/// The raw declarations, for what this crate does not wrap.
pub use ringd_sys as sys;
pub use state::{state_bytes, AnyBits, StateReport};
