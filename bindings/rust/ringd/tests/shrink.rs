//! Jobs that survive: `Communicator::revoke` ends an all-reduce blocked on
//! the other ranks (from another thread of a rank, too, as torch's abort
//! does), every later call fails at once, and `Communicator::shrink` gives
//! the survivors (here all of them: no host was lost) a new communicator.
//! A healthy communicator is not shrunk.
mod common;
use common::Ring;
use ringd::{Communicator, ErrorCode, ReduceOp};
use std::time::{Duration, Instant};

/// The bound within which a revoke ends the others' blocked calls.
const REVOKE_BOUND: Duration = Duration::from_secs(1);

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
fn a_healthy_communicator_is_not_shrunk() {
    let ring = Ring::start(2);
    ring.run(1, |comm| {
        let e = match comm.shrink() {
            Ok(_) => panic!("a healthy communicator was shrunk"),
            Err(e) => e,
        };
        assert_eq!(e.code(), ErrorCode::Invalid, "{}", e);
        assert!(e.detail().contains("nothing failed"), "{}", e);
        sum_check(&comm); // it goes on
    });
}

#[test]
fn revoke_from_another_thread_ends_the_job_and_shrink_goes_on() {
    let ring = Ring::start(2);
    let out = ring.run(2, |comm| {
        let rank = comm.rank();
        let buf = vec![1.0f32; 4096];
        let mut recv = vec![0.0f32; 4096];
        let mut ended = None;
        std::thread::scope(|s| {
            if rank == 1 {
                // rank 1 revokes from a second thread while its first waits
                // in an all-reduce that rank 0 never calls
                s.spawn(|| {
                    std::thread::sleep(Duration::from_millis(500));
                    comm.revoke().unwrap();
                });
            }
            if rank != 0 {
                let t0 = Instant::now();
                let e = comm
                    .allreduce(&buf, &mut recv, ReduceOp::Sum)
                    .expect_err("the all-reduce was not revoked");
                assert_eq!(e.code(), ErrorCode::Revoked, "rank {}: {}", rank, e);
                ended = Some(t0.elapsed());
            }
        });
        if rank == 0 {
            // it never called: its first call finds the job revoked
            std::thread::sleep(Duration::from_millis(1000));
        }
        let e = comm
            .allreduce(&buf, &mut recv, ReduceOp::Sum)
            .expect_err("an all-reduce after the revoke ran");
        assert_eq!(e.code(), ErrorCode::Revoked, "rank {}: {}", rank, e);
        let next = comm.shrink().unwrap();
        assert_eq!((next.rank(), next.size()), (rank, 4));
        sum_check(&next);
        ended
    });
    for (r, ended) in out.iter().enumerate().skip(1) {
        let d = ended.unwrap();
        // 500 ms of sleep before the revoke, then the bound
        assert!(
            d < Duration::from_millis(500) + REVOKE_BOUND,
            "rank {}'s all-reduce ended {:?} after it began",
            r,
            d
        );
    }
}
