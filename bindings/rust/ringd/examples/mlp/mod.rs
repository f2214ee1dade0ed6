//! A two-layer perceptron written with plain slices, for examples/train.rs and
//! the test that compares one process with four ranks: y = W2 relu(W1 x + b1) + b2,
//! mean squared error against a fixed random "teacher" network's outputs, plain
//! SGD.  Every rank builds the same global batch of a step from the step's seed
//! and takes its own rows, so the data-parallel gradient (the average of the
//! ranks' shard means) is the full batch's mean gradient.
#![allow(dead_code)]
use ringd::sync::GradientSynchronizer;
use ringd::Result;

pub const INPUTS: usize = 16;
pub const HIDDEN: usize = 32;
pub const OUTPUTS: usize = 4;

/// splitmix64: the same numbers on every rank and every run.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1).
    pub fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    pub fn fill(&mut self, v: &mut [f32], scale: f32) {
        v.iter_mut().for_each(|x| *x = self.uniform() * scale);
    }
}

/// The parameters, each a flat row-major slice; the gradients have the same
/// shapes, in the same order (what synchronize_gradients averages).
#[derive(Clone, Debug, PartialEq)]
pub struct Mlp {
    pub params: Vec<Vec<f32>>, // w1 [HIDDEN x INPUTS], b1 [HIDDEN], w2 [OUTPUTS x HIDDEN], b2 [OUTPUTS]
}

fn zeros_like(v: &[Vec<f32>]) -> Vec<Vec<f32>> {
    v.iter().map(|p| vec![0.0; p.len()]).collect()
}

/// out = W x + b for one sample.
fn affine(w: &[f32], b: &[f32], x: &[f32], out: &mut [f32]) {
    for (o, (row, bias)) in out.iter_mut().zip(w.chunks(x.len()).zip(b)) {
        *o = bias + row.iter().zip(x).map(|(a, b)| a * b).sum::<f32>();
    }
}

impl Mlp {
    pub fn new(seed: u64) -> Mlp {
        let mut rng = Rng::new(seed);
        let mut params = vec![
            vec![0.0; HIDDEN * INPUTS],
            vec![0.0; HIDDEN],
            vec![0.0; OUTPUTS * HIDDEN],
            vec![0.0; OUTPUTS],
        ];
        rng.fill(&mut params[0], (1.0 / INPUTS as f32).sqrt());
        rng.fill(&mut params[2], (1.0 / HIDDEN as f32).sqrt());
        Mlp { params }
    }

    /// The forward pass of one sample: (hidden activations, outputs).
    fn forward(&self, x: &[f32]) -> ([f32; HIDDEN], [f32; OUTPUTS]) {
        let mut h = [0.0; HIDDEN];
        let mut y = [0.0; OUTPUTS];
        affine(&self.params[0], &self.params[1], x, &mut h);
        h.iter_mut().for_each(|v| *v = v.max(0.0));
        affine(&self.params[2], &self.params[3], &h, &mut y);
        (h, y)
    }

    /// Mean loss over the rows of xs (targets ts) and its gradient.
    pub fn loss_and_grad(&self, xs: &[f32], ts: &[f32]) -> (f32, Vec<Vec<f32>>) {
        let rows = xs.len() / INPUTS;
        let mut grads = zeros_like(&self.params);
        let mut loss = 0.0;
        for (x, t) in xs.chunks(INPUTS).zip(ts.chunks(OUTPUTS)) {
            let (h, y) = self.forward(x);
            let dy: Vec<f32> = y.iter().zip(t).map(|(a, b)| a - b).collect();
            loss += 0.5 * dy.iter().map(|d| d * d).sum::<f32>();
            self.backward(x, &h, &dy, &mut grads);
        }
        let scale = 1.0 / rows as f32;
        grads.iter_mut().flatten().for_each(|g| *g *= scale);
        (loss * scale, grads)
    }

    /// Adds one sample's gradient (dy = dloss/dy) to grads.
    fn backward(&self, x: &[f32], h: &[f32], dy: &[f32], grads: &mut [Vec<f32>]) {
        let w2 = &self.params[2];
        let mut dh = [0.0f32; HIDDEN];
        for (o, &d) in dy.iter().enumerate() {
            grads[3][o] += d;
            for j in 0..HIDDEN {
                grads[2][o * HIDDEN + j] += d * h[j];
                dh[j] += d * w2[o * HIDDEN + j];
            }
        }
        for j in 0..HIDDEN {
            let d = if h[j] > 0.0 { dh[j] } else { 0.0 };
            grads[1][j] += d;
            for (i, &xi) in x.iter().enumerate() {
                grads[0][j * INPUTS + i] += d * xi;
            }
        }
    }

    pub fn sgd(&mut self, grads: &[Vec<f32>], lr: f32) {
        for (p, g) in self.params.iter_mut().zip(grads) {
            p.iter_mut().zip(g).for_each(|(p, g)| *p -= lr * g);
        }
    }
}

/// Step `step`'s global batch: inputs and the teacher's outputs.
pub fn batch(teacher: &Mlp, step: usize, rows: usize) -> (Vec<f32>, Vec<f32>) {
    let mut rng = Rng::new(1000 + step as u64);
    let mut xs = vec![0.0; rows * INPUTS];
    rng.fill(&mut xs, 1.0);
    let ts = xs
        .chunks(INPUTS)
        .flat_map(|x| teacher.forward(x).1)
        .collect();
    (xs, ts)
}

/// Trains for `steps` on global batches of `rows`, this rank taking its share
/// of every batch; calls `report(step, loss, seconds)` with the global loss.
pub fn train(
    sync: &GradientSynchronizer,
    steps: usize,
    rows: usize,
    lr: f32,
    mut report: impl FnMut(usize, f32, f64),
) -> Result<Mlp> {
    let (rank, world) = (sync.rank(), sync.world_size());
    assert!(
        rows % world == 0,
        "the global batch must split evenly over the ranks"
    );
    let teacher = Mlp::new(7);
    let mut model = Mlp::new(42);
    let share = rows / world;
    for step in 0..steps {
        let t0 = std::time::Instant::now();
        let (xs, ts) = batch(&teacher, step, rows);
        let mine = rank * share..(rank + 1) * share;
        let (loss, mut grads) = model.loss_and_grad(
            &xs[mine.start * INPUTS..mine.end * INPUTS],
            &ts[mine.start * OUTPUTS..mine.end * OUTPUTS],
        );
        sync.synchronize_gradients(&mut grads)?;
        model.sgd(&grads, lr);
        // Equal shares: the global loss is the mean of the ranks' losses.
        let mut global = [vec![loss]];
        sync.synchronize_gradients(&mut global)?;
        report(step, global[0][0], t0.elapsed().as_secs_f64());
    }
    Ok(model)
}
