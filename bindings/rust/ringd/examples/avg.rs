//! avg: every rank's gradient averaged in place, the README's Rust example.
//! `eval "$(scripts/ring-local 2)"`, then one process per daemon:
//! `RING_SOCKET=$RING_SOCKET_0 build/rust/debug/examples/avg &
//!  RING_SOCKET=$RING_SOCKET_1 build/rust/debug/examples/avg; wait`.
use ringd::{Communicator, Options, ReduceOp};

fn main() -> ringd::Result<()> {
    // RING_SOCKET, RING_JOB and the launcher's variables, as libring reads them.
    let comm = Communicator::open(&Options::new())?;
    let mut grad = vec![comm.rank() as f32; 1 << 20];
    comm.allreduce_in_place(&mut grad, ReduceOp::Avg)?;
    let (rank, size) = (comm.rank(), comm.size());
    println!("rank {} of {}: grad[0] = {}", rank, size, grad[0]);
    Ok(())
}
