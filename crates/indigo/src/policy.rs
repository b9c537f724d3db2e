//! The policy: an LSTM of one layer of [`HIDDEN`] units over the state vector, then a linear
//! layer and a softmax over the five [`crate::state::Action`]s — the paper's network (§6: "a single-layer
//! LSTM with 32 hidden units"), in candle (`candle-core`, `candle-nn`).
//!
//! A model file is safetensors: the LSTM's `lstm.weight_ih_l0` (128 × 10), `lstm.weight_hh_l0`
//! (128 × 32), `lstm.bias_ih_l0`, `lstm.bias_hh_l0` (128), the head's `head.weight` (5 × 32)
//! and `head.bias` (5), f32 — PyTorch's names for an `nn.LSTM` and an `nn.Linear`, so a model
//! can be inspected there too.
//!
//! At decision time the LSTM's state is carried from one decision to the next, as Indigo's
//! sender does, by a [`Frozen`] copy of the weights (plain arrays, no tensors:
//! `indigo_controller::frozen`, re-exported here); training ([`crate::train`]) unrolls it over
//! whole episodes the same way, in candle.

use std::path::Path;

use candle::{DType, Device, Module, Tensor};
use candle_nn::rnn::{LSTMConfig, LSTMState, LSTM, RNN};
use candle_nn::{Linear, VarBuilder, VarMap};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::state::{ACTIONS, FEATURES};
pub use indigo_controller::frozen::{argmax, Frozen, Memory, HIDDEN};

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
        Frozen::from_parts(
            get("lstm.weight_ih_l0")?,
            get("lstm.weight_hh_l0")?,
            b_ih.iter().zip(&b_hh).map(|(a, b)| a + b).collect(),
            get("head.weight")?,
            get("head.bias")?,
        )
        .ok_or_else(|| PolicyError::Candle {
            context: "freeze the policy".into(),
            source: candle::Error::Msg("a tensor of another shape".into()),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Action;

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
