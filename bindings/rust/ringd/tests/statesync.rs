//! Communicator::sync_state on 4 ranks (2 daemons x 2, 4 x 1): one rank's
//! buffer with one bit flipped is named in the report and repaired, a second
//! sync is clean; buffers of several types and lengths (0 among them); a
//! length that differs is refused on every rank with ErrorCode::Mismatch.
mod common;
use common::Ring;
use ringd::{state_bytes, Communicator, ErrorCode};

fn params() -> (Vec<f32>, Vec<u64>, Vec<u8>) {
    let w = (0..50_000).map(|i| (i as f32).sin()).collect();
    (w, vec![7], Vec::new())
}

fn one_bit(comm: &Communicator, victim: usize) {
    let (mut w, mut step, mut empty) = params();
    let want = params();
    if comm.rank() == victim {
        state_bytes(&mut w)[777] ^= 0x20;
    }
    let rep = comm
        .sync_state(&mut [state_bytes(&mut w), state_bytes(&mut step), &mut empty])
        .unwrap();
    assert_eq!(rep.buffers(), 3);
    assert_eq!(rep.differed(0), vec![victim], "{:?}", rep);
    assert!(matches!(rep.source(0, victim), Some(s) if s != victim));
    assert!(rep.differed(1).is_empty() && rep.differed(2).is_empty());
    assert!(
        w == want.0 && step == want.1,
        "not repaired on rank {}",
        comm.rank()
    );
    let again = comm
        .sync_state(&mut [state_bytes(&mut w), state_bytes(&mut step), &mut empty])
        .unwrap();
    assert!(again.is_clean(), "{:?}", again);
}

#[test]
fn one_bit_named_and_repaired() {
    let ring = Ring::start(2);
    ring.run(2, |comm| one_bit(&comm, 3));
    drop(ring);
    let ring = Ring::start(4);
    ring.run(1, |comm| one_bit(&comm, 1));
}

#[test]
fn different_lengths_refused() {
    let ring = Ring::start(2);
    ring.run(1, |comm| {
        let mut a = vec![1u8; 16];
        let mut b = vec![2u8; if comm.rank() == 1 { 9 } else { 8 }];
        let err = comm.sync_state(&mut [&mut a, &mut b]).unwrap_err();
        assert_eq!(err.code(), ErrorCode::Mismatch, "{}", err);
        assert!(err.to_string().contains("buffer 1"), "{}", err);
    });
}
