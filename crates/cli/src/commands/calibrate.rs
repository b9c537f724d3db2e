//! `pantheon calibrate`: its flags, the call into the engine's calibration driver, and its
//! progress bar.
#![cfg_attr(not(feature = "calibrate"), allow(dead_code))]
use std::path::PathBuf;
use std::process::ExitCode;
#[cfg(feature = "calibrate")]
use std::sync::atomic::Ordering;

#[cfg(feature = "calibrate")]
use anyhow::Context;
use clap::Args;
#[cfg(feature = "calibrate")]
use {
    engine::runner::INTERRUPTED,
    engine::schemes::{Registry, SystemInfo},
    indicatif::{ProgressBar, ProgressStyle},
};

#[cfg(feature = "calibrate")]
use {
    super::install_interrupt_handler,
    engine::plan::{seconds, MAX_RUNTIME},
};

/// `pantheon calibrate`'s flags.
#[derive(Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub(crate) struct CalibrateArgs {
    /// The real path's results: a results directory (ours or Pantheon's archived logs), or a
    /// table — .csv with a header `scheme,tput_mbps,delay_ms[,loss_pct,runs]` (median
    /// throughput in Mbit/s, median p95 one-way delay in ms, loss in percent), or .json, an
    /// array of objects with those keys.
    #[arg(required = true)]
    target: Option<PathBuf>,
    #[command(subcommand)]
    action: Option<CalibrateAction>,
    /// Schemes to run over each candidate, e.g. "cubic bbr" (default: the target's schemes
    /// that can run here).
    #[arg(long)]
    schemes: Option<String>,
    /// The target is Pantheon's of this day, YYYY-MM-DD: its scheme names (and those of
    /// --schemes) are read as Pantheon's schemes of that day — the target's copa is measured
    /// with the scheme here that runs Copa as Pantheon did then (copa_orig for 2017-08-30) —
    /// and a Pantheon scheme with no scheme of that era is left out, said on stderr. Without
    /// it, the names no scheme here is called by (Pantheon's copa, default_tcp) are read as of
    /// the seed reports' era, 2017-08-30. See `pantheon schemes era`.
    #[arg(long, value_name = "DAY")]
    pantheon_era: Option<engine::provenance::Day>,
    /// Seconds per run.
    #[arg(long, default_value_t = 30.0)]
    runtime: f64,
    /// Runs per scheme and candidate (their median is compared).
    #[arg(long, default_value_t = 1)]
    run_times: u32,
    /// Candidates measured at once, each in its own namespaces (they share the CPUs: keep
    /// it at or below the number of cores). Default 1; with --executor slurm, the
    /// allocation's tasks (SLURM_NTASKS).
    #[arg(long)]
    jobs: Option<usize>,
    /// Where candidates are measured: `local`, here; `slurm`, each as a job step (`srun
    /// --exact`) inside the Slurm allocation this runs in (sbatch or salloc; each step gets
    /// SLURM_CPUS_PER_TASK CPUs, default 1), --out on a filesystem its nodes share. See
    /// docs/slurm.md.
    #[arg(long, value_enum, default_value_t = Executor::Local)]
    executor: Executor,
    /// Evaluations per delivery process, the initial design included.
    #[arg(long, default_value_t = 40)]
    max_evals: usize,
    /// Space-filling evaluations (Latin hypercube, the first ones replaced by guesses read
    /// off the target: rate, delay and queue from its logs, with its least loss and with
    /// none) before the optimiser takes over.
    #[arg(long, default_value_t = 8)]
    initial_evals: usize,
    /// The best candidates measured once more at the end (the objective is noisy; the best
    /// mean wins).
    #[arg(long, default_value_t = 2)]
    confirm: usize,
    /// Delivery processes to search: both (the paper's way: best of the two kept), constant
    /// or poisson.
    #[arg(long, value_enum, default_value_t = DeliveryArg::Both)]
    delivery: DeliveryArg,
    /// Rate bounds, Mbit/s, as LOW,HIGH (default: [0.5 × median, 2 × max] of the target's
    /// peak 500 ms throughput).
    #[arg(long, value_name = "LOW,HIGH", value_parser = parse_range::<f64>)]
    rate_mbps: Option<(f64, f64)>,
    /// One-way delay bounds, ms (default: [0, 2 × median minimum one-way delay]).
    #[arg(long, value_name = "LOW,HIGH", value_parser = parse_range::<u32>)]
    delay_ms: Option<(u32, u32)>,
    /// Uplink DropTail bounds, packets (default: [10, 1.5 × most packets in flight]).
    #[arg(long, value_name = "LOW,HIGH", value_parser = parse_range::<u32>)]
    queue_packets: Option<(u32, u32)>,
    /// Uplink loss bounds, fraction (default: [0, clamp(4 × median loss, 0.1, 0.5)]).
    #[arg(long, value_name = "LOW,HIGH", value_parser = parse_range::<f64>)]
    loss: Option<(f64, f64)>,
    /// Search other users' traffic on the path too: a constant rate of non-reactive cross
    /// traffic on the uplink (`mm-link --uplink-cross-traffic`), Mbit/s, within LOW,HIGH (HIGH
    /// below the highest rate searched). Default: not searched, no cross traffic.
    #[arg(long, value_name = "LOW,HIGH", value_parser = parse_range::<f64>)]
    cross_traffic: Option<(f64, f64)>,
    /// Search the end hosts too: the largest TCP send and receive buffer (`pt-host both
    /// tcp_rmem=…,MAX tcp_wmem=…,MAX`), bytes, within LOW,HIGH (LOW at least 65536), on a log
    /// scale — what holds a flow that neither loses nor queues. Default: not searched (the
    /// machine's own buffers, or --hosts).
    #[arg(long, value_name = "LOW,HIGH", value_parser = parse_range::<u64>)]
    host_buffers: Option<(u64, u64)>,
    /// Output directory.
    #[arg(long, default_value = "calibration")]
    out: PathBuf,
    /// Seed of the search and of the emulator's loss.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Keep every evaluation's packet logs (in OUT/evals/N/).
    #[arg(long)]
    keep_runs: bool,
    /// Extra scheme descriptors (*.toml).
    #[arg(long)]
    schemes_dir: Option<PathBuf>,
    /// Evaluate candidates in simulated time (`pantheon run sim`): many times faster than real
    /// time, one core per evaluation (--jobs at a time), deterministic from --seed; for the
    /// schemes that can be simulated (quic, quic_newreno, quic_bbr), the others refused. No
    /// root needed. See docs/simulation.md.
    #[arg(long)]
    simulate: bool,
    /// The target's end hosts, where known: `pt-host` shells every candidate carries, not
    /// searched — e.g. 2017's Linux defaults, "pt-host both tcp_wmem=4096,16384,4194304
    /// tcp_rmem=4096,87380,6291456" (docs/emulator.md). Default: this machine's own.
    #[arg(
        long,
        value_name = "PT-HOST SHELLS",
        conflicts_with = "hosts_from_report"
    )]
    hosts: Option<String>,
    /// The target's end hosts as its Pantheon report states them: the report's text (e.g.
    /// `pdftotext pantheon_report.pdf`), whose "System info" net.ipv4.tcp_rmem/tcp_wmem lines
    /// become `pt-host both …` (Pantheon reports the local side's machine; its remote side
    /// ran the same setup). Errors if the file states neither.
    #[arg(long, value_name = "FILE")]
    hosts_from_report: Option<PathBuf>,
}

/// `--executor`.
#[derive(Clone, Copy, PartialEq, clap::ValueEnum)]
enum Executor {
    /// Here, --jobs candidates at a time.
    Local,
    /// Job steps of the Slurm allocation this runs in.
    Slurm,
}

#[derive(clap::Subcommand)]
enum CalibrateAction {
    /// Measure one candidate (what --executor slurm's job steps run): reads REQUEST
    /// (OUT/evals/N/request.json, written by the calibration), writes result.json beside it.
    Step {
        /// The evaluation's request.
        request: PathBuf,
    },
}

/// `--delivery`.
#[derive(Clone, Copy, clap::ValueEnum)]
enum DeliveryArg {
    /// Constant and Poisson, the better kept.
    Both,
    /// Constant-rate traces only.
    Constant,
    /// Poisson deliveries only.
    Poisson,
}

/// `LOW,HIGH` → (LOW, HIGH).
fn parse_range<T: std::str::FromStr>(s: &str) -> Result<(T, T), String> {
    let (a, b) = s
        .split_once(',')
        .ok_or_else(|| format!("`{s}`: expected LOW,HIGH"))?;
    let p = |x: &str| {
        x.trim()
            .parse::<T>()
            .map_err(|_| format!("`{x}` is not a number"))
    };
    Ok((p(a)?, p(b)?))
}

#[cfg(feature = "calibrate")]
pub(crate) fn exec(mut a: CalibrateArgs) -> anyhow::Result<ExitCode> {
    use engine::calibrate;
    if let Some(CalibrateAction::Step { request }) = &a.action {
        install_interrupt_handler()?;
        let r = calibrate::run_step(request)?;
        return Ok(match r.error {
            None => ExitCode::SUCCESS,
            Some(e) => {
                eprintln!("evaluation failed: {e}");
                ExitCode::from(1)
            }
        });
    }
    let allocation = match a.executor {
        Executor::Local => None,
        Executor::Slurm => Some(engine::slurm::require_allocation("pantheon calibrate", 2)?),
    };
    if let Some(al) = &allocation {
        a.jobs = a.jobs.or(al.ntasks);
        // The steps may run on other nodes, from another directory.
        std::fs::create_dir_all(&a.out).with_context(|| format!("create {}", a.out.display()))?;
        a.out = a.out.canonicalize()?;
    }
    let registry = Registry::load(a.schemes_dir.as_deref())?;
    let target_path = a.target.clone().context("the target is required")?;
    let mut target = calibrate::load_target(&target_path, &registry)?;
    a.read_as_pantheon_era(&mut target, &registry)?;
    let schemes = a.schemes(&target, &registry)?;
    if a.jobs == Some(0) || a.max_evals == 0 || a.run_times == 0 {
        anyhow::bail!("--jobs, --max-evals and --run-times must be at least 1");
    }
    if a.simulate {
        for name in &schemes {
            registry
                .get(name)?
                .check_simulated()
                .context("--simulate")?;
        }
    } else if allocation.is_none() {
        engine::clean::before_creating_namespaces("pantheon calibrate")?;
    }
    let opts = a.options(schemes)?;
    install_interrupt_handler()?;
    eprintln!(
        "Calibrating to {} with {} ({} × {} s{} per candidate), {} evaluations per delivery \
         process, {} at a time → {}",
        target.source,
        opts.schemes.join(", "),
        opts.run_times,
        opts.runtime.as_secs_f64(),
        if opts.simulate { " simulated" } else { "" },
        opts.max_evals,
        opts.jobs,
        opts.out_dir.display()
    );
    let bar = CalibrationBar(ProgressBar::new(0));
    bar.0.set_style(
        ProgressStyle::with_template(
            "[{elapsed_precise}] {bar:30} {pos}/{len} {msg} (≈{eta} left)",
        )
        .expect("valid template"),
    );
    let local = calibrate::LocalEvaluator {
        registry: &registry,
        opts: &opts,
    };
    let steps;
    let evaluator: &dyn engine::calibrate::Evaluator = match &allocation {
        None => &local,
        Some(al) => {
            let cpus = engine::slurm::cpus_per_task();
            eprintln!(
                "each evaluation a job step of Slurm job {} ({cpus} CPU(s) each)",
                al.job_id
            );
            steps = calibrate::StepEvaluator {
                opts: &opts,
                exe: std::env::current_exe().context("find the pantheon program")?,
                cpus,
            };
            &steps
        }
    };
    let outcome = calibrate::calibrate(&target, &opts, &registry, evaluator, &bar);
    bar.0.finish_and_clear();
    print_outcome(&outcome?, &opts);
    Ok(if INTERRUPTED.load(Ordering::SeqCst) {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(feature = "calibrate")]
impl CalibrateArgs {
    /// `--pantheon-era DAY`: the target's scheme names and --schemes read as Pantheon's schemes
    /// of that day; without it, the Pantheon names no scheme here is called by, as of the
    /// seeds' era (each change, and each scheme left out, said on stderr).
    fn read_as_pantheon_era(
        &mut self,
        target: &mut engine::calibrate::Target,
        registry: &Registry,
    ) -> anyhow::Result<()> {
        let era = self.pantheon_era;
        let said = super::run::era_said(era);
        for (asked, became) in target.as_pantheon_ran(registry, era) {
            match became {
                Ok(ours) => eprintln!("{said}: the target's {asked} → {ours}"),
                Err(why) => eprintln!("{said}: the target's {asked} left out: {why}"),
            }
        }
        if let Some(s) = &self.schemes {
            let names: Vec<String> = s.split_whitespace().map(str::to_owned).collect();
            let read = registry.read_as_of(&names, era);
            let ours = read
                .into_iter()
                .map(|(_, ours)| ours)
                .collect::<Result<Vec<_>, _>>()?;
            self.schemes = Some(ours.join(" "));
        }
        Ok(())
    }

    /// `--schemes`, or the target's schemes that can run here; errors if none can.
    fn schemes(
        &self,
        target: &engine::calibrate::Target,
        registry: &Registry,
    ) -> anyhow::Result<Vec<String>> {
        let sys = SystemInfo::probe();
        let schemes: Vec<String> = match &self.schemes {
            Some(s) => s.split_whitespace().map(str::to_owned).collect(),
            None => target
                .schemes
                .keys()
                .filter(|k| {
                    registry
                        .get(k)
                        .is_ok_and(|s| s.unavailable_reason(&sys).is_none())
                })
                .cloned()
                .collect(),
        };
        if schemes.is_empty() {
            anyhow::bail!(
                "none of the target's schemes ({}) can run here: see `pantheon schemes list`",
                target.scheme_names()
            );
        }
        Ok(schemes)
    }

    /// `--hosts` as shells; errors on a word that is no shell, and on a shell that is not
    /// `pt-host` (the path's shells are what the search fits).
    fn hosts(&self) -> anyhow::Result<Vec<emucal::mm::Shell>> {
        if let Some(report) = &self.hosts_from_report {
            return hosts_from_report(report).map(|s| vec![s]);
        }
        let Some(text) = &self.hosts else {
            return Ok(Vec::new());
        };
        let shells = emucal::mm::parse_shells(text).map_err(|e| anyhow::anyhow!("--hosts: {e}"))?;
        if let Some(s) = shells
            .iter()
            .find(|s| !matches!(s, emucal::mm::Shell::Host { .. }))
        {
            anyhow::bail!(
                "--hosts takes pt-host shells only; `{}` is part of the path, which the search \
                 fits",
                s.program()
            );
        }
        Ok(shells)
    }

    /// The flags as the engine's options (seconds as a duration, `--delivery` as the list of
    /// processes to search); errors on a runtime that is not a positive number.
    fn options(&self, schemes: Vec<String>) -> anyhow::Result<engine::calibrate::CalibrateOptions> {
        use emucal::mm::Delivery;
        Ok(engine::calibrate::CalibrateOptions {
            schemes,
            runtime: seconds(self.runtime, "--runtime", MAX_RUNTIME)?,
            run_times: self.run_times,
            jobs: self.jobs.unwrap_or(1),
            max_evals: self.max_evals,
            initial_evals: self.initial_evals,
            confirm: self.confirm,
            deliveries: match self.delivery {
                DeliveryArg::Both => vec![Delivery::Trace, Delivery::Poisson],
                DeliveryArg::Constant => vec![Delivery::Trace],
                DeliveryArg::Poisson => vec![Delivery::Poisson],
            },
            rate_mbps: self.rate_mbps,
            delay_ms: self.delay_ms,
            queue_packets: self.queue_packets,
            loss: self.loss,
            cross_mbps: self.cross_traffic,
            host_buffer_bytes: self.host_buffers,
            out_dir: self.out.clone(),
            seed: self.seed,
            keep_runs: self.keep_runs,
            schemes_dir: self.schemes_dir.clone(),
            netns_prefix: format!("pt-{}", std::process::id()),
            simulate: self.simulate,
            hosts: self.hosts()?,
        })
    }
}

/// `pt-host both …` of the tcp_rmem/tcp_wmem a Pantheon report's text states; errors name
/// the file (and line).
fn hosts_from_report(report: &std::path::Path) -> anyhow::Result<emucal::mm::Shell> {
    let what = || format!("--hosts-from-report {}", report.display());
    let text = std::fs::read_to_string(report).map_err(|e| anyhow::anyhow!("{}: {e}", what()))?;
    let limits = emucal::host::HostLimits::from_system_info(&text)
        .map_err(|e| anyhow::anyhow!("{}: {e}", what()))?;
    if limits == emucal::host::HostLimits::default() {
        anyhow::bail!(
            "{}: states no net.ipv4.tcp_rmem or net.ipv4.tcp_wmem (its \"System info\" lists \
             them where the report has one); give --hosts \"pt-host both …\" instead",
            what()
        );
    }
    Ok(emucal::mm::Shell::Host {
        side: emucal::host::HostSide::Both,
        limits,
    })
}

/// The best emulator, its error, the leave-one-out check and how to use it.
#[cfg(feature = "calibrate")]
fn print_outcome(o: &engine::calibrate::Outcome, opts: &engine::calibrate::CalibrateOptions) {
    println!(
        "Best emulator: {}\nreplication error {:.1} % (throughput {:.1} %, delay {:.1} %; mean of \
         {} measurement(s)), {} evaluations\n{}",
        o.best.describe(),
        o.error_pct,
        o.tput_error_pct,
        o.delay_error_pct,
        o.measurements,
        o.evaluations,
        std::fs::read_to_string(opts.out_dir.join("mahimahi.txt")).unwrap_or_default()
    );
    for (s, l) in &o.leave_one_out {
        println!(
            "leave-one-out {s}: fit on the others {:.1} %, predicts {s} within {:.1} % \
             (throughput) and {:.1} % (delay)",
            l.fit_error_pct, l.tput_error_pct, l.delay_error_pct
        );
    }
    println!(
        "Use it: pantheon run local --emulator {}",
        opts.out_dir.join("emulator.json").display()
    );
}

/// `pantheon calibrate`'s progress bar: evaluations done, best error so far.
#[cfg(feature = "calibrate")]
struct CalibrationBar(ProgressBar);

#[cfg(feature = "calibrate")]
impl engine::calibrate::Progress for CalibrationBar {
    fn evaluated(
        &self,
        e: &emucal::calibrate::Evaluation,
        done: usize,
        total: usize,
        best: Option<&emucal::calibrate::Evaluation>,
    ) {
        self.0.set_length(total as u64);
        self.0.set_position(done as u64);
        let line = match (e.overall_error_pct, &e.failure) {
            (Some(err), _) => format!("{}: {err:.1} %", e.candidate.describe()),
            (None, f) => format!(
                "{}: FAILED: {}",
                e.candidate.describe(),
                f.as_deref().unwrap_or("?")
            ),
        };
        self.0.suspend(|| eprintln!("{line}"));
        if let Some(b) = best.and_then(|b| b.overall_error_pct.map(|x| (x, b))) {
            self.0
                .set_message(format!("best {:.1} %: {}", b.0, b.1.candidate.describe()));
        }
    }

    fn phase(&self, what: &str) {
        self.0.suspend(|| eprintln!("— {what}"));
    }
}

/// Without the `calibrate` feature: says so.
#[cfg(not(feature = "calibrate"))]
pub(crate) fn exec(_: CalibrateArgs) -> anyhow::Result<ExitCode> {
    super::left_out("calibrate", "calibrate")
}
