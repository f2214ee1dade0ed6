//! The MLX-style adapter on real daemons: the trait's byte-level calls, bool's
//! or/or/and, typed send/recv with a mismatch (both sides fail, the next message
//! arrives intact), split, and the size-1 group with no daemon.
mod common;
use common::Ring;
use ringd::mlx::{Communicator as _, Group, ReduceOp, RingCommunicator};
use ringd::{Dtype, ErrorCode};

fn group_of(comm: ringd::Communicator) -> Group {
    Group::new(RingCommunicator::new(comm))
}

#[test]
fn all_reduce_bytes_of_every_dtype_and_bool_as_or_or_and() {
    let ring = Ring::start(2);
    ring.run(2, |comm| {
        let g = RingCommunicator::new(comm);
        let r = g.rank();
        // 3 ranks hold true at index 0; only rank 0 at index 1; all at 2.
        let flags = [(r != 1) as u8, (r == 0) as u8 * 7, 1, 0];
        let want = [[1, 1, 1, 0], [1, 1, 1, 0], [0, 0, 1, 0]];
        for (op, want) in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min]
            .iter()
            .zip(want)
        {
            let mut b = flags;
            g.all_reduce(*op, Dtype::Bool, &mut b).unwrap();
            assert_eq!(b, want, "bool {:?}", op);
        }
        for d in Dtype::ALL {
            let mut buf = vec![0u8; 3 * d.size()];
            g.all_reduce(ReduceOp::Max, d, &mut buf).unwrap();
        }
        let e = g
            .all_reduce(ReduceOp::Sum, Dtype::Float32, &mut [0u8; 6])
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::Invalid);
        assert!(
            e.detail().contains("not a whole number of float32"),
            "{}",
            e
        );

        let mut out = vec![0u8; 3 * g.size()];
        g.all_gather(&[r as u8; 3], &mut out).unwrap();
        assert_eq!(out, vec![0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]);
    });
}

#[test]
fn group_typed_collectives() {
    let ring = Ring::start(1);
    ring.run(3, |comm| {
        let g = group_of(comm);
        let r = g.rank() as f32;
        let mut x = [r, 2.0 * r, -r];
        g.all_sum(&mut x).unwrap();
        assert_eq!(x, [3.0, 6.0, -3.0]);
        let mut x = [r; 2];
        g.all_max(&mut x).unwrap();
        assert_eq!(x, [2.0; 2]);
        g.all_min(&mut x).unwrap();
        assert_eq!(x, [2.0; 2]);
        let mut b = [g.rank() == 1, true];
        g.all_min(&mut b).unwrap();
        assert_eq!(b, [false, true]);
        let mut all = [0i64; 6];
        g.all_gather(&[g.rank() as i64, -1], &mut all).unwrap();
        assert_eq!(all, [0, -1, 1, -1, 2, -1]);
    });
}

#[test]
fn typed_mismatch_fails_both_sides_and_the_link_stays_aligned() {
    let ring = Ring::start(2);
    let outcome = ring.run(1, |comm| {
        let g = group_of(comm);
        let mut seen = Vec::new();
        if g.rank() == 0 {
            // float32 [2, 3] where the receiver expects int32 [2, 3].
            seen.push(
                g.send(&[1.5f32; 6], &[2, 3], 1)
                    .map_err(|e| (e.code(), e.to_string())),
            );
            // The wrong shape: [3, 2] where [2, 3] is expected.
            seen.push(
                g.send(&[2i32; 6], &[3, 2], 1)
                    .map_err(|e| (e.code(), e.to_string())),
            );
            seen.push(
                g.send(&[7i32, 8, 9, 10, 11, 12], &[2, 3], 1)
                    .map_err(|e| (e.code(), e.to_string())),
            );
        } else {
            let mut buf = [0i32; 6];
            seen.push(
                g.recv(&mut buf, &[2, 3], 0)
                    .map_err(|e| (e.code(), e.to_string())),
            );
            seen.push(
                g.recv(&mut buf, &[2, 3], 0)
                    .map_err(|e| (e.code(), e.to_string())),
            );
            seen.push(
                g.recv(&mut buf, &[2, 3], 0)
                    .map_err(|e| (e.code(), e.to_string())),
            );
            assert_eq!(
                buf,
                [7, 8, 9, 10, 11, 12],
                "the message after the mismatches"
            );
        }
        seen
    });
    for (rank, seen) in outcome.iter().enumerate() {
        for (i, s) in seen[..2].iter().enumerate() {
            let (code, text) = s
                .clone()
                .expect_err(&format!("rank {} message {} succeeded", rank, i));
            assert_eq!(code, ErrorCode::Mismatch, "rank {}: {}", rank, text);
        }
        assert!(seen[2].is_ok(), "rank {}: {:?}", rank, seen[2]);
    }
    // Both sides' messages name both dtypes.
    for seen in &outcome {
        let text = &seen[0].as_ref().unwrap_err().1;
        assert!(
            text.contains("float32") && text.contains("int32"),
            "{}",
            text
        );
    }
}

#[test]
fn byte_send_recv_and_split() {
    let ring = Ring::start(2);
    ring.run(2, |comm| {
        let g = RingCommunicator::new(comm);
        let (r, n) = (g.rank(), g.size());
        let next = (r + 1) % n;
        let prev = (r + n - 1) % n;
        // Even ranks send first, odd ones receive first.
        let mut got = [0u8; 5];
        if r % 2 == 0 {
            g.send(next, &[r as u8; 5]).unwrap();
            g.recv(prev, &mut got).unwrap();
        } else {
            g.recv(prev, &mut got).unwrap();
            g.send(next, &[r as u8; 5]).unwrap();
        }
        assert_eq!(got, [prev as u8; 5]);

        let group = Group::new(g);
        // Odd and even ranks, each ordered by descending rank.
        let sub = group
            .split((r % 2) as i32, (10 - r) as i32)
            .unwrap()
            .unwrap();
        assert_eq!(sub.size(), 2);
        assert_eq!(sub.rank(), if r < 2 { 1 } else { 0 });
        let mut x = [r as u32];
        sub.all_sum(&mut x).unwrap();
        assert_eq!(x[0], if r % 2 == 0 { 2 } else { 4 });
        // Rank 3 stays out; the rest keep rank order with key -1.
        let some = group.split(if r == 3 { -1 } else { 0 }, -1).unwrap();
        assert_eq!(
            some.as_ref().map(|s| (s.rank(), s.size())),
            if r == 3 { None } else { Some((r, 3)) }
        );
    });
}

#[test]
fn the_single_group_needs_no_daemon() {
    let g = Group::single();
    assert_eq!((g.rank(), g.size()), (0, 1));
    let mut x = [1.0f32, 2.0];
    g.all_sum(&mut x).unwrap();
    assert_eq!(x, [1.0, 2.0]);
    let mut b = [true, false];
    g.all_min(&mut b).unwrap();
    assert_eq!(b, [true, false]);
    let mut out = [0u16; 2];
    g.all_gather(&[4u16, 5], &mut out).unwrap();
    assert_eq!(out, [4, 5]);
    assert_eq!(
        g.send(&[1u8], &[1], 0).unwrap_err().code(),
        ErrorCode::Invalid
    );
    assert_eq!(
        g.recv(&mut [1u8], &[1], 0).unwrap_err().code(),
        ErrorCode::Invalid
    );
    let sub = g.split(0, -1).unwrap().unwrap();
    assert_eq!(sub.size(), 1);
    assert!(g.split(-1, 0).unwrap().is_none());
}

/// A safe implementation of the trait that writes bytes that are no bool and
/// then panics: what a buggy or hostile backend may do without `unsafe`.
struct WritesTwoThenPanics;

impl ringd::mlx::Communicator for WritesTwoThenPanics {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn all_reduce(&self, _: ReduceOp, _: Dtype, data: &mut [u8]) -> ringd::Result<()> {
        data.fill(2);
        panic!("the backend panics half-way");
    }
    fn all_gather(&self, _: &[u8], output: &mut [u8]) -> ringd::Result<()> {
        output.fill(2);
        panic!("the backend panics half-way");
    }
    fn send(&self, _: usize, _: &[u8]) -> ringd::Result<()> {
        Ok(())
    }
    fn recv(&self, _: usize, data: &mut [u8]) -> ringd::Result<()> {
        data.fill(2);
        panic!("the backend panics half-way");
    }
    fn send_typed(&self, _: usize, _: Dtype, _: &[usize], _: &[u8]) -> ringd::Result<()> {
        Ok(())
    }
    fn recv_typed(&self, _: usize, _: Dtype, _: &[usize], data: &mut [u8]) -> ringd::Result<()> {
        data.fill(2);
        panic!("the backend panics half-way");
    }
    fn split(&self, _: i32, _: i32) -> ringd::Result<Option<Box<dyn ringd::mlx::Communicator>>> {
        Ok(None)
    }
}

/// The bytes of `flags`, read as bytes: a bool must be 0 or 1.
fn raw_bytes(flags: &[bool]) -> Vec<u8> {
    // SAFETY: reads flags.len() initialised bytes as u8 (any value is a valid u8),
    // never as bool.
    unsafe { std::slice::from_raw_parts(flags.as_ptr().cast::<u8>(), flags.len()).to_vec() }
}

#[test]
fn a_backend_that_panics_leaves_only_valid_bools() {
    let g = Group::new(WritesTwoThenPanics);
    type Call = fn(&Group, &mut Vec<bool>);
    let calls: [(&str, Call); 5] = [
        ("all_sum", |g, v| drop(g.all_sum(v))),
        ("all_max", |g, v| drop(g.all_max(v))),
        ("all_min", |g, v| drop(g.all_min(v))),
        ("all_gather", |g, v| drop(g.all_gather(&[true; 8], v))),
        ("recv", |g, v| drop(g.recv(v, &[8], 0))),
    ];
    // (The panics print their message: the hook is the process's, shared with
    // the tests running beside this one, so it stays as it is.)
    let mut results = Vec::new();
    for (name, call) in calls {
        let mut flags: Vec<bool> = vec![false; 8];
        let run = std::panic::AssertUnwindSafe(|| call(&g, &mut flags));
        let outcome = std::panic::catch_unwind(run);
        results.push((name, outcome.is_err(), raw_bytes(&flags)));
    }
    for (name, panicked, bytes) in results {
        assert!(
            panicked,
            "{}: the backend's panic did not reach catch_unwind",
            name
        );
        let valid = bytes.iter().all(|&b| b <= 1);
        assert!(valid, "{}: bytes {:?} are not all valid bools", name, bytes);
        // What the backend wrote (non-zero) reads as true.
        assert!(bytes.iter().all(|&b| b == 1), "{}: {:?}", name, bytes);
    }
}
