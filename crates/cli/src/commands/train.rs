//! `pantheon train indigo`: its flags, the training set, the DAgger loop and its progress.
#![cfg_attr(not(feature = "indigo"), allow(dead_code))]
use std::path::PathBuf;
use std::process::ExitCode;

#[cfg(feature = "indigo")]
use anyhow::Context;
use clap::{Args, Subcommand};
#[cfg(feature = "indigo")]
use {
    indicatif::{ProgressBar, ProgressStyle},
    indigo::dagger::{DaggerConfig, Progress, Trainer},
    indigo::rollout::{Conditions, TrainingEmulator},
    indigo::train::TrainConfig,
};

/// What to train.
#[derive(Subcommand)]
pub(crate) enum TrainWhat {
    /// Indigo (the Pantheon paper's §6): an LSTM policy over the state vector (queueing delay,
    /// sending and delivery rates, window, minimum RTT, previous action) that picks one of five
    /// actions on the window every 10 ms, trained by DAgger to imitate an oracle that knows
    /// each emulator's ideal window, in simulated time (no root needed).
    ///
    /// Writes to --out: model.safetensors (the policy: `--model` of the indigo scheme),
    /// training.jsonl (per iteration: β, samples, accuracy before and after, loss, agreement
    /// with the previous policy, the rollouts' mean throughput, delay and utilization, wall
    /// time), models/ (each iteration's policy), dataset.bin (every labelled decision),
    /// oracle.json (the oracle's windows of calibrated emulators), traces/, and at the end
    /// selection.json (every iteration's policy alone over the training emulators, scored; the
    /// best is model.safetensors, as DAgger prescribes) and evaluation.json (the kept policy
    /// over each training emulator); both also printed. Running the same command again resumes
    /// after the last finished iteration. See docs/indigo.md.
    ///
    /// Example: `pantheon train indigo --emulators "synthetic nepal-aws-india" --out
    /// models/indigo`.
    Indigo(IndigoArgs),
}

/// `pantheon train indigo`'s flags.
#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct IndigoArgs {
    #[command(subcommand)]
    action: Option<IndigoAction>,
    /// The training emulators, space-separated: `synthetic` (the paper's 24: 5, 10, 20, 50,
    /// 100, 200 Mbit/s × one-way 10, 20, 40, 80 ms, infinite buffers), preset names
    /// (`pantheon emulators`) and emulator files (`calibration/emulator.json`).
    #[arg(long, default_value = "synthetic")]
    emulators: String,
    /// Output directory.
    #[arg(long, default_value = "indigo-model")]
    out: PathBuf,
    /// The most DAgger iterations (training stops earlier once the policy stops changing).
    #[arg(long, default_value_t = 10)]
    iterations: usize,
    /// Simulated seconds of each rollout.
    #[arg(long, default_value_t = 30)]
    rollout_secs: u64,
    /// The latency the hosts add to each packet in rollouts and validation: `ideal` (none),
    /// `measured` (this kind of machine's, 45 µs + Exp(35 µs) per packet: RTT samples as noisy
    /// as in real time) or `MIN+MEAN` in µs; as `pantheon run sim --host-latency`. The
    /// oracle's window search uses ideal hosts.
    #[arg(long, default_value = "ideal")]
    host_latency: sim::run::HostLatency,
    /// Rollouts at a time (one core each). Default 2; with --executor slurm, the allocation's
    /// tasks (SLURM_NTASKS).
    #[arg(long)]
    jobs: Option<usize>,
    /// Where rollouts (and the validation's) run: `local`, threads here; `slurm`, each as a
    /// job step (`srun --exact`) inside the Slurm allocation this runs in (sbatch or salloc),
    /// --out on a filesystem its nodes share. See docs/slurm.md.
    #[arg(long, value_enum, default_value_t = Executor::Local)]
    executor: Executor,
    /// Training epochs per iteration, over everything gathered.
    #[arg(long, default_value_t = 20)]
    epochs: usize,
    /// Share (0–1) of unchanged actions at which the policy has stopped changing.
    #[arg(long, default_value_t = 0.98)]
    agreement: f64,
    /// Seed of everything: initial weights, rollouts, batch order.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// `--executor`.
#[derive(Clone, Copy, PartialEq, clap::ValueEnum)]
enum Executor {
    /// Threads of this process, --jobs at a time.
    Local,
    /// Job steps of the Slurm allocation this runs in.
    Slurm,
}

#[derive(Subcommand)]
enum IndigoAction {
    /// Run one rollout (what --executor slurm's job steps run): reads REQUEST
    /// (OUT/steps/N/request.json, written by the training), writes result.json beside it.
    Step {
        /// The rollout's request.
        request: PathBuf,
    },
}

/// Runs `pantheon train …`.
#[cfg(feature = "indigo")]
pub(crate) fn exec(what: TrainWhat) -> anyhow::Result<ExitCode> {
    let TrainWhat::Indigo(mut a) = what;
    if let Some(IndigoAction::Step { request }) = &a.action {
        return steps::run(request);
    }
    let allocation = match a.executor {
        Executor::Local => None,
        Executor::Slurm => Some(engine::slurm::require_allocation(
            "pantheon train indigo",
            3,
        )?),
    };
    if let Some(al) = &allocation {
        a.jobs = a.jobs.or(al.ntasks);
        // The steps may run on other nodes, from another directory.
        std::fs::create_dir_all(&a.out).with_context(|| format!("create {}", a.out.display()))?;
        a.out = a.out.canonicalize()?;
    }
    if !(0.0..=1.0).contains(&a.agreement) {
        anyhow::bail!("--agreement {}: a share between 0 and 1", a.agreement);
    }
    let entries: Vec<String> = a.emulators.split_whitespace().map(str::to_owned).collect();
    if entries.is_empty() {
        anyhow::bail!("--emulators is empty: give `synthetic`, presets or emulator files");
    }
    let set = indigo::set::training_set(&entries, &a.out, a.rollout_secs, a.seed, &mut |name| {
        eprintln!("oracle: searching the best fixed window of {name} in simulation");
    })?;
    let config = DaggerConfig {
        max_iterations: a.iterations,
        rollout: Conditions {
            secs: a.rollout_secs,
            host: a.host_latency,
        },
        jobs: a.jobs.unwrap_or(2).max(1),
        seed: a.seed,
        train: TrainConfig {
            epochs: a.epochs,
            seed: a.seed,
            ..TrainConfig::default()
        },
        agreement: a.agreement,
    };
    let mut trainer = Trainer::resume(&a.out, config)
        .with_context(|| format!("training directory {}", a.out.display()))?;
    if let Some(al) = &allocation {
        let runner = steps::StepRunner::new(&entries, &a.out, a.rollout_secs, a.seed)?;
        eprintln!(
            "each rollout a job step of Slurm job {} ({} CPU(s) each; steps.log)",
            al.job_id, runner.cpus
        );
        trainer = trainer.with_runner(std::sync::Arc::new(runner));
    }
    eprintln!(
        "Indigo: {} training emulators, up to {} iterations of {}-s rollouts ({} at a time, \
         host latency {}) → {}",
        set.len(),
        a.iterations,
        a.rollout_secs,
        config.jobs,
        a.host_latency,
        a.out.display()
    );
    if !trainer.reports().is_empty() {
        eprintln!("resuming after iteration {}", trainer.reports().len());
    }
    iterate(&mut trainer, &set)?;
    select(&mut trainer, &set, &a)
}

/// DAgger's iterations (rollouts, labels, training) until done, with a progress bar and a
/// line per iteration.
#[cfg(feature = "indigo")]
fn iterate(trainer: &mut Trainer, set: &[TrainingEmulator]) -> anyhow::Result<()> {
    let bar = progress_bar(set.len());
    let mut iteration = trainer.reports().len() + 1;
    bar.set_message(format!("iteration {iteration}: rollouts"));
    trainer.run(set, &mut |p| match p {
        Progress::Rollout(done, of) => {
            bar.set_length(of as u64);
            bar.set_position(done as u64);
        }
        Progress::Epoch(e) => {
            bar.set_message(format!(
                "iteration {iteration}: training, epoch {} loss {:.3}",
                e.epoch, e.loss
            ));
        }
        Progress::Iteration(r) => {
            bar.suspend(|| {
                eprintln!(
                    "iteration {}: {} new decisions ({} in all), accuracy {:.1} % → {:.1} %, \
                     loss {:.3}, agreement with the previous policy {:.1} %, rollouts {:.1} \
                     Mbit/s at p95 {:.0} ms, {:.0} s",
                    r.iteration,
                    r.new_samples,
                    r.total_samples,
                    100.0 * r.accuracy_before,
                    100.0 * r.accuracy_after,
                    r.loss,
                    100.0 * r.agreement,
                    r.mean_tput_mbps,
                    r.mean_p95_delay_ms,
                    r.wall_s
                )
            });
            iteration = r.iteration + 1;
            bar.set_position(0);
            bar.set_message(format!("iteration {iteration}: rollouts"));
        }
    })?;
    bar.finish_and_clear();
    let last = trainer.reports().last();
    eprintln!(
        "trained: {} iterations, final accuracy {:.1} %",
        trainer.reports().len(),
        last.map_or(0.0, |r| 100.0 * r.accuracy_after),
    );
    Ok(())
}

/// DAgger's last step: every iteration's policy alone over every training emulator, the best
/// kept as the model; the scores and the kept policy's figures printed and written to
/// `evaluation.json`.
#[cfg(feature = "indigo")]
fn select(
    trainer: &mut Trainer,
    set: &[TrainingEmulator],
    a: &IndigoArgs,
) -> anyhow::Result<ExitCode> {
    let bar = progress_bar(1);
    bar.set_message("validating every iteration's policy alone");
    let (selection, evaluations) = trainer.select(set, &mut |k, n| {
        bar.set_length(n as u64);
        bar.set_position(k as u64);
    })?;
    bar.finish_and_clear();
    println!("iteration      score   utilization   p95 delay ÷ base");
    for c in &selection.candidates {
        println!(
            "{:>9} {:>10.3} {:>12.0} % {:>18.2}{}",
            c.iteration,
            c.score,
            100.0 * c.mean_utilization,
            c.mean_delay_ratio,
            if c.iteration == selection.chosen {
                "   ← kept"
            } else {
                ""
            }
        );
    }
    eprintln!(
        "model {}: iteration {}'s policy (selection.json); alone over each training emulator:",
        a.out.join("model.safetensors").display(),
        selection.chosen
    );
    println!(
        "{:<28} {:>9} {:>9} {:>6} {:>9} {:>9}",
        "emulator", "capacity", "tput", "util", "delay", "p95 delay"
    );
    for e in &evaluations {
        println!(
            "{:<28} {:>9} {:>9.2} {:>6} {:>9.1} {:>9}",
            e.emulator,
            e.capacity_mbps.map_or("-".into(), |c| format!("{c:.2}")),
            e.tput_mbps,
            e.utilization()
                .map_or("-".into(), |u| format!("{:.0} %", 100.0 * u)),
            e.base_delay_ms,
            e.p95_delay_ms.map_or("-".into(), |d| format!("{d:.1}")),
        );
    }
    let file = a.out.join("evaluation.json");
    std::fs::write(
        &file,
        serde_json::to_string_pretty(&evaluations).expect("evaluations serialise"),
    )
    .with_context(|| format!("writing {}", file.display()))?;
    eprintln!(
        "({} simulated s each, host latency {}; Mbit/s, ms one-way): {}",
        a.rollout_secs,
        a.host_latency,
        file.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Rollouts as Slurm job steps: the runner (`--executor slurm`) and the step's handler.
#[cfg(feature = "indigo")]
mod steps {
    use std::path::{Path, PathBuf};
    use std::process::ExitCode;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    use anyhow::Context;
    use engine::record::INTERRUPTED;
    use indigo::policy::Frozen;
    use indigo::rollout::{Conditions, Rollout, Runner, TrainingEmulator};
    use sim::run::SimError;

    /// What a step is asked: the training set to rebuild (its entries; the oracle's windows
    /// read from the training directory, never searched again), which emulator of it, and
    /// the rollout's policy and draws.
    #[derive(serde::Serialize, serde::Deserialize)]
    struct Request {
        entries: Vec<String>,
        training_dir: PathBuf,
        oracle_secs: u64,
        set_seed: u64,
        index: usize,
        emulator: String,
        policy: Option<Frozen>,
        beta: f64,
        secs: u64,
        host: String,
        seed: u64,
    }

    /// What a step answers.
    #[derive(serde::Serialize, serde::Deserialize)]
    struct Answer {
        rollout: Option<Rollout>,
        error: Option<String>,
        host: String,
        slurm_step: Option<String>,
    }

    /// Runs each rollout as `srun --exact -n1 -c<cpus> pantheon train indigo step REQUEST`
    /// in `OUT/steps/<n>/` (removed after), one line per step in `OUT/steps.log`:
    /// `n emulator JOB.STEP host`.
    pub(super) struct StepRunner {
        entries: Vec<String>,
        dir: PathBuf,
        oracle_secs: u64,
        set_seed: u64,
        exe: PathBuf,
        pub(super) cpus: usize,
        next: AtomicUsize,
        log: Mutex<std::fs::File>,
    }

    impl StepRunner {
        pub(super) fn new(
            entries: &[String],
            dir: &Path,
            oracle_secs: u64,
            set_seed: u64,
        ) -> anyhow::Result<StepRunner> {
            let log_path = dir.join("steps.log");
            let log = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log_path)
                .with_context(|| format!("open {}", log_path.display()))?;
            Ok(StepRunner {
                entries: entries.to_vec(),
                dir: dir.to_owned(),
                oracle_secs,
                set_seed,
                exe: std::env::current_exe().context("find the pantheon program")?,
                cpus: engine::slurm::cpus_per_task(),
                next: AtomicUsize::new(0),
                log: Mutex::new(log),
            })
        }
    }

    impl Runner for StepRunner {
        fn rollout(
            &self,
            i: usize,
            emulator: &TrainingEmulator,
            policy: Option<Arc<Frozen>>,
            beta: f64,
            run: Conditions,
            seed: u64,
        ) -> Result<Rollout, SimError> {
            let n = self.next.fetch_add(1, Ordering::Relaxed);
            let dir = self.dir.join("steps").join(n.to_string());
            let request = Request {
                entries: self.entries.clone(),
                training_dir: self.dir.clone(),
                oracle_secs: self.oracle_secs,
                set_seed: self.set_seed,
                index: i,
                emulator: emulator.name.clone(),
                policy: policy.map(|p| (*p).clone()),
                beta,
                secs: run.secs,
                host: run.host.to_string(),
                seed,
            };
            let answer: anyhow::Result<Answer> = engine::slurm::step_round_trip(
                self.cpus,
                &format!("pantheon-rollout-{n}"),
                &self.exe,
                &["train", "indigo", "step"],
                &dir,
                &request,
                &INTERRUPTED,
            );
            let _ = std::fs::remove_dir_all(&dir);
            let failed = |e: String| SimError::Elsewhere(format!("job step: {e}"));
            let answer = answer.map_err(|e| failed(format!("{e:#}")))?;
            if let Ok(mut log) = self.log.lock() {
                use std::io::Write;
                let _ = writeln!(
                    log,
                    "{n} {} {} {}",
                    emulator.name,
                    answer.slurm_step.as_deref().unwrap_or("-"),
                    answer.host
                );
            }
            match (answer.rollout, answer.error) {
                (Some(r), _) => Ok(r),
                (None, e) => Err(failed(format!(
                    "on {}: {}",
                    answer.host,
                    e.unwrap_or_else(|| "no result".into())
                ))),
            }
        }
    }

    /// `pantheon train indigo step REQUEST`: the rollout of `request`, here; its answer in
    /// `result.json` beside it (a failed rollout is an answer; errors only when the request
    /// cannot be read or the answer written).
    pub(super) fn run(request: &Path) -> anyhow::Result<ExitCode> {
        let text = std::fs::read(request).with_context(|| format!("read {}", request.display()))?;
        let r: Request =
            serde_json::from_slice(&text).with_context(|| format!("read {}", request.display()))?;
        let dir = request.parent().unwrap_or(Path::new("."));
        let rollout = (|| -> anyhow::Result<Rollout> {
            // The oracle's windows as the training found them: none is searched here.
            let oracle = r.training_dir.join("oracle.json");
            if oracle.exists() {
                std::fs::copy(&oracle, dir.join("oracle.json"))
                    .with_context(|| format!("copy {}", oracle.display()))?;
            }
            let set =
                indigo::set::training_set(&r.entries, dir, r.oracle_secs, r.set_seed, &mut |_| {})?;
            let e = set
                .get(r.index)
                .filter(|e| e.name == r.emulator)
                .with_context(|| {
                    format!(
                        "emulator {} of the training set is not {} here",
                        r.index, r.emulator
                    )
                })?;
            let host = r
                .host
                .parse()
                .map_err(|e| anyhow::anyhow!("host latency {}: {e}", r.host))?;
            let run = Conditions { secs: r.secs, host };
            Ok(indigo::rollout::rollout(
                e,
                r.policy.map(Arc::new),
                r.beta,
                run,
                r.seed,
            )?)
        })();
        let (host, slurm_step) = engine::slurm::here();
        let failed = rollout.is_err();
        let (rollout, error) = match rollout {
            Ok(r) => (Some(r), None),
            Err(e) => (None, Some(format!("{e:#}"))),
        };
        let answer = Answer {
            rollout,
            error,
            host,
            slurm_step,
        };
        engine::slurm::write_answer(request, &answer)?;
        Ok(if failed {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        })
    }
}

/// A bar of `len` steps with the elapsed time and a message.
#[cfg(feature = "indigo")]
fn progress_bar(len: usize) -> ProgressBar {
    let bar = ProgressBar::new(len as u64);
    bar.set_style(
        ProgressStyle::with_template("[{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
            .expect("valid template"),
    );
    bar
}

/// Without the `indigo` feature: says so.
#[cfg(not(feature = "indigo"))]
pub(crate) fn exec(_: TrainWhat) -> anyhow::Result<ExitCode> {
    super::left_out("train", "indigo")
}
