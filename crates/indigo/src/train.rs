//! Supervised training of the policy on labelled episodes: the "train" of each DAgger
//! iteration ([`crate::dagger`]).
//!
//! An episode is one flow's decisions in order: the features the policy saw and the oracle's
//! action for each. Training unrolls the LSTM over whole episodes as the scheme does at run
//! time (the state carried from decision to decision), a batch of episodes side by side,
//! cut into windows of [`TrainConfig::window`] decisions for back-propagation (truncated
//! BPTT: the state passes from one window to the next, its gradient does not). The loss is the
//! cross-entropy of the softmax against the oracle's action; the optimiser AdamW.

use candle::{Device, Tensor};
use candle_nn::{AdamW, Optimizer, ParamsAdamW};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

use crate::policy::{argmax, Policy, PolicyError};
use crate::state::{Action, ACTIONS, FEATURES};

/// One decision of an episode: what the policy saw, what the oracle says it should have done.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// The state vector's features ([`crate::state::State::features`]).
    pub features: [f32; FEATURES],
    /// The oracle's action.
    pub label: Action,
}

/// How to train.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrainConfig {
    /// Passes over the data.
    pub epochs: usize,
    /// Episodes side by side in a batch (cut to the shortest of them).
    pub batch: usize,
    /// Decisions per back-propagation window.
    pub window: usize,
    /// AdamW's learning rate.
    pub learning_rate: f64,
    /// The seed of the batches' order.
    pub seed: u64,
}

impl Default for TrainConfig {
    /// 20 epochs, batches of 8 episodes, windows of 32 decisions, learning rate 0.01.
    fn default() -> TrainConfig {
        TrainConfig {
            epochs: 20,
            batch: 8,
            window: 32,
            learning_rate: 0.01,
            seed: 1,
        }
    }
}

/// What an epoch ended with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EpochStats {
    /// The epoch, from 1.
    pub epoch: usize,
    /// Mean cross-entropy over its windows.
    pub loss: f64,
}

/// Trains `policy` on `episodes` (empty ones ignored); `progress` is told each epoch's loss.
/// Returns the last epoch's.
pub fn train(
    policy: &Policy,
    episodes: &[Vec<Sample>],
    config: &TrainConfig,
    progress: &mut dyn FnMut(EpochStats),
) -> Result<EpochStats, PolicyError> {
    let err = |source, what: &str| PolicyError::Candle {
        context: format!("training: {what}"),
        source,
    };
    let params = ParamsAdamW {
        lr: config.learning_rate,
        ..ParamsAdamW::default()
    };
    let mut opt =
        AdamW::new(policy.vars().all_vars(), params).map_err(|e| err(e, "the optimiser"))?;
    let mut order: Vec<usize> = (0..episodes.len())
        .filter(|&i| !episodes[i].is_empty())
        .collect();
    let mut rng = SmallRng::seed_from_u64(config.seed);
    let mut last = EpochStats {
        epoch: 0,
        loss: f64::NAN,
    };
    for epoch in 1..=config.epochs {
        order.shuffle(&mut rng);
        let (mut sum, mut n) = (0.0, 0usize);
        for group in order.chunks(config.batch.max(1)) {
            let steps = group.iter().map(|&i| episodes[i].len()).min().unwrap_or(0);
            let mut state = policy.zero_state(group.len())?;
            let mut start = 0;
            while start < steps {
                let end = (start + config.window.max(1)).min(steps);
                let (xs, ys) = batch(episodes, group, start, end).map_err(|e| err(e, "a batch"))?;
                let (logits, next) = policy.logits(&xs, &state)?;
                let loss =
                    candle_nn::loss::cross_entropy(&logits, &ys).map_err(|e| err(e, "the loss"))?;
                opt.backward_step(&loss)
                    .map_err(|e| err(e, "a gradient step"))?;
                sum += f64::from(
                    loss.to_scalar::<f32>()
                        .map_err(|e| err(e, "the loss's value"))?,
                );
                n += 1;
                // The state goes on to the next window; its gradient stops here.
                state = candle_nn::rnn::LSTMState::new(next.h.detach(), next.c.detach());
                start = end;
            }
        }
        last = EpochStats {
            epoch,
            loss: sum / n.max(1) as f64,
        };
        progress(last);
    }
    Ok(last)
}

/// Decisions `start..end` of the episodes `group`: inputs `[group, end − start, FEATURES]`
/// and labels `[group · (end − start)]` (batch-major, as [`Policy::logits`] returns).
fn batch(
    episodes: &[Vec<Sample>],
    group: &[usize],
    start: usize,
    end: usize,
) -> candle::Result<(Tensor, Tensor)> {
    let steps = end - start;
    let mut xs = Vec::with_capacity(group.len() * steps * FEATURES);
    let mut ys = Vec::with_capacity(group.len() * steps);
    for &i in group {
        for s in &episodes[i][start..end] {
            xs.extend_from_slice(&s.features);
            ys.push(s.label.index() as u32);
        }
    }
    Ok((
        Tensor::from_vec(xs, (group.len(), steps, FEATURES), &Device::Cpu)?,
        Tensor::from_vec(ys, group.len() * steps, &Device::Cpu)?,
    ))
}

/// The policy's action at every decision of each episode, run as at run time (its LSTM state
/// carried from the episode's first decision, the whole episode in one pass).
pub fn predict(policy: &Policy, episodes: &[Vec<Sample>]) -> Result<Vec<Vec<Action>>, PolicyError> {
    let err = |source| PolicyError::Candle {
        context: "the policy over an episode".into(),
        source,
    };
    let mut out = Vec::with_capacity(episodes.len());
    for e in episodes {
        if e.is_empty() {
            out.push(Vec::new());
            continue;
        }
        let flat: Vec<f32> = e.iter().flat_map(|s| s.features).collect();
        let xs = Tensor::from_vec(flat, (1, e.len(), FEATURES), &Device::Cpu).map_err(err)?;
        let (logits, _) = policy.logits(&xs, &policy.zero_state(1)?)?;
        let rows = logits.to_vec2::<f32>().map_err(err)?;
        out.push(
            rows.iter()
                .map(|row| {
                    let mut p = [0f32; ACTIONS];
                    p.copy_from_slice(row);
                    argmax(&p)
                })
                .collect(),
        );
    }
    Ok(out)
}

/// The share of decisions (0–1) where `actions` ([`predict`]'s) are the oracle's labels of
/// `episodes`; `None` without decisions.
pub fn agreement_with_labels(actions: &[Vec<Action>], episodes: &[Vec<Sample>]) -> Option<f64> {
    let (mut right, mut all) = (0usize, 0usize);
    for (a, e) in actions.iter().zip(episodes) {
        for (a, s) in a.iter().zip(e) {
            right += usize::from(*a == s.label);
            all += 1;
        }
    }
    (all > 0).then(|| right as f64 / all as f64)
}

/// The share of decisions (0–1) where the policy, run over each episode as at run time,
/// picks the oracle's action; `None` without decisions.
pub fn accuracy(policy: &Policy, episodes: &[Vec<Sample>]) -> Result<Option<f64>, PolicyError> {
    Ok(agreement_with_labels(&predict(policy, episodes)?, episodes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::State;

    /// Episodes of a toy rule: halve when the queueing delay is high, add 10 when it is low.
    fn toy(n: usize, len: usize, seed: u64) -> Vec<Vec<Sample>> {
        use rand::Rng;
        let mut rng = SmallRng::seed_from_u64(seed);
        (0..n)
            .map(|_| {
                let mut previous = Action::Keep;
                (0..len)
                    .map(|_| {
                        let delay_ms: f64 = rng.random_range(0.0..100.0);
                        let label = if delay_ms > 50.0 {
                            Action::Halve
                        } else {
                            Action::Plus10
                        };
                        let s = State {
                            delay_ms,
                            delivery_mbps: 10.0,
                            send_mbps: 10.0,
                            cwnd: 50.0,
                            min_rtt_ms: 40.0,
                            previous,
                        };
                        previous = label;
                        Sample {
                            features: s.features(),
                            label,
                        }
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn training_learns_a_toy_rule() {
        let data = toy(32, 64, 1);
        let policy = Policy::new(1).unwrap();
        let before = accuracy(&policy, &data).unwrap().unwrap();
        let mut losses = Vec::new();
        let config = TrainConfig {
            epochs: 30,
            ..TrainConfig::default()
        };
        train(&policy, &data, &config, &mut |s| losses.push(s.loss)).unwrap();
        let after = accuracy(&policy, &toy(4, 64, 2)).unwrap().unwrap();
        assert!(after > 0.9, "accuracy {before:.2} → {after:.2}");
        assert!(after > before);
        assert!(losses.last() < losses.first(), "{losses:?}");
        assert_eq!(accuracy(&policy, &[]).unwrap(), None);
    }
}
