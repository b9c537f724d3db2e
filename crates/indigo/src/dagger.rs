//! DAgger (Ross et al., 2011), as Indigo trains: roll the current policy out on every training
//! emulator, label every state it visited with the oracle's action, add them to everything
//! gathered so far, train on the whole, and repeat until the policy stops changing.
//!
//! Iteration 1 rolls out the oracle itself (β = 1: its decisions are followed, the policy only
//! watches), later ones the policy alone (β = 0), DAgger's parameter-free schedule. The
//! rollouts of an iteration are independent simulated runs, `jobs` at a time. Everything is
//! drawn from the seed: the network's initial weights, each rollout's path draws, the order
//! of training batches; a run interrupted after an iteration resumes from its directory
//! ([`Trainer::resume`]) and ends where an uninterrupted one would.
//!
//! The policy "stops changing" when, over the states of the latest rollouts, the newly trained
//! policy picks the action the one before it picked at least [`DaggerConfig::agreement`] of
//! the time.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::policy::{Policy, PolicyError};
use crate::rollout::{rollout, Rollout, TrainingEmulator};
use crate::state::{Action, ACTIONS, FEATURES};
use crate::train::{
    accuracy, agreement_with_labels, predict, train, EpochStats, Sample, TrainConfig,
};

/// How to train.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DaggerConfig {
    /// The most iterations.
    pub max_iterations: usize,
    /// Simulated seconds of each rollout.
    pub rollout_secs: u64,
    /// Rollouts at a time (one core each).
    pub jobs: usize,
    /// The seed of everything ([`crate::dagger`]).
    pub seed: u64,
    /// Training within an iteration.
    pub train: TrainConfig,
    /// Share (0–1) of unchanged actions at which the policy has stopped changing.
    pub agreement: f64,
}

impl Default for DaggerConfig {
    /// Up to 10 iterations of 30-s rollouts, 2 at a time, seed 1, stop at 98 % agreement.
    fn default() -> DaggerConfig {
        DaggerConfig {
            max_iterations: 10,
            rollout_secs: 30,
            jobs: 2,
            seed: 1,
            train: TrainConfig::default(),
            agreement: 0.98,
        }
    }
}

/// What one iteration did (a line of `training.jsonl`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct IterationReport {
    /// The iteration, from 1.
    pub iteration: usize,
    /// The oracle's share of the decisions in its rollouts (β).
    pub beta: f64,
    /// Labelled decisions gathered by this iteration's rollouts.
    pub new_samples: usize,
    /// All labelled decisions trained on.
    pub total_samples: usize,
    /// Accuracy of the policy before training on the new rollouts' states: how often it
    /// picked the oracle's action where its own decisions led (on-policy; iteration 1: on the
    /// oracle's states).
    pub accuracy_before: f64,
    /// Accuracy after training, on everything gathered.
    pub accuracy_after: f64,
    /// The last epoch's mean cross-entropy.
    pub loss: f64,
    /// Share of the new rollouts' states where the trained policy picks what the one before
    /// it picked.
    pub agreement: f64,
    /// Mean over the rollouts of their throughput, Mbit/s.
    pub mean_tput_mbps: f64,
    /// Mean over the rollouts of the p95 one-way delay, ms.
    pub mean_p95_delay_ms: f64,
    /// Wall time of the iteration, s.
    pub wall_s: f64,
}

/// What the caller is told as training goes.
#[derive(Debug, Clone)]
pub enum Progress<'a> {
    /// A rollout finished: (done, of).
    Rollout(usize, usize),
    /// A training epoch finished.
    Epoch(EpochStats),
    /// An iteration finished.
    Iteration(&'a IterationReport),
}

/// Why training failed.
#[derive(Debug, thiserror::Error)]
pub enum DaggerError {
    /// The network.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// A rollout's simulation.
    #[error("rollout over {emulator}: {source}")]
    Rollout {
        /// The emulator's name.
        emulator: String,
        /// The simulator's error.
        source: sim::run::SimError,
    },
    /// The training directory.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A training directory written by another configuration, or damaged.
    #[error("{0}")]
    Resume(String),
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> DaggerError + '_ {
    move |source| DaggerError::Io {
        path: path.to_owned(),
        source,
    }
}

/// A training run and its directory: `model.safetensors` (the latest policy), `dataset.bin`
/// (every labelled decision so far), `training.jsonl` (one [`IterationReport`] per line).
pub struct Trainer {
    dir: PathBuf,
    config: DaggerConfig,
    policy: Arc<Policy>,
    dataset: Vec<Vec<Sample>>,
    reports: Vec<IterationReport>,
}

impl Trainer {
    /// Starts in `dir` (created), or resumes what is there: the model and data of the last
    /// finished iteration.
    pub fn resume(dir: &Path, config: DaggerConfig) -> Result<Trainer, DaggerError> {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let log = dir.join("training.jsonl");
        let mut reports = Vec::new();
        if let Ok(text) = std::fs::read_to_string(&log) {
            for (i, line) in text
                .lines()
                .enumerate()
                .filter(|(_, l)| !l.trim().is_empty())
            {
                reports.push(serde_json::from_str(line).map_err(|e| {
                    DaggerError::Resume(format!("{} line {}: {e}", log.display(), i + 1))
                })?);
            }
        }
        let (policy, dataset) = if reports.is_empty() {
            (Policy::new(config.seed)?, Vec::new())
        } else {
            let model = Policy::load(&dir.join("model.safetensors"))?;
            let data = read_dataset(&dir.join("dataset.bin"))?;
            let expected: usize = reports
                .last()
                .map_or(0, |r: &IterationReport| r.total_samples);
            let got: usize = data.iter().map(Vec::len).sum();
            if got != expected {
                return Err(DaggerError::Resume(format!(
                    "{}: {got} samples where training.jsonl says {expected}; delete the \
                     directory to start over",
                    dir.join("dataset.bin").display()
                )));
            }
            (model, data)
        };
        Ok(Trainer {
            dir: dir.to_owned(),
            config,
            policy: Arc::new(policy),
            dataset,
            reports,
        })
    }

    /// The iterations done so far.
    pub fn reports(&self) -> &[IterationReport] {
        &self.reports
    }

    /// The current policy.
    pub fn policy(&self) -> &Arc<Policy> {
        &self.policy
    }

    /// Whether the last iteration found the policy unchanged, or the iterations are spent.
    pub fn done(&self) -> bool {
        self.reports.len() >= self.config.max_iterations
            || self
                .reports
                .last()
                .is_some_and(|r| r.iteration > 1 && r.agreement >= self.config.agreement)
    }

    /// Runs iterations until [`Trainer::done`]; each is saved before the next starts.
    pub fn run(
        &mut self,
        emulators: &[TrainingEmulator],
        progress: &mut dyn FnMut(Progress),
    ) -> Result<(), DaggerError> {
        while !self.done() {
            self.iterate(emulators, progress)?;
        }
        Ok(())
    }

    /// One iteration: roll out, label, aggregate, train, save.
    pub fn iterate(
        &mut self,
        emulators: &[TrainingEmulator],
        progress: &mut dyn FnMut(Progress),
    ) -> Result<&IterationReport, DaggerError> {
        let started = std::time::Instant::now();
        let iteration = self.reports.len() + 1;
        let beta = if iteration == 1 { 1.0 } else { 0.0 };
        let rollouts = self.rollouts(emulators, iteration, beta, progress)?;
        let episodes: Vec<Vec<Sample>> = rollouts.iter().map(samples).collect();
        let new_samples: usize = episodes.iter().map(Vec::len).sum();
        let before = predict(&self.policy, &episodes)?;
        let accuracy_before = agreement_with_labels(&before, &episodes).unwrap_or(0.0);
        self.dataset.extend(episodes.iter().cloned());
        let train_config = TrainConfig {
            seed: self.config.seed ^ ((iteration as u64) << 32),
            ..self.config.train
        };
        let last = train(&self.policy, &self.dataset, &train_config, &mut |e| {
            progress(Progress::Epoch(e))
        })?;
        let after = predict(&self.policy, &episodes)?;
        let same = before
            .iter()
            .flatten()
            .zip(after.iter().flatten())
            .filter(|(a, b)| a == b)
            .count();
        let n = rollouts.len().max(1) as f64;
        let report = IterationReport {
            iteration,
            beta,
            new_samples,
            total_samples: self.dataset.iter().map(Vec::len).sum(),
            accuracy_before,
            accuracy_after: accuracy(&self.policy, &self.dataset)?.unwrap_or(0.0),
            loss: last.loss,
            agreement: same as f64 / new_samples.max(1) as f64,
            mean_tput_mbps: rollouts.iter().map(|r| r.meter.tput_mbps()).sum::<f64>() / n,
            mean_p95_delay_ms: rollouts
                .iter()
                .filter_map(|r| r.meter.p95_delay_ms())
                .sum::<f64>()
                / n,
            wall_s: started.elapsed().as_secs_f64(),
        };
        self.save(&report)?;
        self.reports.push(report);
        let report = self.reports.last().expect("just pushed");
        progress(Progress::Iteration(report));
        Ok(report)
    }

    fn rollouts(
        &self,
        emulators: &[TrainingEmulator],
        iteration: usize,
        beta: f64,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Vec<Rollout>, DaggerError> {
        let policy = Some(self.policy.clone());
        let seed = |i: usize| self.config.seed ^ ((iteration as u64) << 40) ^ ((i as u64) << 8);
        let mut out: Vec<Option<Rollout>> = vec![None; emulators.len()];
        let mut done = 0;
        for chunk in (0..emulators.len())
            .collect::<Vec<_>>()
            .chunks(self.config.jobs.max(1))
        {
            let results: Vec<(usize, Result<Rollout, sim::run::SimError>)> =
                std::thread::scope(|s| {
                    let handles: Vec<_> = chunk
                        .iter()
                        .map(|&i| {
                            let policy = policy.clone();
                            let e = &emulators[i];
                            let secs = self.config.rollout_secs;
                            s.spawn(move || (i, rollout(e, policy, beta, secs, seed(i))))
                        })
                        .collect();
                    handles
                        .into_iter()
                        .map(|h| h.join().expect("a rollout thread panicked"))
                        .collect()
                });
            for (i, r) in results {
                out[i] = Some(r.map_err(|source| DaggerError::Rollout {
                    emulator: emulators[i].name.clone(),
                    source,
                })?);
                done += 1;
                progress(Progress::Rollout(done, emulators.len()));
            }
        }
        Ok(out.into_iter().flatten().collect())
    }

    /// Writes the model, the data and the iteration's line, the model and data through
    /// temporary files renamed into place (a crash leaves the previous iteration whole).
    fn save(&self, report: &IterationReport) -> Result<(), DaggerError> {
        let model = self.dir.join("model.safetensors");
        let tmp = self.dir.join("model.safetensors.tmp");
        self.policy.save(&tmp)?;
        std::fs::rename(&tmp, &model).map_err(io_err(&model))?;
        let data = self.dir.join("dataset.bin");
        let tmp = self.dir.join("dataset.bin.tmp");
        write_dataset(&tmp, &self.dataset)?;
        std::fs::rename(&tmp, &data).map_err(io_err(&data))?;
        let log = self.dir.join("training.jsonl");
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(io_err(&log))?;
        let line = serde_json::to_string(report).expect("a report serialises");
        writeln!(f, "{line}").map_err(io_err(&log))
    }
}

/// A rollout's decisions as training samples (each with the oracle's action).
fn samples(r: &Rollout) -> Vec<Sample> {
    r.decisions
        .iter()
        .filter_map(|d| {
            d.oracle.map(|label| Sample {
                features: d.state.features(),
                label,
            })
        })
        .collect()
}

/// `dataset.bin`: per episode, its length (u32 LE), then per sample its [`FEATURES`] f32s (LE)
/// and its label's index (u8).
fn write_dataset(path: &Path, episodes: &[Vec<Sample>]) -> Result<(), DaggerError> {
    let mut buf = Vec::new();
    for e in episodes {
        buf.extend_from_slice(&(e.len() as u32).to_le_bytes());
        for s in e {
            for x in s.features {
                buf.extend_from_slice(&x.to_le_bytes());
            }
            buf.push(s.label.index() as u8);
        }
    }
    std::fs::write(path, buf).map_err(io_err(path))
}

fn read_dataset(path: &Path) -> Result<Vec<Vec<Sample>>, DaggerError> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(io_err(path))?;
    let bad = |at: usize| {
        DaggerError::Resume(format!(
            "{}: damaged at byte {at}; delete the directory to start over",
            path.display()
        ))
    };
    let record = FEATURES * 4 + 1;
    let mut episodes = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let len = bytes
            .get(at..at + 4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
            .ok_or_else(|| bad(at))?;
        at += 4;
        let mut e = Vec::with_capacity(len);
        for _ in 0..len {
            let r = bytes.get(at..at + record).ok_or_else(|| bad(at))?;
            let mut features = [0f32; FEATURES];
            for (i, f) in features.iter_mut().enumerate() {
                *f = f32::from_le_bytes(r[i * 4..i * 4 + 4].try_into().expect("4 bytes"));
            }
            let label = Action::from_index(usize::from(r[FEATURES * 4]))
                .filter(|a| a.index() < ACTIONS)
                .ok_or_else(|| bad(at))?;
            e.push(Sample { features, label });
            at += record;
        }
        episodes.push(e);
    }
    Ok(episodes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rollout::path_bdp;
    use crate::rollout::tests::constant_path;

    #[test]
    fn one_iteration_on_a_toy_emulator_raises_accuracy_and_training_resumes() {
        let dir = std::env::temp_dir().join(format!("indigo-dagger-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = constant_path(&dir.join("traces"), 12, 10, "");
        let emulators = vec![TrainingEmulator {
            name: "12mbps-10ms".into(),
            ideal_cwnd: path_bdp(&path).unwrap(),
            path,
        }];
        let config = DaggerConfig {
            max_iterations: 2,
            rollout_secs: 3,
            jobs: 1,
            train: TrainConfig {
                epochs: 15,
                ..TrainConfig::default()
            },
            ..DaggerConfig::default()
        };
        let out = dir.join("train");
        let mut t = Trainer::resume(&out, config).unwrap();
        let r = t.iterate(&emulators, &mut |_| {}).unwrap().clone();
        assert_eq!((r.iteration, r.beta), (1, 1.0));
        assert!(r.new_samples > 200, "{r:?}");
        assert!(
            r.accuracy_after > r.accuracy_before + 0.2,
            "accuracy {:.2} → {:.2}",
            r.accuracy_before,
            r.accuracy_after
        );
        // Resumed from the directory: the same model and data, and iteration 2 next.
        let t2 = Trainer::resume(&out, config).unwrap();
        let (a, b) = (&t2.reports()[0], &t.reports()[0]);
        assert_eq!(t2.reports().len(), 1);
        assert_eq!(
            (a.iteration, a.total_samples),
            (b.iteration, b.total_samples)
        );
        assert!((a.accuracy_after - b.accuracy_after).abs() < 1e-9);
        assert_eq!(t2.dataset, t.dataset);
        let probe = [0.2f32, 0.5, 0.5, 0.3, 0.0, 0.0, 1.0, 0.0, 0.0];
        let s1 = t.policy().zero_state(1).unwrap();
        let s2 = t2.policy().zero_state(1).unwrap();
        assert_eq!(
            t.policy().step(&probe, &s1).unwrap().0,
            t2.policy().step(&probe, &s2).unwrap().0
        );
        // A damaged dataset is refused with the file named.
        std::fs::write(out.join("dataset.bin"), [1u8, 0, 0]).unwrap();
        let e = Trainer::resume(&out, config).err().unwrap().to_string();
        assert!(e.contains("dataset.bin"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
