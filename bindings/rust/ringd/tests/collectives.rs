//! Every collective over every dtype, on worlds of 1 to 4 ranks over 1 or 2
//! daemons, with counts 0, 1, fewer than the ranks, uneven and large; the
//! results are compared with what the test computes itself.
mod common;
use common::{small, Ring, Val, WORLDS};
use ringd::{Communicator, Dtype, ReduceOp};

const COUNTS: &[usize] = &[0, 1, 3, 1001, 70_000];

/// The expected reduction of the ranks' small values at index i.
fn expect<T: Val>(size: usize, i: usize, op: ReduceOp) -> T {
    let vals = (0..size).map(|r| small(r, i));
    let bool_like = T::DTYPE == Dtype::Bool;
    let v = match op {
        ReduceOp::Sum if bool_like => vals.map(|v| (v != 0) as i64).max().unwrap(),
        ReduceOp::Sum => vals.sum(),
        ReduceOp::Max => vals.max().unwrap(),
        ReduceOp::Min => vals.min().unwrap(),
        _ => unreachable!(),
    };
    T::of(v)
}

fn allreduce<T: Val>(comm: &Communicator) {
    let (r, n) = (comm.rank(), comm.size());
    for &count in COUNTS {
        for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min] {
            let send: Vec<T> = (0..count).map(|i| T::of(small(r, i))).collect();
            let mut recv = vec![T::of(0); count];
            comm.allreduce(&send, &mut recv, op).unwrap();
            let want: Vec<T> = (0..count).map(|i| expect(n, i, op)).collect();
            assert!(
                recv == want,
                "{:?} {:?} count {}: rank {} got {:?}..",
                T::DTYPE,
                op,
                count,
                r,
                &recv[..count.min(8)]
            );
            let mut buf = send.clone();
            comm.allreduce_in_place(&mut buf, op).unwrap();
            assert!(
                buf == want,
                "{:?} {:?} in place, count {}",
                T::DTYPE,
                op,
                count
            );
        }
    }
}

fn allreduce_prod_avg<T: Val>(comm: &Communicator) {
    let (r, n) = (comm.rank(), comm.size());
    let mut buf: Vec<T> = (0..100).map(|i| T::of(1 + ((r + i) % 2) as i64)).collect();
    comm.allreduce_in_place(&mut buf, ReduceOp::Prod).unwrap();
    for (i, v) in buf.iter().enumerate() {
        let want: i64 = (0..n).map(|q| 1 + ((q + i) % 2) as i64).product();
        assert_eq!(
            *v,
            T::of(if T::DTYPE == Dtype::Bool { 1 } else { want }),
            "prod at {}",
            i
        );
    }
    let mut buf: Vec<T> = (0..100).map(|i| T::of(small(r, i))).collect();
    let avg = comm.allreduce_in_place(&mut buf, ReduceOp::Avg);
    if !T::DTYPE.is_float() {
        assert_eq!(
            avg.unwrap_err().code(),
            ringd::ErrorCode::Invalid,
            "{:?} avg",
            T::DTYPE
        );
        return;
    }
    avg.unwrap();
    for (i, v) in buf.iter().enumerate() {
        let want = (0..n).map(|q| small(q, i)).sum::<i64>() as f64 / n as f64;
        assert!(
            (v.as_f64() - want).abs() <= want.abs() * 1e-2 + 1e-6,
            "{:?} avg at {}: {:?}, want {}",
            T::DTYPE,
            i,
            v,
            want
        );
    }
}

fn allgather<T: Val>(comm: &Communicator) {
    let (r, n) = (comm.rank(), comm.size());
    for &count in COUNTS {
        let send: Vec<T> = (0..count).map(|i| T::of(small(r, i))).collect();
        let mut recv = vec![T::of(0); count * n];
        comm.allgather(&send, &mut recv).unwrap();
        for q in 0..n {
            let want: Vec<T> = (0..count).map(|i| T::of(small(q, i))).collect();
            assert!(
                recv[q * count..(q + 1) * count] == want[..],
                "{:?} allgather block {}",
                T::DTYPE,
                q
            );
        }
    }
}

fn reduce_scatter<T: Val>(comm: &Communicator) {
    let (r, n) = (comm.rank(), comm.size());
    for &count in COUNTS {
        let send: Vec<T> = (0..count * n).map(|i| T::of(small(r, i))).collect();
        let mut recv = vec![T::of(0); count];
        comm.reduce_scatter(&send, &mut recv, ReduceOp::Sum)
            .unwrap();
        let want: Vec<T> = (0..count)
            .map(|i| expect(n, r * count + i, ReduceOp::Sum))
            .collect();
        assert!(
            recv == want,
            "{:?} reduce_scatter count {} rank {}",
            T::DTYPE,
            count,
            r
        );
    }
}

fn broadcast<T: Val>(comm: &Communicator) {
    let (r, n) = (comm.rank(), comm.size());
    for root in 0..n {
        for &count in COUNTS {
            let mut buf: Vec<T> = (0..count).map(|i| T::of(small(r, i))).collect();
            comm.broadcast(&mut buf, root).unwrap();
            let want: Vec<T> = (0..count).map(|i| T::of(small(root, i))).collect();
            assert!(
                buf == want,
                "{:?} broadcast from {} count {}",
                T::DTYPE,
                root,
                count
            );
        }
    }
}

fn each_world(f: fn(&Communicator)) {
    for &(daemons, per) in WORLDS {
        let ring = Ring::start(daemons);
        ring.run(per, |comm| f(&comm));
    }
}

#[test]
fn allreduce_sum_max_min_every_dtype() {
    each_world(|c| for_each_dtype!(allreduce(c)));
}

#[test]
fn allreduce_prod_and_avg_every_dtype() {
    each_world(|c| for_each_dtype!(allreduce_prod_avg(c)));
}

#[test]
fn allgather_every_dtype() {
    each_world(|c| for_each_dtype!(allgather(c)));
}

#[test]
fn reduce_scatter_every_dtype() {
    each_world(|c| for_each_dtype!(reduce_scatter(c)));
}

#[test]
fn broadcast_every_dtype_and_root() {
    each_world(|c| for_each_dtype!(broadcast(c)));
}

#[test]
fn barrier_and_the_place_of_each_rank() {
    let ring = Ring::start(2);
    let places = ring.run(2, |comm| {
        comm.barrier().unwrap();
        (
            comm.rank(),
            comm.local_rank(),
            comm.local_size(),
            comm.host_rank(),
            comm.host_count(),
        )
    });
    assert_eq!(
        places,
        vec![
            (0, 0, 2, 0, 2),
            (1, 1, 2, 0, 2),
            (2, 0, 2, 1, 2),
            (3, 1, 2, 1, 2)
        ]
    );
}

#[test]
fn bad_lengths_are_refused_before_libring() {
    let ring = Ring::start(1);
    ring.run(2, |comm| {
        let e = comm.allgather(&[1.0f32; 4], &mut [0.0f32; 5]).unwrap_err();
        assert_eq!(e.code(), ringd::ErrorCode::Invalid);
        assert!(
            e.detail().contains("recv has 5 elements, 8 expected"),
            "{}",
            e
        );
        let e = comm
            .allreduce(&[1u8; 3], &mut [0u8; 2], ReduceOp::Sum)
            .unwrap_err();
        assert_eq!(e.code(), ringd::ErrorCode::Invalid);
        let e = comm.broadcast(&mut [0u8; 2], 7).unwrap_err();
        assert_eq!(e.code(), ringd::ErrorCode::Invalid, "{}", e);
        assert!(!e.detail().is_empty());
        comm.barrier().unwrap(); // both ranks are still in step
    });
}
