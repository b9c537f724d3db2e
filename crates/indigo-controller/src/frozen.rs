//! The policy at decision time, without an ML crate: the weights of Indigo's network (an LSTM
//! of one layer of [`HIDDEN`] units over the state vector, then a linear layer and a softmax
//! over the five [`Action`]s — the paper's §6) as plain arrays, read from a model file.
//!
//! A model file is safetensors: the LSTM's `lstm.weight_ih_l0` (128 × 10), `lstm.weight_hh_l0`
//! (128 × 32), `lstm.bias_ih_l0`, `lstm.bias_hh_l0` (128), the head's `head.weight` (5 × 32)
//! and `head.bias` (5), f32 — PyTorch's names for an `nn.LSTM` and an `nn.Linear`, the names
//! `pantheon-indigo`'s training writes.

use std::path::Path;

use safetensors::{Dtype, SafeTensors};

use crate::state::{Action, ACTIONS, FEATURES};

/// The LSTM's hidden units (the paper's 32).
pub const HIDDEN: usize = 32;

/// Why a model file could not be read: `what` names it (the file, or the committed model).
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The file could not be read.
    #[error("read {what}: {source}")]
    Read {
        /// The model.
        what: String,
        /// The system's error.
        source: std::io::Error,
    },
    /// Not safetensors, or a tensor missing, of another type or another shape.
    #[error("load {what}: {reason}")]
    Format {
        /// The model.
        what: String,
        /// What is wrong.
        reason: String,
    },
}

/// The policy at decision time: its weights as plain arrays and the LSTM step written out
/// (PyTorch's gate order: input, forget, cell, output), so that a decision is a few thousand
/// multiply-adds with no allocation: 4 µs, about 29× less than a step through candle's
/// tensors, and no graph of past steps kept alive (`cargo bench -p pantheon-indigo --bench
/// inference`; figures in `crates/indigo/models/README.md`). It computes what the candle
/// network of `pantheon-indigo` (`Policy::logits`) computes (a unit test there compares them).
/// Serialised, it is what a rollout run elsewhere (a Slurm job step) is given.
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

impl Frozen {
    /// The policy of the weights given in PyTorch's layout (shapes as the fields': `w_ih`
    /// `[4·HIDDEN][FEATURES]`, `w_hh` `[4·HIDDEN][HIDDEN]`, `bias` the sum of the LSTM's two
    /// biases `[4·HIDDEN]`, `head_w` `[ACTIONS][HIDDEN]`, `head_b` `[ACTIONS]`). `None` if a
    /// length is not its shape's.
    pub fn from_parts(
        w_ih: Vec<f32>,
        w_hh: Vec<f32>,
        bias: Vec<f32>,
        head_w: Vec<f32>,
        head_b: Vec<f32>,
    ) -> Option<Frozen> {
        let sizes = [
            (w_ih.len(), 4 * HIDDEN * FEATURES),
            (w_hh.len(), 4 * HIDDEN * HIDDEN),
            (bias.len(), 4 * HIDDEN),
            (head_w.len(), ACTIONS * HIDDEN),
            (head_b.len(), ACTIONS),
        ];
        sizes.iter().all(|(n, want)| n == want).then_some(Frozen {
            w_ih,
            w_hh,
            bias,
            head_w,
            head_b,
        })
    }

    /// The model file `path` (safetensors, the names of the module docs). Errors name the file.
    pub fn load(path: &Path) -> Result<Frozen, ModelError> {
        let what = format!("the Indigo model {}", path.display());
        let bytes = std::fs::read(path).map_err(|source| ModelError::Read {
            what: what.clone(),
            source,
        })?;
        Frozen::from_safetensors(&bytes, &what)
    }

    /// The model in `bytes` (a safetensors file's contents); `what` names it in errors: not
    /// safetensors, a tensor missing, not f32, or of another shape than the module docs give.
    pub fn from_safetensors(bytes: &[u8], what: &str) -> Result<Frozen, ModelError> {
        let bad = |reason: String| ModelError::Format {
            what: what.to_owned(),
            reason,
        };
        let file = SafeTensors::deserialize(bytes).map_err(|e| bad(e.to_string()))?;
        let get = |name: &str, shape: &[usize]| -> Result<Vec<f32>, ModelError> {
            let t = file
                .tensor(name)
                .map_err(|_| bad(format!("no tensor `{name}`")))?;
            if t.dtype() != Dtype::F32 || t.shape() != shape {
                return Err(bad(format!(
                    "tensor `{name}` is {:?} {:?}, expected F32 {shape:?}",
                    t.dtype(),
                    t.shape()
                )));
            }
            Ok(t.data()
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect())
        };
        let (b_ih, b_hh) = (
            get("lstm.bias_ih_l0", &[4 * HIDDEN])?,
            get("lstm.bias_hh_l0", &[4 * HIDDEN])?,
        );
        Ok(Frozen {
            w_ih: get("lstm.weight_ih_l0", &[4 * HIDDEN, FEATURES])?,
            w_hh: get("lstm.weight_hh_l0", &[4 * HIDDEN, HIDDEN])?,
            bias: b_ih.iter().zip(&b_hh).map(|(a, b)| a + b).collect(),
            head_w: get("head.weight", &[ACTIONS, HIDDEN])?,
            head_b: get("head.bias", &[ACTIONS])?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_that_is_not_a_model_is_named_with_the_reason() {
        let e = Frozen::from_safetensors(b"not a model", "the model m.safetensors").unwrap_err();
        assert!(
            e.to_string().starts_with("load the model m.safetensors: "),
            "{e}"
        );
        let e = Frozen::load(Path::new("/nonexistent/m.safetensors")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/m.safetensors"), "{e}");
        assert!(Frozen::from_parts(vec![0.0; 3], vec![], vec![], vec![], vec![]).is_none());
    }

    #[test]
    fn zero_weights_give_equal_probabilities_and_the_first_action() {
        let f = Frozen::from_parts(
            vec![0.0; 4 * HIDDEN * FEATURES],
            vec![0.0; 4 * HIDDEN * HIDDEN],
            vec![0.0; 4 * HIDDEN],
            vec![0.0; ACTIONS * HIDDEN],
            vec![0.0; ACTIONS],
        )
        .unwrap();
        let p = f.step(&[1.0; FEATURES], &mut Memory::default());
        assert!(
            p.iter().all(|x| (x - 1.0 / ACTIONS as f32).abs() < 1e-6),
            "{p:?}"
        );
        assert_eq!(argmax(&p), Action::ALL[0]);
    }
}
