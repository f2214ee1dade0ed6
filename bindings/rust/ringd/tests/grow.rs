//! Growing a running job: `Communicator::grow` admits a newcomer that opened
//! the job's name with `Options::join`, every rank gets a communicator of the
//! new size (old ranks keeping theirs, the newcomer after them), and the old
//! communicator goes on.  `grow(0)` is refused; a grow that no newcomer
//! answers ends with `TimedOut` saying how many came.
mod common;
use common::{job_name, Ring};
use ringd::{Communicator, ErrorCode, ReduceOp};

fn sum_check(comm: &Communicator) {
    let send = vec![comm.rank() as f32 + 1.0; 1000];
    let mut recv = vec![0.0f32; 1000];
    comm.allreduce(&send, &mut recv, ReduceOp::Sum).unwrap();
    let n = comm.size() as f32;
    assert!(
        recv.iter().all(|&v| v == n * (n + 1.0) / 2.0),
        "{:?}",
        &recv[..4]
    );
}

#[test]
fn grow_admits_a_newcomer() {
    let ring = Ring::start(2);
    let job = job_name();
    std::thread::scope(|s| {
        // Every process must be running before the first is joined.
        #[allow(clippy::needless_collect)]
        let old: Vec<_> = (0..2)
            .map(|d| {
                let opts = ring.options(d, 0, 1, &job);
                s.spawn(move || {
                    let comm = Communicator::open(&opts).unwrap();
                    let rank = comm.rank();
                    let next = comm.grow(1).unwrap();
                    assert_eq!((next.rank(), next.size()), (rank, 3));
                    sum_check(&next);
                    sum_check(&comm); // the old one goes on
                })
            })
            .collect();
        let opts = ring.options(1, 0, 1, &job).join(true);
        let new = s.spawn(move || {
            let comm = Communicator::open(&opts).unwrap();
            assert_eq!((comm.rank(), comm.size()), (2, 3));
            sum_check(&comm);
        });
        for h in old.into_iter().chain(std::iter::once(new)) {
            h.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        }
    });
}

#[test]
fn grow_refused_and_bounded() {
    let ring = Ring::start(2);
    ring.run_with(
        1,
        |o| o.timeout_ms(3000),
        |comm| {
            let e = match comm.grow(0) {
                Ok(_) => panic!("grow(0) was not refused"),
                Err(e) => e,
            };
            assert_eq!(e.code(), ErrorCode::Invalid, "{}", e);
            let e = match comm.grow(1) {
                Ok(_) => panic!("a grow nobody answered succeeded"),
                Err(e) => e,
            };
            assert_eq!(e.code(), ErrorCode::TimedOut, "{}", e);
            assert!(e.detail().contains("0 of the 1 newcomers came"), "{}", e);
            sum_check(&comm);
        },
    );
}
