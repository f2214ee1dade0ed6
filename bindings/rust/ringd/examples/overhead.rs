//! overhead - what the safe API costs over the C call, for an 8-byte
//! all-reduce (one f64): the raw ringd_sys::ring_allreduce, then
//! Communicator::allreduce and allreduce_in_place, then the non-blocking form
//! (scope + iallreduce + wait against ring_iallreduce + ring_wait +
//! ring_request_free).  Rounds of each alternate, and the median round's time
//! per call is reported, so drift of the machine hits all of them alike.
//!
//!     RING_SINGLE=1 build/rust/release/examples/overhead          # no daemon
//!     eval "$(scripts/ring-local 1)"; build/rust/release/examples/overhead
//!
//! Options: --iters N (calls per round, 2000), --rounds N (15).  A benchmark,
//! not a test: it asserts nothing.
use ringd::sys;
use ringd::{Communicator, ReduceOp, Request};
use std::time::Instant;

fn raw_blocking(comm: &Communicator, iters: usize) {
    let (x, mut y) = (1.0f64, 0.0f64);
    for _ in 0..iters {
        // SAFETY: one f64 each way, both alive for the call.
        let rc = unsafe {
            sys::ring_allreduce(
                comm.as_raw(),
                (&x as *const f64).cast(),
                (&mut y as *mut f64).cast(),
                1,
                sys::RING_FLOAT64,
                sys::RING_SUM,
            )
        };
        assert_eq!(rc, 0);
    }
}

fn safe_blocking(comm: &Communicator, iters: usize) {
    let (x, mut y) = ([1.0f64], [0.0f64]);
    for _ in 0..iters {
        comm.allreduce(&x, &mut y, ReduceOp::Sum).unwrap();
    }
}

fn safe_in_place(comm: &Communicator, iters: usize) {
    let mut y = [1.0f64];
    for _ in 0..iters {
        comm.allreduce_in_place(&mut y, ReduceOp::Max).unwrap();
    }
}

fn raw_nonblocking(comm: &Communicator, iters: usize) {
    let (x, mut y) = (1.0f64, 0.0f64);
    for _ in 0..iters {
        let mut req = std::ptr::null_mut();
        // SAFETY: as raw_blocking; the request is waited for and freed here.
        unsafe {
            let rc = sys::ring_iallreduce(
                comm.as_raw(),
                (&x as *const f64).cast(),
                (&mut y as *mut f64).cast(),
                1,
                sys::RING_FLOAT64,
                sys::RING_SUM,
                &mut req,
            );
            assert_eq!(rc, 0);
            assert_eq!(sys::ring_wait(req), 0);
            sys::ring_request_free(req);
        }
    }
}

fn safe_nonblocking(comm: &Communicator, iters: usize) {
    let (x, mut y) = ([1.0f64], [0.0f64]);
    for _ in 0..iters {
        comm.scope(|s| {
            s.iallreduce(&x, &mut y, ReduceOp::Sum)
                .and_then(Request::wait)
        })
        .unwrap();
    }
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |v| v.parse().expect("a number"))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() -> ringd::Result<()> {
    let comm = Communicator::from_env()?;
    let (iters, rounds) = (arg("--iters", 2000), arg("--rounds", 15));
    type Case = (&'static str, fn(&Communicator, usize));
    let cases: [Case; 5] = [
        ("C ring_allreduce", raw_blocking),
        ("Communicator::allreduce", safe_blocking),
        ("Communicator::allreduce_in_place", safe_in_place),
        ("C ring_iallreduce + ring_wait + free", raw_nonblocking),
        ("scope + iallreduce + wait", safe_nonblocking),
    ];
    let mut times = vec![Vec::new(); cases.len()];
    for (_, f) in &cases {
        f(&comm, iters / 10 + 1); // warm up
    }
    for _ in 0..rounds {
        for (i, (_, f)) in cases.iter().enumerate() {
            let t0 = Instant::now();
            f(&comm, iters);
            times[i].push(t0.elapsed().as_secs_f64() * 1e6 / iters as f64);
        }
    }
    let per_call: Vec<f64> = times.into_iter().map(median).collect();
    println!(
        "8-byte all-reduce, rank {} of {}, {} calls x {} rounds (median round)",
        comm.rank(),
        comm.size(),
        iters,
        rounds
    );
    for (i, (name, _)) in cases.iter().enumerate() {
        let base = if i >= 3 { per_call[3] } else { per_call[0] };
        println!(
            "  {:38} {:9.3} us/call  ({:+.3} us over C)",
            name,
            per_call[i],
            per_call[i] - base
        );
    }
    Ok(())
}
