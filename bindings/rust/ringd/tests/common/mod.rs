//! What the integration tests share: a ring of real daemons started with
//! scripts/ring-local (stopped on drop, also when a test panics), and a job of
//! several ranks run as threads of this process, each opening its own
//! communicator on its daemon through `Options` (libring reads the
//! environment only for what the options leave unset).
#![allow(dead_code)]
use ringd::{Communicator, Options};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Every wait of a test is bounded by libring's operation timeout.
pub const TIMEOUT_MS: u32 = 15_000;

fn tree_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

/// A ring of daemons on loopback, in a private directory.
pub struct Ring {
    dir: String,
    sockets: Vec<PathBuf>,
    vars: Vec<(String, String)>,
}

impl Ring {
    /// Starts `n` daemons and waits until the ring is ready (ring-local's bound).
    pub fn start(n: usize) -> Ring {
        let script = tree_root().join("scripts/ring-local");
        let out = Command::new(&script)
            .arg(n.to_string())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {}", script.display(), e));
        assert!(
            out.status.success(),
            "ring-local {} failed: {}",
            n,
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let var = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{}=", name)))
                .map(|v| v.trim_matches('\'').to_string())
                .unwrap_or_else(|| panic!("ring-local printed no {}: {}", name, text))
        };
        let dir = var("RING_LOCAL_DIR");
        let sockets = (0..n)
            .map(|i| PathBuf::from(var(&format!("RING_SOCKET_{}", i))))
            .collect();
        let vars = text
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.trim_matches('\'').to_string()))
            .collect();
        Ring { dir, sockets, vars }
    }

    /// The environment ring-local printed (RING_LOCAL_DIR, RING_HOSTS,
    /// RING_SOCKET_I, ...), for child processes.
    pub fn vars(&self) -> &[(String, String)] {
        &self.vars
    }

    /// The client socket of daemon `i`.
    pub fn socket(&self, i: usize) -> &Path {
        &self.sockets[i]
    }

    pub fn daemons(&self) -> usize {
        self.sockets.len()
    }

    /// The options of local rank `local` of `per` on daemon `d` in job `job`.
    pub fn options(&self, d: usize, local: usize, per: usize, job: &str) -> Options {
        Options::new()
            .socket(self.socket(d))
            .job(job)
            .local(local, per)
            .timeout_ms(TIMEOUT_MS)
            .arena_bytes(256 << 20)
    }

    /// Runs `f` on every rank of a job of `per` processes on each daemon, as
    /// threads; returns the results in rank order.
    pub fn run<R, F>(&self, per: usize, f: F) -> Vec<R>
    where
        R: Send,
        F: Fn(Communicator) -> R + Sync,
    {
        self.run_with(per, |o| o, f)
    }

    /// As [`run`](Self::run), each rank's options changed by `more` first.
    pub fn run_with<R, F, O>(&self, per: usize, more: O, f: F) -> Vec<R>
    where
        R: Send,
        F: Fn(Communicator) -> R + Sync,
        O: Fn(Options) -> Options + Sync,
    {
        let job = job_name();
        let mut out: Vec<(usize, R)> = std::thread::scope(|s| {
            // Every rank must be running before the first is joined (a lazy
            // iterator would start and join them one by one: a deadlock).
            #[allow(clippy::needless_collect)]
            let handles: Vec<_> = (0..self.daemons() * per)
                .map(|i| {
                    let (f, job) = (&f, &job);
                    let opts = more(self.options(i / per, i % per, per, job));
                    s.spawn(move || {
                        let comm = Communicator::open(&opts)
                            .unwrap_or_else(|e| panic!("open of rank {}: {}", i, e));
                        assert_eq!(comm.size(), self.daemons() * per);
                        let rank = comm.rank();
                        (rank, f(comm))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        out.sort_by_key(|(rank, _)| *rank);
        out.into_iter().map(|(_, r)| r).collect()
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        let _ = Command::new(tree_root().join("scripts/ring-local"))
            .arg("stop")
            .arg(&self.dir)
            .output();
    }
}

/// A job name no other test of this run uses.
pub fn job_name() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!(
        "rs{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The shapes of world the tests cover: (daemons, processes per daemon).
pub const WORLDS: &[(usize, usize)] = &[(1, 1), (2, 1), (1, 3), (2, 2)];

/// Element types the tests can fill from small integers and compare.
pub trait Val: ringd::Element + PartialEq + std::fmt::Debug {
    fn of(i: i64) -> Self;
    fn as_f64(self) -> f64;
}

macro_rules! val_int {
    ($($t:ty),*) => {$(
        impl Val for $t {
            fn of(i: i64) -> Self { i as $t }
            fn as_f64(self) -> f64 { self as f64 }
        }
    )*};
}
val_int!(i8, u8, i16, u16, i32, u32, i64, u64, f32, f64);

impl Val for bool {
    fn of(i: i64) -> Self {
        i != 0
    }
    fn as_f64(self) -> f64 {
        self as u8 as f64
    }
}

impl Val for ringd::F16 {
    fn of(i: i64) -> Self {
        ringd::F16::from_f32(i as f32)
    }
    fn as_f64(self) -> f64 {
        self.to_f32() as f64
    }
}

impl Val for ringd::BF16 {
    fn of(i: i64) -> Self {
        ringd::BF16::from_f32(i as f32)
    }
    fn as_f64(self) -> f64 {
        self.to_f32() as f64
    }
}

/// Calls `$f::<T>($args)` for every element type.
#[macro_export]
macro_rules! for_each_dtype {
    ($f:ident ( $($arg:expr),* )) => {{
        $f::<bool>($($arg),*);
        $f::<i8>($($arg),*);
        $f::<u8>($($arg),*);
        $f::<i16>($($arg),*);
        $f::<u16>($($arg),*);
        $f::<i32>($($arg),*);
        $f::<u32>($($arg),*);
        $f::<i64>($($arg),*);
        $f::<u64>($($arg),*);
        $f::<ringd::F16>($($arg),*);
        $f::<ringd::BF16>($($arg),*);
        $f::<f32>($($arg),*);
        $f::<f64>($($arg),*);
    }};
}

/// A small value of rank r at index i: 0..=28, so a sum over 4 ranks fits i8.
pub fn small(r: usize, i: usize) -> i64 {
    ((r * 7 + i * 3) % 29) as i64
}
