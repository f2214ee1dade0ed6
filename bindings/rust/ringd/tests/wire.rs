//! Compression on the wire from Rust: float32 sums and averages with
//! `Wire::Bf16` / `Wire::Fp16` (per call, and per job through `Options::wire`)
//! on 2 daemons x 2 processes are within ring.h's bound of the exact float64
//! sum, are values of the wire format (they travelled compressed) and are the
//! same bits on every rank; an int32 sum asked to compress is refused.
mod common;
use common::Ring;
use ringd::{Communicator, ErrorCode, ReduceOp, Wire};

const N: usize = 50_001;

/// Rank r's element i, in (-4, 4).
fn value(r: usize, i: usize) -> f32 {
    let mut x = (r as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ (i as u64).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 31;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 29;
    ((x >> 11) as f64 / (1u64 << 53) as f64 * 8.0 - 4.0) as f32
}

/// x through the wire format, rounded to nearest even (finite values).
fn round(x: f32, wire: Wire) -> f32 {
    let u = x.to_bits() as u64;
    match wire {
        Wire::Bf16 => f32::from_bits((((u + 0x7fff + ((u >> 16) & 1)) >> 16) << 16) as u32),
        _ if x.abs() < 2f32.powi(-14) => {
            // a float16 subnormal: a multiple of 2^-24, ties to even
            let q = x as f64 * 2f64.powi(24);
            let mut r = q.round();
            if (q - q.trunc()).abs() == 0.5 && r % 2.0 != 0.0 {
                r -= q.signum();
            }
            (r * 2f64.powi(-24)) as f32
        }
        _ => {
            // float16 keeps 11 significant bits: round the 13 below them
            let r = (u + 0xfff + ((u >> 13) & 1)) >> 13 << 13;
            f32::from_bits(r as u32)
        }
    }
}

fn check(comm: &Communicator, got: &[f32], op: ReduceOp, wire: Wire) {
    let (n, h) = (comm.size(), comm.host_count());
    let u = if wire == Wire::Bf16 {
        2f64.powi(-8)
    } else {
        2f64.powi(-11)
    };
    let rel = (h as f64 + 1.0) * u + n as f64 * 2f64.powi(-24);
    let div = if op == ReduceOp::Avg { n as f64 } else { 1.0 };
    for (i, &g) in got.iter().enumerate() {
        let s: f64 = (0..n).map(|r| value(r, i) as f64).sum::<f64>() / div;
        let a: f64 = (0..n).map(|r| (value(r, i) as f64).abs()).sum::<f64>() / div;
        assert!(
            (g as f64 - s).abs() <= rel * a,
            "{:?} {:?} element {}: {} vs exact {} over the bound",
            wire,
            op,
            i,
            g,
            s
        );
        assert_eq!(
            round(g, wire),
            g,
            "{:?} element {} = {} is no {:?} value",
            wire,
            i,
            g,
            wire
        );
    }
}

fn sums(comm: &Communicator, wire: Wire, per_call: bool) -> Vec<Vec<u32>> {
    let r = comm.rank();
    let mut out = Vec::new();
    for op in [ReduceOp::Sum, ReduceOp::Avg] {
        let mut buf: Vec<f32> = (0..N).map(|i| value(r, i)).collect();
        if per_call {
            comm.allreduce_in_place_wire(&mut buf, op, wire).unwrap();
        } else {
            comm.allreduce_in_place(&mut buf, op).unwrap();
        }
        check(comm, &buf, op, wire);
        out.push(buf.iter().map(|v| v.to_bits()).collect());
    }
    out
}

#[test]
fn bf16_and_fp16_per_call() {
    let ring = Ring::start(2);
    for wire in [Wire::Bf16, Wire::Fp16] {
        let all = ring.run(2, |comm| sums(&comm, wire, true));
        assert!(
            all.iter().all(|x| *x == all[0]),
            "{:?}: ranks hold different bits",
            wire
        );
    }
}

#[test]
fn job_wide_option_and_refusal() {
    let ring = Ring::start(2);
    let all = ring.run_with(
        2,
        |o| o.wire(Wire::Bf16),
        |comm| {
            let bits = sums(&comm, Wire::Bf16, false);
            let mut iv = vec![1i32; 8];
            let e = comm
                .allreduce_in_place_wire(&mut iv, ReduceOp::Sum, Wire::Bf16)
                .unwrap_err();
            assert_eq!(e.code(), ErrorCode::Invalid, "{}", e);
            assert!(e.to_string().contains("int32 sum"), "{}", e);
            comm.allreduce_in_place(&mut iv, ReduceOp::Sum).unwrap();
            assert!(iv.iter().all(|&v| v == comm.size() as i32));
            let send: Vec<f32> = (0..4 * 1000).map(|i| value(comm.rank(), i)).collect();
            let mut recv = vec![0f32; 1000];
            comm.reduce_scatter_wire(&send, &mut recv, ReduceOp::Sum, Wire::Fp16)
                .unwrap();
            bits
        },
    );
    assert!(
        all.iter().all(|x| *x == all[0]),
        "ranks hold different bits"
    );
}
