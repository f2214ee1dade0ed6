//! The gradient synchroniser on real daemons: every rank ends with the average
//! of every gradient, for both distributed backends, with buckets small enough
//! to need several waves and with the default 25 MiB ones.
mod common;
use common::Ring;
use ringd::sync::{GradientSynchronizer, SyncBackend, SyncConfig};
use ringd::BF16;

/// Gradient g of rank r at index i: r + (g + i) % 5, whose mean over ranks
/// 0..n is (n - 1) / 2 + (g + i) % 5: exact in every floating type.
fn value(r: usize, g: usize, i: usize) -> f32 {
    r as f32 + ((g + i) % 5) as f32
}

const LENS: &[usize] = &[0, 1, 1000, 333, 300_000, 7];

fn check_average(ring: &Ring, per: usize, backend: SyncBackend, bucket_bytes: usize) {
    ring.run(per, |comm| {
        let mut cfg = SyncConfig::new(backend);
        cfg.bucket_bytes = bucket_bytes;
        cfg.buckets_in_flight = 2;
        cfg.gpu_ids = vec![4, 5, 6, 7];
        let sync = GradientSynchronizer::with_communicator(cfg, comm).unwrap();
        let (r, n) = (sync.rank(), sync.world_size());
        let mut grads: Vec<Vec<f32>> = LENS
            .iter()
            .enumerate()
            .map(|(g, &len)| (0..len).map(|i| value(r, g, i)).collect())
            .collect();
        let mut halves: Vec<Vec<BF16>> = grads
            .iter()
            .map(|g| g.iter().map(|&v| BF16::from_f32(v)).collect())
            .collect();
        sync.synchronize_gradients(&mut grads).unwrap();
        sync.synchronize_gradients(&mut halves).unwrap();
        let mean = (n - 1) as f32 / 2.0;
        for (g, grad) in grads.iter().enumerate() {
            for (i, &v) in grad.iter().enumerate() {
                let want = mean + ((g + i) % 5) as f32;
                assert_eq!(v, want, "{} rank {} grad {} [{}]", backend, r, g, i);
                assert_eq!(halves[g][i].to_f32(), want, "bf16 grad {} [{}]", g, i);
            }
        }
        assert_eq!(sync.is_primary(), r == 0);
        assert!(sync.is_distributed());
        assert_eq!(sync.device_id(), Some(4 + sync.local_rank()));
        sync.barrier().unwrap();
    });
}

#[test]
fn cpu_staging_averages_in_waves_of_small_buckets() {
    let ring = Ring::start(2);
    check_average(&ring, 2, SyncBackend::CpuStaging, 64 << 10);
}

#[test]
fn cpu_staging_averages_with_default_buckets() {
    let ring = Ring::start(2);
    check_average(
        &ring,
        1,
        SyncBackend::CpuStaging,
        ringd::sync::DEFAULT_BUCKET_BYTES,
    );
}

#[test]
fn ring_backend_averages_in_place() {
    let ring = Ring::start(1);
    check_average(
        &ring,
        3,
        SyncBackend::Ring,
        ringd::sync::DEFAULT_BUCKET_BYTES,
    );
}

#[test]
fn gpu_ids_must_cover_the_local_rank() {
    let ring = Ring::start(1);
    ring.run(2, |comm| {
        let mut cfg = SyncConfig::new(SyncBackend::CpuStaging);
        cfg.gpu_ids = vec![0];
        let local = comm.local_rank();
        let outcome = GradientSynchronizer::with_communicator(cfg, comm);
        assert_eq!(outcome.is_err(), local == 1);
    });
}

/// A program that opened its communicator and then asks the synchroniser to
/// open one too (the same job and local rank, from the same options or the
/// same environment) is told to hand it the open one.
#[test]
fn a_second_attach_of_this_process_points_at_with_communicator() {
    let ring = Ring::start(1);
    let opts = ring.options(0, 0, 1, &common::job_name());
    let comm = ringd::Communicator::open(&opts).unwrap();
    let mut cfg = SyncConfig::new(SyncBackend::CpuStaging);
    cfg.options = opts;
    let e = GradientSynchronizer::new(cfg.clone()).unwrap_err();
    assert_eq!(e.code(), ringd::ErrorCode::Invalid, "{}", e);
    let text = e.to_string();
    assert!(
        text.contains("with_communicator"),
        "the remedy is not named: {}",
        text
    );
    assert!(text.contains("this process"), "{}", text);
    assert!(text.contains(&std::process::id().to_string()), "{}", text);
    // The remedy works.
    let sync = GradientSynchronizer::with_communicator(cfg, comm).unwrap();
    assert_eq!(sync.world_size(), 1);
    sync.barrier().unwrap();
}
