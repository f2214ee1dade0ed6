//! Non-blocking operations in a scope, on real daemons: every form, test and
//! wait_all, a request's own error text, a dropped or forgotten request (the
//! scope still finishes it), and zero-copy arena buffers.
mod common;
use common::Ring;
use ringd::{ErrorCode, ReduceOp, Request};
use std::time::{Duration, Instant};

#[test]
fn every_non_blocking_collective() {
    let ring = Ring::start(2);
    ring.run(2, |comm| {
        let (r, n) = (comm.rank(), comm.size());
        let send = vec![r as f64 + 1.0; 1000];
        let mut sum = vec![0.0; 1000];
        let mut inplace = vec![r as i32; 10];
        let mine = [r as u16; 3];
        let mut gathered = vec![0u16; 3 * n];
        let blocks: Vec<i64> = (0..2 * n).map(|i| (i + r) as i64).collect();
        let mut scattered = vec![0i64; 2];
        let mut bcast = vec![r as u8; 4];
        comm.scope(|s| {
            let reqs = vec![
                s.iallreduce(&send, &mut sum, ReduceOp::Sum).unwrap(),
                s.iallreduce_in_place(&mut inplace, ReduceOp::Max).unwrap(),
                s.iallgather(&mine, &mut gathered).unwrap(),
                s.ireduce_scatter(&blocks, &mut scattered, ReduceOp::Sum)
                    .unwrap(),
                s.ibroadcast(&mut bcast, n - 1).unwrap(),
                s.ibarrier().unwrap(),
            ];
            Request::wait_all(reqs).unwrap();
        });
        assert_eq!(sum, vec![(n * (n + 1) / 2) as f64; 1000]);
        assert_eq!(inplace, vec![n as i32 - 1; 10]);
        let want: Vec<u16> = (0..n).flat_map(|q| [q as u16; 3]).collect();
        assert_eq!(gathered, want);
        let base: i64 = (0..n as i64).sum();
        assert_eq!(
            scattered,
            vec![
                n as i64 * (2 * r) as i64 + base,
                n as i64 * (2 * r + 1) as i64 + base
            ]
        );
        assert_eq!(bcast, vec![n as u8 - 1; 4]);
    });
}

#[test]
fn sends_and_receives_in_flight_together_and_test_polls() {
    let ring = Ring::start(2);
    ring.run(1, |comm| {
        let peer = 1 - comm.rank();
        let out = vec![comm.rank() as f32; 100_000];
        let mut got = vec![-1.0f32; 100_000];
        comm.scope(|s| {
            // Both ranks send first: the receive is in flight at the same time.
            let sent = s.isend(&out, &[100, 1000], peer).unwrap();
            let mut recvd = s.irecv(&mut got, &[100, 1000], peer).unwrap();
            let deadline = Instant::now() + Duration::from_secs(15);
            while !recvd.test().unwrap() {
                assert!(Instant::now() < deadline, "irecv never completed");
                std::thread::sleep(Duration::from_millis(1));
            }
            recvd.wait().unwrap();
            sent.wait().unwrap();
        });
        assert!(got.iter().all(|&v| v == peer as f32));
    });
}

#[test]
fn a_failed_request_carries_its_own_error() {
    let ring = Ring::start(2);
    ring.run(1, |comm| {
        let r = comm.rank();
        let mut buf = [0i16; 4];
        let outcome = comm.scope(|s| {
            if r == 0 {
                s.isend(&[1u16; 4][..], &[4], 1).unwrap().wait()
            } else {
                s.irecv(&mut buf, &[4], 0).unwrap().wait()
            }
        });
        let e = outcome.unwrap_err();
        assert_eq!(e.code(), ErrorCode::Mismatch);
        assert!(
            e.detail().contains("uint16") && e.detail().contains("int16"),
            "{}",
            e
        );
        // The link is aligned: the next exchange works.
        if r == 0 {
            comm.send(&[5i16, 6, 7, 8], &[4], 1).unwrap();
        } else {
            comm.recv(&mut buf, &[4], 0).unwrap();
            assert_eq!(buf, [5, 6, 7, 8]);
        }
    });
}

#[test]
fn dropped_and_forgotten_requests_are_finished_by_the_scope() {
    let ring = Ring::start(1);
    ring.run(2, |comm| {
        let mut a = vec![1u32; 5000];
        let mut b = vec![2u32; 5000];
        comm.scope(|s| {
            drop(s.iallreduce_in_place(&mut a, ReduceOp::Sum).unwrap()); // waits
            std::mem::forget(s.iallreduce_in_place(&mut b, ReduceOp::Sum).unwrap());
        });
        assert_eq!(a, vec![2; 5000]);
        assert_eq!(b, vec![4; 5000]);
        // Argument errors fail the issue itself.
        let mut short = [0u8; 3];
        comm.scope(|s| {
            let e = s.iallgather(&[1u8; 2][..], &mut short[..]).err().unwrap();
            assert_eq!(e.code(), ErrorCode::Invalid);
        });
        comm.barrier().unwrap();
    });
}

#[test]
fn arena_buffers_are_zero_copy_slices() {
    let ring = Ring::start(2);
    ring.run(1, |comm| {
        let r = comm.rank();
        let mut x = comm.alloc::<f32>(1 << 20).unwrap();
        assert!(x.iter().all(|&v| v == 0.0));
        x.iter_mut()
            .enumerate()
            .for_each(|(i, v)| *v = (i % 7) as f32 + r as f32);
        comm.allreduce_in_place(&mut x, ReduceOp::Sum).unwrap();
        assert!(x
            .iter()
            .enumerate()
            .all(|(i, &v)| v == 2.0 * (i % 7) as f32 + 1.0));
        let mut flags = comm.alloc::<bool>(3).unwrap();
        flags[r] = true;
        comm.scope(|s| {
            s.iallreduce_in_place(&mut flags, ReduceOp::Max)
                .unwrap()
                .wait()
                .unwrap()
        });
        assert_eq!(&flags[..], &[true, true, false]);
        let empty = comm.alloc::<u64>(0).unwrap();
        assert!(empty.is_empty());
        let e = comm.alloc::<u8>(1 << 40).unwrap_err();
        assert_eq!(e.code(), ErrorCode::NoMemory);
        assert!(e.detail().contains("ring_alloc"), "{}", e);
    });
}

#[test]
fn opening_without_a_daemon_says_where_it_looked() {
    let opts = ringd::Options::new()
        .socket("/nonexistent/ringd.sock")
        .job("nobody")
        .timeout_ms(2000);
    let e = ringd::Communicator::open(&opts).unwrap_err();
    assert_eq!(e.code(), ErrorCode::Daemon, "{}", e);
    assert!(e.detail().contains("/nonexistent/ringd.sock"), "{}", e);
}

#[test]
fn a_group_starts_its_operations_together() {
    let ring = Ring::start(2);
    ring.run(1, |mut comm| {
        let (r, peer) = (comm.rank(), 1 - comm.rank());
        let (mut a, mut b) = (vec![r as f32 + 1.0; 8], vec![r as i64; 3]);
        let out = vec![r as u8 + 10; 1 << 20];
        let mut got = vec![0u8; 1 << 20];
        // Both ranks send their megabyte first, then receive: grouped, it
        // cannot deadlock.
        let n = comm
            .group(|g| {
                g.allreduce_in_place(&mut a, ReduceOp::Sum)?;
                g.allreduce_in_place(&mut b, ReduceOp::Max)?;
                g.send(&out, &[1 << 20], peer)?;
                g.recv(&mut got, &[1 << 20], peer)?;
                Ok(4)
            })
            .unwrap();
        assert_eq!(n, 4);
        assert_eq!(a, vec![3.0; 8]);
        assert_eq!(b, vec![1; 3]);
        assert!(got.iter().all(|&v| v == peer as u8 + 10));
        // A failure inside the group is the group's result.
        let mut wrong = vec![0u16; 1 << 20];
        let e = comm
            .group(|g| {
                g.send(&out, &[1 << 20], peer)?;
                g.recv(&mut wrong, &[1 << 20], peer)
            })
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::Mismatch, "{}", e);
        comm.barrier().unwrap();
    });
}
