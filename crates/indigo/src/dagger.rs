//! DAgger (Ross et al., 2011), as Indigo trains: roll the current policy out on every training
//! emulator, label every state it visited with the oracle's action, add them to everything
//! gathered so far, train on the whole, and repeat until the policy stops changing.
//!
//! Iteration `i` follows the oracle at a share β of the decisions and the policy at the rest:
//! β = 1, ½, ¼, then 0 ([`beta`]). Both halves matter. With the oracle alone and then the
//! policy alone (β = 1, 0, 0, …), the first data hold only windows at the ideal, the first
//! policy never leaves its initial window, and training swung between classes for eight
//! iterations without converging. With β = ½^(i−1), never 0, the mixtures stayed on course and
//! the policy agreed with itself at 99 % after four iterations, but alone it let queues grow
//! to seconds that no mixture had shown it (docs/indigo.md).
//!
//! The rollouts of an iteration are independent simulated runs, `jobs` at a time. Everything
//! is drawn from the seed: the network's initial weights, each rollout's path and mixture
//! draws, the order of training batches; a run interrupted anywhere resumes from its directory
//! ([`Trainer::resume`]) at the last finished iteration and ends where an uninterrupted one
//! would.
//!
//! The policy "stops changing" when, over the states of the latest rollouts of the policy alone,
//! the newly trained policy picks the action the one before it picked at least
//! [`DaggerConfig::agreement`] of the time.
//!
//! Then, as Ross et al. prescribe, the policy kept is the best of the iterations' on
//! validation ([`Trainer::select`]): each iteration's policy alone over every training emulator
//! (other seeds than training's), scored by [`crate::rollout::score`]. DAgger's iterations do
//! not improve monotonically — a policy that fills every link can be followed by one that,
//! trained on the first one's states, starves some — so the last is not always the best.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::policy::{Policy, PolicyError};
use crate::rollout::{
    mean, rollout_all, Conditions, Evaluation, Local, Rollout, Runner, TrainingEmulator,
};
use crate::state::{Action, ACTIONS, FEATURES};
use crate::train::{
    accuracy, agreement_with_labels, predict, train, EpochStats, Sample, TrainConfig,
};

/// How to train.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DaggerConfig {
    /// The most iterations.
    pub max_iterations: usize,
    /// How each rollout runs: simulated seconds, the hosts' latency.
    pub rollout: Conditions,
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
    /// Up to 10 iterations of 30-s rollouts between ideal hosts, 2 at a time, seed 1, stop at
    /// 98 % agreement.
    fn default() -> DaggerConfig {
        DaggerConfig {
            max_iterations: 10,
            rollout: Conditions::ideal(30),
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
    /// Mean over the rollouts of throughput ÷ the emulator's capacity (0–1).
    pub mean_utilization: f64,
    /// Mean over the rollouts of the p95 one-way delay ÷ the emulator's one-way delay without
    /// queueing (1: no queue).
    pub mean_delay_ratio: f64,
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

/// A training run and its directory: `training.jsonl` (one [`IterationReport`] per line),
/// `models/iteration-NNN.safetensors` (each iteration's policy), `dataset.bin` (every labelled
/// decision so far), `model.safetensors` (the latest policy; after [`Trainer::select`], the
/// kept one) and `selection.json`.
pub struct Trainer {
    dir: PathBuf,
    config: DaggerConfig,
    policy: Policy,
    dataset: Vec<Vec<Sample>>,
    reports: Vec<IterationReport>,
    runner: Arc<dyn Runner>,
}

impl Trainer {
    /// Runs the rollouts with `runner` (default: [`Local`], threads of this process).
    pub fn with_runner(mut self, runner: Arc<dyn Runner>) -> Trainer {
        self.runner = runner;
        self
    }

    /// Starts in `dir` (created), or resumes what is there: the model and data of the last
    /// finished iteration (its line in `training.jsonl` is the commit point: whatever an
    /// interrupted iteration wrote past it is dropped).
    pub fn resume(dir: &Path, config: DaggerConfig) -> Result<Trainer, DaggerError> {
        std::fs::create_dir_all(dir.join("models")).map_err(io_err(dir))?;
        let log = dir.join("training.jsonl");
        let mut reports: Vec<IterationReport> = Vec::new();
        if let Ok(mut text) = std::fs::read_to_string(&log) {
            // A line without its newline was being written when the run stopped.
            if !text.is_empty() && !text.ends_with('\n') {
                text.truncate(text.rfind('\n').map_or(0, |i| i + 1));
                std::fs::write(&log, &text).map_err(io_err(&log))?;
            }
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
        let data = dir.join("dataset.bin");
        let (policy, dataset) = match reports.last() {
            None => {
                std::fs::write(&data, []).map_err(io_err(&data))?;
                (Policy::new(config.seed)?, Vec::new())
            }
            Some(last) => {
                let model = Policy::load(&iteration_model(dir, last.iteration))?;
                (model, read_dataset(&data, last.total_samples)?)
            }
        };
        Ok(Trainer {
            dir: dir.to_owned(),
            config,
            policy,
            dataset,
            reports,
            runner: Arc::new(Local),
        })
    }

    /// The iterations done so far.
    pub fn reports(&self) -> &[IterationReport] {
        &self.reports
    }

    /// The current policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Whether the iterations are spent, or the last one found the policy unchanged over
    /// states it led to alone (β = 0).
    pub fn done(&self) -> bool {
        self.reports.len() >= self.config.max_iterations
            || self
                .reports
                .last()
                .is_some_and(|r| r.beta == 0.0 && r.agreement >= self.config.agreement)
    }

    /// DAgger's last step: every iteration's policy alone over `emulators` (rollouts of
    /// [`DaggerConfig::rollout`], seeds of their own), the best by
    /// [`crate::rollout::score`] kept as `model.safetensors` and as the trainer's policy;
    /// `selection.json` says which and how each did. Returns the selection and the kept
    /// policy's evaluations. `done(k, n)`: rollouts done of all candidates'.
    pub fn select(
        &mut self,
        emulators: &[TrainingEmulator],
        done: &mut dyn FnMut(usize, usize),
    ) -> Result<(Selection, Vec<Evaluation>), DaggerError> {
        let n = self.reports.len();
        let total = n * emulators.len();
        let mut best: Option<(Candidate, Vec<Evaluation>, Policy)> = None;
        let mut candidates = Vec::new();
        for iteration in 1..=n {
            let policy = Policy::load(&iteration_model(&self.dir, iteration))?;
            let base = (iteration - 1) * emulators.len();
            let evaluations = crate::rollout::evaluate(
                self.runner.as_ref(),
                emulators,
                Arc::new(policy.freeze()?),
                self.config.rollout,
                self.config.jobs,
                self.config.seed ^ 0x5e1e_c700,
                &mut |k, _| done(base + k, total),
            )
            .map_err(|(i, source)| DaggerError::Rollout {
                emulator: emulators[i].name.clone(),
                source,
            })?;
            let candidate = Candidate {
                iteration,
                score: crate::rollout::score(&evaluations),
                mean_utilization: mean(&evaluations, Evaluation::utilization),
                mean_delay_ratio: mean(&evaluations, Evaluation::delay_ratio),
            };
            candidates.push(candidate.clone());
            if best.as_ref().is_none_or(|b| candidate.score > b.0.score) {
                best = Some((candidate, evaluations, policy));
            }
        }
        let Some((chosen, evaluations, policy)) = best else {
            return Err(DaggerError::Resume(
                "no iteration to choose from: train first".into(),
            ));
        };
        let selection = Selection {
            chosen: chosen.iteration,
            candidates,
        };
        let model = self.dir.join("model.safetensors");
        let tmp = model.with_extension("safetensors.tmp");
        std::fs::copy(iteration_model(&self.dir, chosen.iteration), &tmp)
            .and_then(|_| std::fs::rename(&tmp, &model))
            .map_err(io_err(&model))?;
        let file = self.dir.join("selection.json");
        std::fs::write(
            &file,
            serde_json::to_string_pretty(&selection).expect("a selection serialises"),
        )
        .map_err(io_err(&file))?;
        self.policy = policy;
        Ok((selection, evaluations))
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
        let beta = beta(iteration);
        let rollouts = self.rollouts(emulators, iteration, beta, progress)?;
        let episodes: Vec<Vec<Sample>> = rollouts.iter().map(samples).collect();
        let new_samples: usize = episodes.iter().map(Vec::len).sum();
        let before = predict(&self.policy, &episodes)?;
        let accuracy_before = agreement_with_labels(&before, &episodes).unwrap_or(0.0);
        let first_new = self.dataset.len();
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
        let evaluations: Vec<Evaluation> = emulators
            .iter()
            .zip(&rollouts)
            .map(|(e, r)| Evaluation::of(e, r))
            .collect();
        let report = IterationReport {
            iteration,
            beta,
            new_samples,
            total_samples: self.dataset.iter().map(Vec::len).sum(),
            accuracy_before,
            accuracy_after: accuracy(&self.policy, &self.dataset)?.unwrap_or(0.0),
            loss: last.loss,
            agreement: same as f64 / new_samples.max(1) as f64,
            mean_tput_mbps: mean(&evaluations, |e| Some(e.tput_mbps)),
            mean_p95_delay_ms: mean(&evaluations, |e| e.p95_delay_ms),
            mean_utilization: mean(&evaluations, Evaluation::utilization),
            mean_delay_ratio: mean(&evaluations, Evaluation::delay_ratio),
            wall_s: started.elapsed().as_secs_f64(),
        };
        self.save(&report, &self.dataset[first_new..])?;
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
        let seed = |i: usize| self.config.seed ^ ((iteration as u64) << 40) ^ ((i as u64) << 8);
        rollout_all(
            self.runner.as_ref(),
            emulators,
            Some(Arc::new(self.policy.freeze()?)),
            beta,
            self.config.rollout,
            self.config.jobs,
            &seed,
            &mut |k, n| progress(Progress::Rollout(k, n)),
        )
        .map_err(|(i, source)| DaggerError::Rollout {
            emulator: emulators[i].name.clone(),
            source,
        })
    }

    /// Saves an iteration: its model (`models/iteration-NNN.safetensors`), its new episodes
    /// (appended to `dataset.bin`), then its line in `training.jsonl`, the commit point, then
    /// `model.safetensors`, a copy of the latest model for users.
    fn save(&self, report: &IterationReport, new: &[Vec<Sample>]) -> Result<(), DaggerError> {
        let write_model = |path: &Path| -> Result<(), DaggerError> {
            let tmp = path.with_extension("safetensors.tmp");
            self.policy.save(&tmp)?;
            std::fs::rename(&tmp, path).map_err(io_err(path))
        };
        write_model(&iteration_model(&self.dir, report.iteration))?;
        let data = self.dir.join("dataset.bin");
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&data)
            .map_err(io_err(&data))?;
        f.write_all(&encode_dataset(new)).map_err(io_err(&data))?;
        let log = self.dir.join("training.jsonl");
        let line = serde_json::to_string(report).expect("a report serialises") + "\n";
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .and_then(|mut f| f.write_all(line.as_bytes()))
            .map_err(io_err(&log))?;
        write_model(&self.dir.join("model.safetensors"))
    }
}

/// How one iteration's policy did alone over the training emulators ([`Trainer::select`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Candidate {
    /// The iteration whose policy it is.
    pub iteration: usize,
    /// [`crate::rollout::score`] of its evaluations (1: every link full without a queue).
    pub score: f64,
    /// Mean utilization over the emulators (0–1).
    pub mean_utilization: f64,
    /// Mean over the emulators of p95 one-way delay ÷ one-way delay without queueing.
    pub mean_delay_ratio: f64,
}

/// The outcome of [`Trainer::select`] (`selection.json`): every candidate, and the one kept.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Selection {
    /// The iteration whose policy is `model.safetensors`.
    pub chosen: usize,
    /// Every iteration's policy, in order.
    pub candidates: Vec<Candidate>,
}

/// DAgger's β of iteration `i` (from 1): 1, ½, ¼, then 0 — the oracle alone, then mixtures
/// that show the policy the states just off the oracle's course, then the policy alone, whose
/// own mistakes (a window stuck below the BDP, a queue it lets grow) only it leads to.
pub fn beta(iteration: usize) -> f64 {
    match iteration {
        0 | 1 => 1.0,
        2 => 0.5,
        3 => 0.25,
        _ => 0.0,
    }
}

/// Where iteration `i`'s model is kept in a training directory.
fn iteration_model(dir: &Path, iteration: usize) -> PathBuf {
    dir.join("models")
        .join(format!("iteration-{iteration:03}.safetensors"))
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
fn encode_dataset(episodes: &[Vec<Sample>]) -> Vec<u8> {
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
    buf
}

/// The first episodes of `dataset.bin` that hold `samples` samples; what follows them (an
/// interrupted iteration's) is cut from the file. Errors if the file holds fewer, or is
/// damaged before them.
fn read_dataset(path: &Path, samples: usize) -> Result<Vec<Vec<Sample>>, DaggerError> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(io_err(path))?;
    let bad = |at: usize, got: usize| {
        DaggerError::Resume(format!(
            "{}: damaged at byte {at}, after {got} of the {samples} samples training.jsonl \
             counts; delete the directory to start over",
            path.display()
        ))
    };
    let record = FEATURES * 4 + 1;
    let mut episodes = Vec::new();
    let (mut at, mut got) = (0, 0);
    while got < samples {
        let len = bytes
            .get(at..at + 4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
            .ok_or_else(|| bad(at, got))?;
        at += 4;
        let mut e = Vec::with_capacity(len);
        for _ in 0..len {
            let r = bytes.get(at..at + record).ok_or_else(|| bad(at, got))?;
            let mut features = [0f32; FEATURES];
            for (i, f) in features.iter_mut().enumerate() {
                *f = f32::from_le_bytes(r[i * 4..i * 4 + 4].try_into().expect("4 bytes"));
            }
            let label = Action::from_index(usize::from(r[FEATURES * 4]))
                .filter(|a| a.index() < ACTIONS)
                .ok_or_else(|| bad(at, got))?;
            e.push(Sample { features, label });
            at += record;
        }
        got += len;
        episodes.push(e);
    }
    if got != samples {
        return Err(bad(at, got));
    }
    if at < bytes.len() {
        std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .and_then(|f| f.set_len(at as u64))
            .map_err(io_err(path))?;
    }
    Ok(episodes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Memory;
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
            rollout: Conditions::ideal(3),
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
        assert_eq!((beta(2), beta(3), beta(4), beta(9)), (0.5, 0.25, 0.0, 0.0));
        assert!(r.new_samples > 200, "{r:?}");
        assert!(
            r.accuracy_after > r.accuracy_before + 0.2,
            "accuracy {:.2} → {:.2}",
            r.accuracy_before,
            r.accuracy_after
        );
        // An iteration interrupted after writing some data and half its line is dropped.
        let data_len = std::fs::metadata(out.join("dataset.bin")).unwrap().len();
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(out.join("dataset.bin"))
            .unwrap();
        f.write_all(&[7u8; 100]).unwrap();
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(out.join("training.jsonl"))
            .unwrap();
        f.write_all(b"{\"iteration\":2,\"be").unwrap();
        // Resumed from the directory: the same model and data, and iteration 2 next.
        let t2 = Trainer::resume(&out, config).unwrap();
        assert_eq!(
            std::fs::metadata(out.join("dataset.bin")).unwrap().len(),
            data_len
        );
        assert!(std::fs::read_to_string(out.join("training.jsonl"))
            .unwrap()
            .ends_with("}\n"));
        let (a, b) = (&t2.reports()[0], &t.reports()[0]);
        assert_eq!(t2.reports().len(), 1);
        assert_eq!(
            (a.iteration, a.total_samples),
            (b.iteration, b.total_samples)
        );
        assert!((a.accuracy_after - b.accuracy_after).abs() < 1e-9);
        assert_eq!(t2.dataset, t.dataset);
        let probe = [0.2f32, 0.5, 0.5, 0.3, 0.2, 0.0, 0.0, 1.0, 0.0, 0.0];
        let (mut m1, mut m2) = (Memory::default(), Memory::default());
        assert_eq!(
            t.policy().freeze().unwrap().step(&probe, &mut m1),
            t2.policy().freeze().unwrap().step(&probe, &mut m2)
        );
        // Selection: the one iteration's policy is kept, scored over the emulator.
        let (selection, evaluations) = t.select(&emulators, &mut |_, _| {}).unwrap();
        assert_eq!(selection.chosen, 1);
        assert_eq!(selection.candidates.len(), 1);
        assert!(selection.candidates[0].score > 0.0, "{selection:?}");
        assert_eq!(evaluations.len(), 1);
        assert!(out.join("selection.json").is_file());
        assert_eq!(
            std::fs::read(out.join("model.safetensors")).unwrap(),
            std::fs::read(iteration_model(&out, 1)).unwrap()
        );
        // A damaged dataset is refused with the file named.
        std::fs::write(out.join("dataset.bin"), [1u8, 0, 0]).unwrap();
        let e = Trainer::resume(&out, config).err().unwrap().to_string();
        assert!(e.contains("dataset.bin"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
