//! examples/train.rs' model trained by one process and by four ranks on the
//! same global batches: the losses agree to 1e-5 relative, whether the ranks
//! are threads of this test (both distributed backends) or processes started
//! by the example itself from ring-local's environment.
mod common;
#[path = "../examples/mlp/mod.rs"]
mod mlp;

use common::Ring;
use ringd::sync::{GradientSynchronizer, SyncBackend, SyncConfig};
use std::path::PathBuf;
use std::process::Command;

const STEPS: usize = 20;
const ROWS: usize = 64;
const LR: f32 = 0.5;

fn losses(sync: &GradientSynchronizer) -> Vec<f32> {
    let mut out = Vec::new();
    mlp::train(sync, STEPS, ROWS, LR, |_, loss, _| out.push(loss)).unwrap();
    out
}

fn single_losses() -> Vec<f32> {
    losses(&GradientSynchronizer::new(SyncConfig::new(SyncBackend::Single)).unwrap())
}

fn assert_close(one: &[f32], many: &[f32], what: &str) {
    assert_eq!(one.len(), many.len(), "{}: steps", what);
    for (step, (a, b)) in one.iter().zip(many).enumerate() {
        let rel = ((a - b) / a).abs();
        assert!(
            rel <= 1e-5,
            "{} step {}: {} vs {} (relative {:e})",
            what,
            step,
            a,
            b,
            rel
        );
    }
    assert!(
        one[STEPS - 1] < 0.5 * one[0],
        "the model does not learn: {:?}",
        one
    );
}

#[test]
fn four_ranks_match_one_process() {
    let one = single_losses();
    let ring = Ring::start(2);
    for backend in [SyncBackend::CpuStaging, SyncBackend::Ring] {
        let per_rank = ring.run(2, |comm| {
            let sync =
                GradientSynchronizer::with_communicator(SyncConfig::new(backend), comm).unwrap();
            losses(&sync)
        });
        for (rank, l) in per_rank.iter().enumerate() {
            assert_close(&one, l, &format!("{} rank {}", backend, rank));
        }
    }
}

/// The example binary beside this test's (cargo test builds the examples).
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples")
        .join(name);
    assert!(
        path.exists(),
        "{} is not built: run `cargo test` without a target filter",
        path.display()
    );
    path
}

#[test]
fn the_example_as_four_processes_matches_one() {
    let one = single_losses();
    let ring = Ring::start(2);
    let out = Command::new(example("train"))
        .args([
            "--ranks",
            "4",
            "--steps",
            &STEPS.to_string(),
            "--rows",
            &ROWS.to_string(),
        ])
        .args(["--lr", &LR.to_string()])
        .envs(ring.vars().iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env_remove("RING_SOCKET")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "train failed: {}{}",
        text,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("training on 4 rank(s), backend cpu"),
        "{}",
        text
    );
    let many: Vec<f32> = text
        .lines()
        .filter_map(|l| l.split("loss").nth(1))
        .map(|v| v.split_whitespace().next().unwrap().parse().unwrap())
        .collect();
    assert_close(&one, &many, "4 processes");
}

#[test]
fn the_example_alone_with_ring_single_is_a_size_1_group() {
    let one = single_losses();
    let out = Command::new(example("train"))
        .args([
            "--backend",
            "cpu",
            "--steps",
            &STEPS.to_string(),
            "--rows",
            &ROWS.to_string(),
        ])
        .args(["--lr", &LR.to_string()])
        .env("RING_SINGLE", "1")
        .env_remove("RING_SOCKET")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "train failed: {}{}",
        text,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("training on 1 rank(s), backend cpu"),
        "{}",
        text
    );
    let alone: Vec<f32> = text
        .lines()
        .filter_map(|l| l.split("loss").nth(1))
        .map(|v| v.split_whitespace().next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(one, alone);
}
