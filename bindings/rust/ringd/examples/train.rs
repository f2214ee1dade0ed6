//! train - a two-layer perceptron trained data-parallel on ringd, with the
//! gradient synchroniser; rank 0 prints the loss and the time of every step.
//!
//!     eval "$(scripts/ring-local 2)"
//!     build/rust/release/examples/train --ranks 4     # 2 ranks on each daemon
//!     build/rust/release/examples/train --backend single
//!
//! Options: --steps N (20), --rows R (global batch, 64), --lr X (0.5),
//! --backend single|cpu|ring (cpu; single when RING_SOCKET is unset),
//! --ranks N: start N ranks as child processes of this program on the daemons
//! that ring-local announced (RING_SOCKET_0.., N / RING_HOSTS on each).
//! Without --ranks this process is one rank of what the environment says
//! (RING_SOCKET, RING_JOB, RING_LOCAL_RANK/SIZE or a launcher's variables).
//! The losses of one process and of any number of ranks on the same global
//! batch agree (tests/train.rs checks 1 against 4 to 1e-5).
mod mlp;

use ringd::sync::{GradientSynchronizer, SyncBackend, SyncConfig};
use std::process::{Child, Command, ExitCode};
use std::time::{Duration, Instant};

struct Args {
    steps: usize,
    rows: usize,
    lr: f32,
    backend: Option<String>,
    ranks: Option<usize>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        steps: 20,
        rows: 64,
        lr: 0.5,
        backend: None,
        ranks: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{} needs a value", flag));
        let num = |v: String| {
            v.parse::<usize>()
                .map_err(|_| format!("{}: not a number", v))
        };
        match flag.as_str() {
            "--steps" => a.steps = num(value()?)?,
            "--rows" => a.rows = num(value()?)?,
            "--lr" => {
                a.lr = value()?
                    .parse()
                    .map_err(|_| "--lr: not a number".to_string())?
            }
            "--backend" => a.backend = Some(value()?),
            "--ranks" => a.ranks = Some(num(value()?)?),
            _ => {
                return Err(format!(
                    "unknown option {} (see the top of examples/train.rs)",
                    flag
                ))
            }
        }
    }
    Ok(a)
}

/// One rank: opens the synchroniser from the environment and trains.
fn run_rank(a: &Args) -> ringd::Result<()> {
    let default = if std::env::var_os("RING_SOCKET").is_some() {
        "cpu"
    } else {
        "single"
    };
    let backend: SyncBackend = a.backend.as_deref().unwrap_or(default).parse()?;
    let sync = GradientSynchronizer::new(SyncConfig::new(backend))?;
    if sync.is_primary() {
        println!(
            "training on {} rank(s), backend {}, global batch {}",
            sync.world_size(),
            backend,
            a.rows
        );
    }
    let mut total = 0.0;
    let model = mlp::train(&sync, a.steps, a.rows, a.lr, |step, loss, secs| {
        total += secs;
        if sync.is_primary() {
            println!(
                "step {:3}  loss {:.7e}  time {:.3} ms",
                step,
                loss,
                secs * 1e3
            );
        }
    })?;
    sync.barrier()?;
    if sync.is_primary() {
        let n: usize = model.params.iter().map(Vec::len).sum();
        println!(
            "done: {} parameters, {:.3} ms per step",
            n,
            total * 1e3 / a.steps.max(1) as f64
        );
    }
    Ok(())
}

/// Starts `ranks` children of this program, spread over the announced daemons.
fn launch(ranks: usize, a: &Args) -> Result<(), String> {
    let hosts: usize = std::env::var("RING_HOSTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .ok_or("--ranks needs the environment of scripts/ring-local (RING_HOSTS, RING_SOCKET_I)")?;
    if ranks == 0 || ranks % hosts != 0 {
        return Err(format!(
            "--ranks {} does not split over {} daemons",
            ranks, hosts
        ));
    }
    let per = ranks / hosts;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let job = format!("train-{}", std::process::id());
    let mut children: Vec<Child> = Vec::new();
    for i in 0..ranks {
        let socket = std::env::var(format!("RING_SOCKET_{}", i / per))
            .map_err(|_| format!("RING_SOCKET_{} is not set", i / per))?;
        let mut cmd = Command::new(&exe);
        cmd.args([
            "--steps",
            &a.steps.to_string(),
            "--rows",
            &a.rows.to_string(),
        ])
        .args(["--lr", &a.lr.to_string()])
        .args(["--backend", a.backend.as_deref().unwrap_or("cpu")])
        .env("RING_SOCKET", socket)
        .env("RING_JOB", &job)
        .env("RING_LOCAL_RANK", (i % per).to_string())
        .env("RING_LOCAL_SIZE", per.to_string());
        children.push(
            cmd.spawn()
                .map_err(|e| format!("cannot start rank {}: {}", i, e))?,
        );
    }
    wait_children(children, Duration::from_secs(120))
}

/// Waits for every child within the bound; kills the rest when one overruns.
fn wait_children(mut children: Vec<Child>, bound: Duration) -> Result<(), String> {
    let deadline = Instant::now() + bound;
    let mut failed = Vec::new();
    for (i, child) in children.iter_mut().enumerate() {
        loop {
            match child.try_wait().map_err(|e| e.to_string())? {
                Some(status) if status.success() => break,
                Some(status) => {
                    failed.push(format!("rank {}: {}", i, status));
                    break;
                }
                None if Instant::now() > deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    failed.push(format!("rank {}: killed after {:?}", i, bound));
                    break;
                }
                None => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed.join(", "))
    }
}

fn main() -> ExitCode {
    let outcome = parse_args().and_then(|a| match a.ranks {
        Some(n) => launch(n, &a),
        None => run_rank(&a).map_err(|e| e.to_string()),
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("train: {}", e);
            ExitCode::FAILURE
        }
    }
}
