//! The policy: an LSTM of one layer of [`HIDDEN`] units over the state vector, then a linear
//! layer and a softmax over the five [`Action`]s — the paper's network (§6: "a single-layer
//! LSTM with 32 hidden units"), in candle (`candle-core`, `candle-nn`).
//!
//! A model file is safetensors: the LSTM's `lstm.weight_ih_l0` (128 × 10), `lstm.weight_hh_l0`
//! (128 × 32), `lstm.bias_ih_l0`, `lstm.bias_hh_l0` (128), the head's `head.weight` (5 × 32)
//! and `head.bias` (5), f32 — PyTorch's names for an `nn.LSTM` and an `nn.Linear`, so a model
//! can be inspected there too.
//!
//! At decision time the LSTM's state is carried from one decision to the next, as Indigo's
//! sender does, by a [`Frozen`] copy of the weights (plain arrays, no tensors); training
//! ([`crate::train`]) unrolls it over whole episodes the same way, in candle.

use std::path::Path;

use candle::{DType, Device, Module, Tensor};
use candle_nn::rnn::{LSTMConfig, LSTMState, LSTM, RNN};
use candle_nn::{Linear, VarBuilder, VarMap};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::state::{Action, ACTIONS, FEATURES};

/// The LSTM's hidden units (the paper's 32).
pub const HIDDEN: usize = 32;

/// Why a model could not be made, loaded or run.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// candle failed (shapes, a file that is not safetensors, a tensor missing from it).
    #[error("{context}: {source}")]
    Candle {
        /// What was being done, with the file if any.
        context: String,
        /// candle's error.
        source: candle::Error,
    },
}

fn ctx<T>(r: candle::Result<T>, context: impl FnOnce() -> String) -> Result<T, PolicyError> {
    r.map_err(|source| PolicyError::Candle {
        context: context(),
        source,
    })
}

/// The network: its variables (trainable) and the layers over them.
pub struct Policy {
    vars: VarMap,
    lstm: LSTM,
    head: Linear,
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy")
            .field("hidden", &HIDDEN)
            .finish_non_exhaustive()
    }
}

impl Policy {
    /// A fresh network whose weights are drawn from `seed`: every variable uniform in
    /// ±1/√[`HIDDEN`] (PyTorch's initialisation of an LSTM), in the order of the variables'
    /// names, so that the same seed gives the same network.
    pub fn new(seed: u64) -> Result<Policy, PolicyError> {
        let vars = VarMap::new();
        let vb = VarBuilder::from_varmap(&vars, DType::F32, &Device::Cpu);
        let lstm = ctx(
            candle_nn::rnn::lstm(FEATURES, HIDDEN, LSTMConfig::default(), vb.pp("lstm")),
            || "create the LSTM".into(),
        )?;
        let head = ctx(candle_nn::linear(HIDDEN, ACTIONS, vb.pp("head")), || {
            "create the output layer".into()
        })?;
        let bound = 1.0 / (HIDDEN as f32).sqrt();
        let mut rng = SmallRng::seed_from_u64(seed);
        {
            let data = vars.data().lock().expect("the variables' lock");
            let mut names: Vec<&String> = data.keys().collect();
            names.sort();
            for name in names {
                let var = &data[name];
                let shape = var.shape().clone();
                let values: Vec<f32> = (0..shape.elem_count())
                    .map(|_| rng.random_range(-bound..bound))
                    .collect();
                let t = Tensor::from_vec(values, shape, &Device::Cpu);
                ctx(t.and_then(|t| var.set(&t)), || format!("initialise {name}"))?;
            }
        }
        Ok(Policy { vars, lstm, head })
    }

    /// The model in `path` (safetensors, the names of the module docs). Errors name the file:
    /// unreadable, not safetensors, or a tensor missing or of another shape.
    pub fn load(path: &Path) -> Result<Policy, PolicyError> {
        let what = || format!("the Indigo model {}", path.display());
        let bytes = std::fs::read(path).map_err(|e| PolicyError::Candle {
            context: format!("read {}", what()),
            source: e.into(),
        })?;
        Policy::from_bytes(&bytes, &what())
    }

    /// The model in `bytes` (a safetensors file's contents); `what` names it in errors (a
    /// tensor missing or of another shape, not safetensors).
    pub fn from_bytes(bytes: &[u8], what: &str) -> Result<Policy, PolicyError> {
        let p = Policy::new(0)?;
        let tensors = ctx(
            candle::safetensors::load_buffer(bytes, &Device::Cpu),
            || format!("load {what}"),
        )?;
        {
            let vars = p.vars.data().lock().expect("the variables' lock");
            for (name, var) in vars.iter() {
                let t = tensors.get(name).ok_or_else(|| PolicyError::Candle {
                    context: format!("load {what}"),
                    source: candle::Error::Msg(format!("no tensor `{name}`")),
                })?;
                ctx(var.set(t), || format!("load {what}: tensor `{name}`"))?;
            }
        }
        Ok(p)
    }

    /// Writes the model to `path` (safetensors).
    pub fn save(&self, path: &Path) -> Result<(), PolicyError> {
        ctx(self.vars.save(path), || {
            format!("save the Indigo model to {}", path.display())
        })
    }

    /// The trainable variables (for the optimiser).
    pub fn vars(&self) -> &VarMap {
        &self.vars
    }

    /// The LSTM's state before the first decision of a flow (zeros), for `batch` flows.
    pub fn zero_state(&self, batch: usize) -> Result<LSTMState, PolicyError> {
        ctx(self.lstm.zero_state(batch), || {
            "the LSTM's zero state".into()
        })
    }

    /// The network's weights copied out for decisions ([`Frozen`]).
    pub fn freeze(&self) -> Result<Frozen, PolicyError> {
        let data = self.vars.data().lock().expect("the variables' lock");
        let get = |name: &str| -> Result<Vec<f32>, PolicyError> {
            let t = data.get(name).ok_or_else(|| PolicyError::Candle {
                context: "freeze the policy".into(),
                source: candle::Error::Msg(format!("no variable `{name}`")),
            })?;
            ctx(
                t.as_tensor().flatten_all().and_then(|t| t.to_vec1()),
                || format!("freeze the policy: `{name}`"),
            )
        };
        let (b_ih, b_hh) = (get("lstm.bias_ih_l0")?, get("lstm.bias_hh_l0")?);
        Ok(Frozen {
            w_ih: get("lstm.weight_ih_l0")?,
            w_hh: get("lstm.weight_hh_l0")?,
            bias: b_ih.iter().zip(&b_hh).map(|(a, b)| a + b).collect(),
            head_w: get("head.weight")?,
            head_b: get("head.bias")?,
        })
    }

    /// The logits over a batch of sequences: `xs` is `[batch, steps, FEATURES]`, `state` the
    /// LSTM's state before the first step; returns `[batch · steps, ACTIONS]` (batch-major)
    /// and the state after the last step. For training ([`crate::train`]).
    pub fn logits(
        &self,
        xs: &Tensor,
        state: &LSTMState,
    ) -> Result<(Tensor, LSTMState), PolicyError> {
        ctx(
            (|| {
                let (batch, steps, _) = xs.dims3()?;
                let states = self.lstm.seq_init(xs, state)?;
                let last = states.last().cloned().unwrap_or_else(|| state.clone());
                let hs = self.lstm.states_to_tensor(&states)?; // [batch, steps, HIDDEN]
                let logits = self.head.forward(&hs.reshape((batch * steps, HIDDEN))?)?;
                Ok((logits, last))
            })(),
            || "the policy over a batch".into(),
        )
    }
}

/// The policy at decision time: its weights as plain arrays and the LSTM step written out
/// (PyTorch's gate order: input, forget, cell, output), so that a decision is a few thousand
/// multiply-adds with no allocation: 4 µs, about 29× less than a step through candle's
/// tensors, and no graph of past steps kept alive (`cargo bench -p pantheon-indigo --bench
/// inference`; figures in `crates/indigo/models/README.md`). It computes what
/// [`Policy::logits`] computes (a unit test compares them). Serialised, it is what a
/// rollout run elsewhere (a Slurm job step) is given.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Frozen {
    /// `[4·HIDDEN][FEATURES]`, row-major.
    w_ih: Vec<f32>,
    /// `[4·HIDDEN][HIDDEN]`, row-major.
    w_hh: Vec<f32>,
    /// `bias_ih + bias_hh`, `[4·HIDDEN]`.
    bias: Vec<f32>,
    /// `[ACTIONS][HIDDEN]`, row-major.
    head_w: Vec<f32>,
    /// `[ACTIONS]`.
    head_b: Vec<f32>,
}

/// The LSTM's state between two decisions of one flow (zeros before the first).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Memory {
    /// Hidden state.
    pub h: [f32; HIDDEN],
    /// Cell state.
    pub c: [f32; HIDDEN],
}

impl Default for Memory {
    fn default() -> Memory {
        Memory {
            h: [0.0; HIDDEN],
            c: [0.0; HIDDEN],
        }
    }
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

impl Frozen {
    /// One decision: the action probabilities (softmax, in [`Action::ALL`]'s order) for
    /// `features`; `memory` moves on to the next decision's.
    pub fn step(&self, features: &[f32; FEATURES], memory: &mut Memory) -> [f32; ACTIONS] {
        let mut gates = [0f32; 4 * HIDDEN];
        for (g, out) in gates.iter_mut().enumerate() {
            let wi = &self.w_ih[g * FEATURES..(g + 1) * FEATURES];
            let wh = &self.w_hh[g * HIDDEN..(g + 1) * HIDDEN];
            let x: f32 = wi.iter().zip(features).map(|(w, x)| w * x).sum();
            let h: f32 = wh.iter().zip(&memory.h).map(|(w, h)| w * h).sum();
            *out = x + h + self.bias[g];
        }
        for j in 0..HIDDEN {
            let i = sigmoid(gates[j]);
            let f = sigmoid(gates[HIDDEN + j]);
            let g = gates[2 * HIDDEN + j].tanh();
            let o = sigmoid(gates[3 * HIDDEN + j]);
            memory.c[j] = f * memory.c[j] + i * g;
            memory.h[j] = o * memory.c[j].tanh();
        }
        let mut logits = [0f32; ACTIONS];
        for (a, l) in logits.iter_mut().enumerate() {
            let w = &self.head_w[a * HIDDEN..(a + 1) * HIDDEN];
            *l = w.iter().zip(&memory.h).map(|(w, h)| w * h).sum::<f32>() + self.head_b[a];
        }
        let top = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut p = logits.map(|l| (l - top).exp());
        let sum: f32 = p.iter().sum();
        p.iter_mut().for_each(|x| *x /= sum);
        p
    }
}

/// The most probable action of `probs`; of equal ones, the first.
pub fn argmax(probs: &[f32; ACTIONS]) -> Action {
    let mut best = 0;
    for i in 1..ACTIONS {
        if probs[i] > probs[best] {
            best = i;
        }
    }
    Action::from_index(best).expect("an index below ACTIONS")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn features(i: usize) -> [f32; FEATURES] {
        let mut f = [0f32; FEATURES];
        f[0] = (i % 7) as f32 / 7.0;
        f[1] = 0.5;
        f[2] = (i % 3) as f32 / 3.0;
        f[3] = 0.3;
        f[4] = 0.2;
        f[5 + i % ACTIONS] = 1.0;
        f
    }

    fn actions(p: &Policy, n: usize) -> Vec<(Action, [f32; ACTIONS])> {
        let frozen = p.freeze().unwrap();
        let mut memory = Memory::default();
        (0..n)
            .map(|i| {
                let probs = frozen.step(&features(i), &mut memory);
                (argmax(&probs), probs)
            })
            .collect()
    }

    #[test]
    fn a_seed_makes_the_same_network_and_a_saved_model_loads_and_acts_alike() {
        let a = Policy::new(7).unwrap();
        let b = Policy::new(7).unwrap();
        let c = Policy::new(8).unwrap();
        let (ra, rb, rc) = (actions(&a, 50), actions(&b, 50), actions(&c, 50));
        assert_eq!(ra, rb);
        assert_ne!(ra, rc);
        for (_, p) in &ra {
            assert!((p.iter().sum::<f32>() - 1.0).abs() < 1e-5);
        }
        let dir = std::env::temp_dir().join(format!("indigo-model-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("model.safetensors");
        a.save(&file).unwrap();
        let loaded = Policy::load(&file).unwrap();
        assert_eq!(actions(&loaded, 50), ra, "the loaded model acts otherwise");
        // Not a model: the error names the file.
        std::fs::write(dir.join("bad.safetensors"), b"not a model").unwrap();
        let e = Policy::load(&dir.join("bad.safetensors")).unwrap_err();
        assert!(e.to_string().contains("bad.safetensors"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_frozen_policy_step_by_step_gives_what_the_network_gives_over_a_batch() {
        let p = Policy::new(3).unwrap();
        let steps = 12;
        let flat: Vec<f32> = (0..steps).flat_map(features).collect();
        let xs = Tensor::from_vec(flat, (1, steps, FEATURES), &Device::Cpu).unwrap();
        let (logits, _) = p.logits(&xs, &p.zero_state(1).unwrap()).unwrap();
        let probs = candle_nn::ops::softmax_last_dim(&logits)
            .unwrap()
            .to_vec2::<f32>()
            .unwrap();
        for ((_, one), batch) in actions(&p, steps).iter().zip(&probs) {
            for (x, y) in one.iter().zip(batch) {
                assert!((x - y).abs() < 1e-5, "{one:?} vs {batch:?}");
            }
        }
    }
}
