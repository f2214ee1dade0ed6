//! ring.h 0.3's collectives over every dtype on 4 ranks (2 daemons x 2):
//! reduce, gather, scatter to and from every root, allgatherv with uneven and
//! displaced blocks, alltoall, alltoallv, sendrecv round the ring; their
//! non-blocking forms; and blocks that would overrun a buffer, refused.
mod common;
use common::{small, Ring, Val};
use ringd::{Communicator, Dtype, ErrorCode, ReduceOp, Request};

fn rooted<T: Val>(comm: &Communicator) {
    let (r, n) = (comm.rank(), comm.size());
    let mine: Vec<T> = (0..5).map(|i| T::of(small(r, i))).collect();
    for root in 0..n {
        let mut out = vec![T::of(0); 5];
        comm.reduce(
            &mine,
            (r == root).then(|| &mut out[..]),
            ReduceOp::Max,
            root,
        )
        .unwrap();
        if r == root {
            let want: Vec<T> = (0..5)
                .map(|i| T::of((0..n).map(|q| small(q, i)).max().unwrap()))
                .collect();
            assert!(out == want, "{:?} reduce to {}", T::DTYPE, root);
        }
        let mut all = vec![T::of(0); 5 * n];
        comm.gather(&mine, (r == root).then(|| &mut all[..]), root)
            .unwrap();
        if r == root {
            let want: Vec<T> = (0..n)
                .flat_map(|q| (0..5).map(move |i| T::of(small(q, i))))
                .collect();
            assert!(all == want, "{:?} gather to {}", T::DTYPE, root);
        }
        let blocks: Vec<T> = (0..3 * n).map(|i| T::of(small(root, i))).collect();
        let mut part = vec![T::of(0); 3];
        comm.scatter((r == root).then(|| &blocks[..]), &mut part, root)
            .unwrap();
        assert!(
            part[..] == blocks[3 * r..3 * r + 3],
            "{:?} scatter from {}",
            T::DTYPE,
            root
        );
    }
}

fn exchanges<T: Val>(comm: &Communicator) {
    let (r, n) = (comm.rank(), comm.size());
    // allgatherv: rank q gives q + 1 elements, placed with a gap of 2 after each.
    let counts: Vec<usize> = (0..n).map(|q| q + 1).collect();
    let displs: Vec<usize> = (0..n).map(|q| q * (q + 1) / 2 + 2 * q).collect();
    let send: Vec<T> = (0..=r).map(|i| T::of(small(r, i))).collect();
    let mut recv = vec![T::of(0); displs[n - 1] + n + 2];
    comm.allgatherv(&send, &mut recv, &counts, Some(&displs))
        .unwrap();
    for q in 0..n {
        let want: Vec<T> = (0..=q).map(|i| T::of(small(q, i))).collect();
        assert!(
            recv[displs[q]..displs[q] + q + 1] == want[..],
            "{:?} allgatherv block {}",
            T::DTYPE,
            q
        );
    }
    // alltoall: element i of block q is small(r * 10 + q, i).
    let send: Vec<T> = (0..2 * n)
        .map(|i| T::of(small(r * 10 + i / 2, i % 2)))
        .collect();
    let mut recv = vec![T::of(0); 2 * n];
    comm.alltoall(&send, &mut recv).unwrap();
    let want: Vec<T> = (0..2 * n)
        .map(|i| T::of(small((i / 2) * 10 + r, i % 2)))
        .collect();
    assert!(recv == want, "{:?} alltoall", T::DTYPE);
    // alltoallv: rank r sends q + 1 elements to rank q (packed on both sides).
    let scounts: Vec<usize> = (0..n).map(|q| q + 1).collect();
    let rcounts = vec![r + 1; n];
    let send: Vec<T> = (0..n)
        .flat_map(|q| (0..=q).map(move |i| T::of(small(r + q, i))))
        .collect();
    let mut recv = vec![T::of(0); n * (r + 1)];
    comm.alltoallv(&send, &scounts, None, &mut recv, &rcounts, None)
        .unwrap();
    let want: Vec<T> = (0..n)
        .flat_map(|q| (0..=r).map(move |i| T::of(small(q + r, i))))
        .collect();
    assert!(recv == want, "{:?} alltoallv", T::DTYPE);
    // sendrecv: a shift round the ring.
    let mut got = vec![T::of(0); 4];
    let out: Vec<T> = (0..4).map(|i| T::of(small(r, i))).collect();
    comm.sendrecv(&out, (r + 1) % n, &mut got, (r + n - 1) % n)
        .unwrap();
    let prev = (r + n - 1) % n;
    assert!(
        got == (0..4).map(|i| T::of(small(prev, i))).collect::<Vec<T>>(),
        "{:?} sendrecv",
        T::DTYPE
    );
}

#[test]
fn reduce_gather_scatter_every_dtype_and_root() {
    let ring = Ring::start(2);
    ring.run(2, |comm| for_each_dtype!(rooted(&comm)));
}

#[test]
fn allgatherv_alltoall_alltoallv_sendrecv_every_dtype() {
    let ring = Ring::start(2);
    ring.run(2, |comm| for_each_dtype!(exchanges(&comm)));
}

#[test]
fn non_blocking_forms() {
    let ring = Ring::start(2);
    ring.run(2, |comm| {
        let (r, n) = (comm.rank(), comm.size());
        let mine = [r as f32 + 1.0; 3];
        let mut red = [0.0f32; 3];
        let mut gathered = vec![0i32; n];
        let blocks: Vec<u8> = (0..n as u8).collect();
        let mut part = [0u8];
        let counts: Vec<usize> = vec![1; n];
        let one = [r as i64];
        let mut all = vec![0i64; n];
        let a2a: Vec<u16> = (0..n).map(|q| (10 * r + q) as u16).collect();
        let mut a2a_out = vec![0u16; n];
        let mut a2av_out = vec![0u16; n];
        let mut flag = [false];
        let truth = [r % 2 == 0];
        let rid = [r as i32];
        comm.scope(|s| {
            let reqs = vec![
                s.ireduce(&mine, (r == 1).then(|| &mut red[..]), ReduceOp::Sum, 1)
                    .unwrap(),
                s.igather(&rid, (r == 0).then(|| &mut gathered[..]), 0)
                    .unwrap(),
                s.iscatter((r == 2).then(|| &blocks[..]), &mut part, 2)
                    .unwrap(),
                s.iallgatherv(&one, &mut all, &counts, None).unwrap(),
                s.ialltoall(&a2a, &mut a2a_out).unwrap(),
                s.ialltoallv(&a2a, &counts, None, &mut a2av_out, &counts, None)
                    .unwrap(),
                s.isendrecv(&truth, (r + 1) % n, &mut flag, (r + n - 1) % n)
                    .unwrap(),
            ];
            Request::wait_all(reqs).unwrap();
        });
        if r == 1 {
            assert_eq!(red, [(n * (n + 1) / 2) as f32; 3]);
        }
        if r == 0 {
            assert_eq!(gathered, (0..n as i32).collect::<Vec<_>>());
        }
        assert_eq!(part, [r as u8]);
        assert_eq!(all, (0..n as i64).collect::<Vec<_>>());
        assert_eq!(
            a2a_out,
            (0..n).map(|q| (10 * q + r) as u16).collect::<Vec<_>>()
        );
        assert_eq!(a2av_out, a2a_out);
        assert_eq!(flag, [(r + n - 1) % n % 2 == 0]);
    });
}

#[test]
fn blocks_outside_a_buffer_are_refused() {
    let ring = Ring::start(1);
    ring.run(2, |comm| {
        let r = comm.rank();
        let mut recv = [0u32; 4];
        let e = comm
            .allgatherv(&[1u32; 2][..], &mut recv, &[2, 2], Some(&[0, 3]))
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::Invalid);
        assert!(e.detail().contains("overruns"), "{}", e);
        let e = comm
            .alltoallv(
                &[1u8; 2][..],
                &[1, 1],
                None,
                &mut [0u8; 2][..],
                &[1, 1],
                Some(&[0, usize::MAX]),
            )
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::Invalid, "{}", e);
        let e = comm.alltoall(&[1u8; 3][..], &mut [0u8; 3][..]).unwrap_err();
        assert_eq!(e.code(), ErrorCode::Invalid);
        let e = comm.gather(&[1u8; 2][..], None, r).unwrap_err();
        assert!(e.detail().contains("root needs its buffer"), "{}", e);
        assert_eq!(Dtype::Float32.size(), 4);
        comm.barrier().unwrap(); // nothing reached libring: both still in step
    });
}
