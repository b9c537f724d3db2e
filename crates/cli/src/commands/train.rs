//! `pantheon train indigo`: its flags, the training set, the DAgger loop and its progress.
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use indigo::dagger::{DaggerConfig, Progress, Trainer};
use indigo::rollout::Conditions;
use indigo::train::TrainConfig;

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
pub(crate) struct IndigoArgs {
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
    /// Rollouts at a time (one core each).
    #[arg(long, default_value_t = 2)]
    jobs: usize,
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

/// Runs `pantheon train …`.
pub(crate) fn exec(what: TrainWhat) -> anyhow::Result<ExitCode> {
    let TrainWhat::Indigo(a) = what;
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
        jobs: a.jobs.max(1),
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
    let bar = progress_bar(set.len());
    let mut iteration = trainer.reports().len() + 1;
    bar.set_message(format!("iteration {iteration}: rollouts"));
    trainer.run(&set, &mut |p| match p {
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
    // DAgger's last step: the best iteration's policy, each alone over every training emulator.
    let bar = progress_bar(1);
    bar.set_message("validating every iteration's policy alone");
    let (selection, evaluations) = trainer.select(&set, &mut |k, n| {
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

/// A bar of `len` steps with the elapsed time and a message.
fn progress_bar(len: usize) -> ProgressBar {
    let bar = ProgressBar::new(len as u64);
    bar.set_style(
        ProgressStyle::with_template("[{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
            .expect("valid template"),
    );
    bar
}
