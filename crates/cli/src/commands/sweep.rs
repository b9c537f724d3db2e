//! `pantheon sweep SWEEP.toml`: an evaluation over a grid of environments × flow mixes × runs
//! (crate `pantheon-sweep`); `pantheon sweep point DIR ID`, one point of it (what every
//! executor runs); `pantheon sweep status DIR` and `pantheon sweep collect DIR`.
#![cfg_attr(not(feature = "sweep"), allow(dead_code))]
#[cfg(feature = "sweep")]
use std::path::Path;
use std::path::PathBuf;
use std::process::ExitCode;
#[cfg(feature = "sweep")]
use std::sync::atomic::Ordering;

#[cfg(feature = "sweep")]
use anyhow::Context;
use clap::{Args, Subcommand};
#[cfg(feature = "sweep")]
use {
    engine::runner::INTERRUPTED, engine::schemes::Registry, sweep::exec::Status,
    sweep::file::SlurmSection, sweep::file::SweepFile, sweep::plan::SweepPlan,
    sweep::slurm::SlurmOptions,
};

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub(crate) struct SweepArgs {
    /// The sweep file (TOML): environments, mixes, runs; see docs/sweep.md and
    /// sweeps/scavenger.toml.
    #[arg(required = true)]
    file: Option<PathBuf>,
    /// The sweep's results directory. Default: results/sweep-<name>. Running the same sweep
    /// into it again runs only the points not done (never run, interrupted or failed).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Points (experiments) run at a time, each in its own namespaces (default 1). On 2 cores,
    /// 2 change no result at rates up to 50 Mbit/s; see docs/sweep.md for what was measured.
    /// With --executor slurm: array tasks running at once (`--array=…%N`; default: as many as
    /// Slurm gives).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=10000))]
    jobs: Option<u16>,
    /// Where the points run: `local`, here, --jobs at a time; `slurm`, as one job array on a
    /// Slurm cluster (`sbatch`; the results directory on a filesystem the nodes share, and
    /// `pantheon` at the same path on them; see docs/slurm.md).
    #[arg(long, value_enum, default_value_t = Executor::Local)]
    executor: Executor,
    /// Slurm: the partition (sbatch --partition; or `partition` in the sweep file's [slurm]).
    #[arg(long, help_heading = "Slurm (--executor slurm)")]
    partition: Option<String>,
    /// Slurm: the time limit of each array task (sbatch --time: MM, HH:MM:SS, D-HH); a point
    /// takes its runtime and about 10 s of setup and analysis.
    #[arg(long, help_heading = "Slurm (--executor slurm)")]
    time: Option<String>,
    /// Slurm: CPUs per array task (sbatch --cpus-per-task; default 2).
    #[arg(long, help_heading = "Slurm (--executor slurm)", value_parser = clap::value_parser!(u32).range(1..))]
    cpus_per_task: Option<u32>,
    /// Slurm: points run one after another by each array task, for sites that limit array
    /// sizes or job counts (default 1: the array index is the point's id).
    #[arg(long, help_heading = "Slurm (--executor slurm)", value_parser = clap::value_parser!(u32).range(1..))]
    pack: Option<u32>,
    /// Slurm: one more sbatch option, as one argument (repeatable): --sbatch-arg=--qos=short.
    #[arg(
        long,
        help_heading = "Slurm (--executor slurm)",
        allow_hyphen_values = true
    )]
    sbatch_arg: Vec<String>,
    /// Write the plan and print what would run (the batch script, with --executor slurm)
    /// without running or submitting anything.
    #[arg(long)]
    dry_run: bool,
    /// Extra scheme descriptors (*.toml) to check the mixes' schemes against.
    #[arg(long)]
    schemes_dir: Option<PathBuf>,
    #[command(subcommand)]
    action: Option<SweepAction>,
}

/// `--executor`.
#[derive(Clone, Copy, PartialEq, clap::ValueEnum)]
enum Executor {
    /// Here, --jobs points at a time.
    Local,
    /// A Slurm job array.
    Slurm,
}

#[derive(Subcommand)]
enum SweepAction {
    /// Run points of the sweep in DIR (what the executors run), one after another: nothing
    /// for a point that is done; otherwise its experiment, placed in DIR/points/pNNNN when it
    /// ends. Exit status 0 all done, 1 one failed, 130 interrupted.
    Point {
        /// The sweep's results directory.
        dir: PathBuf,
        /// The points' numbers (sweep_plan.json).
        #[arg(required = true)]
        ids: Vec<u32>,
    },
    /// How many points are done, failed and to run, from the results directory alone.
    Status {
        /// The sweep's results directory.
        dir: PathBuf,
    },
    /// Collect the finished points again: sweep.csv, sweep.parquet, plots, sweep_summary.md.
    Collect {
        /// The sweep's results directory.
        dir: PathBuf,
    },
}

#[cfg(feature = "sweep")]
pub(crate) fn exec(a: SweepArgs) -> anyhow::Result<ExitCode> {
    match a.action {
        Some(SweepAction::Point { dir, ids }) => {
            let mut worst = ExitCode::SUCCESS;
            for id in ids {
                match point(&dir, id)? {
                    c if c == ExitCode::from(130) => return Ok(c),
                    c if c != ExitCode::SUCCESS => worst = c,
                    _ => {}
                }
            }
            Ok(worst)
        }
        Some(SweepAction::Status { dir }) => {
            let plan = SweepPlan::load(&dir)?;
            let s = Status::read(&dir, &plan);
            println!("{}", s.line());
            for id in &s.failed {
                if let Some(r) = sweep::point::record(&dir, *id) {
                    println!(
                        "p{id:04} failed: {}",
                        r.error_line().unwrap_or("(no output)")
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Some(SweepAction::Collect { dir }) => {
            let registry = Registry::load(a.schemes_dir.as_deref())?;
            let plan = SweepPlan::load(&dir)?;
            let status = Status::read(&dir, &plan);
            println!("{}", collect(&dir, &plan, &status, &registry)?);
            Ok(ExitCode::SUCCESS)
        }
        None => {
            let file = a.file.clone().context("the sweep file is required")?;
            run(&file, &a)
        }
    }
}

/// Checks the sweep file against the scheme and emulator libraries, freezes it into the
/// results directory, runs the missing points (here or on Slurm) and collects them.
#[cfg(feature = "sweep")]
fn run(file: &Path, a: &SweepArgs) -> anyhow::Result<ExitCode> {
    let f = SweepFile::load(file)?;
    let registry = Registry::load(a.schemes_dir.as_deref())?;
    let mut plan = SweepPlan::new(&f);
    plan.check(&registry)
        .with_context(|| file.display().to_string())?;
    let dir = a
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("results").join(format!("sweep-{}", f.name)));
    // One `pantheon sweep` at a time in a sweep's directory (its points lock their own).
    let _held = engine::experiment::lock(&dir, false)?;
    // Absolute, as the points may run elsewhere (Slurm nodes) from another directory.
    let dir = dir
        .canonicalize()
        .with_context(|| format!("find {}", dir.display()))?;
    plan.schemes_dir = match &a.schemes_dir {
        Some(d) => Some(
            d.canonicalize()
                .with_context(|| format!("--schemes-dir {}", d.display()))?,
        ),
        None => None,
    };
    plan.freeze(&dir)?;
    eprintln!(
        "Sweep {}: {} environments × {} runs → {} points of {} s, in {}",
        f.name,
        plan.environments.len(),
        f.runs,
        plan.points.len(),
        f.runtime,
        dir.display()
    );
    let exe = std::env::current_exe().context("find the pantheon program")?;
    let slurm_opts = (a.executor == Executor::Slurm).then(|| {
        let flags = SlurmSection {
            partition: a.partition.clone(),
            time: a.time.clone(),
            cpus_per_task: a.cpus_per_task,
            pack: a.pack,
            sbatch_args: a.sbatch_arg.clone(),
        };
        SlurmOptions::merged(&f.slurm, &flags, a.jobs.map(usize::from))
    });
    if a.dry_run {
        return dry_run(&dir, &exe, slurm_opts.as_ref(), a.jobs);
    }
    super::install_interrupt_handler()?;
    let status = match &slurm_opts {
        Some(o) => sweep::slurm::run_slurm(&dir, &exe, o, &INTERRUPTED, &PointsBar::new())?,
        None => {
            let jobs = usize::from(a.jobs.unwrap_or(1));
            if jobs > 64 {
                anyhow::bail!("--jobs {jobs}: at most 64 points at a time on one machine");
            }
            sweep::exec::run_local(&dir, &exe, jobs, &INTERRUPTED, &PointsBar::new())?
        }
    };
    println!("{}", collect(&dir, &plan, &status, &registry)?);
    if INTERRUPTED.load(Ordering::SeqCst) {
        eprintln!(
            "interrupted: {}. Run the same command again to go on.",
            status.line()
        );
        return Ok(ExitCode::from(130));
    }
    Ok(if status.failed.is_empty() && status.missing.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// A progress bar over a sweep's points, failures printed above it.
#[cfg(feature = "sweep")]
struct PointsBar(indicatif::ProgressBar);

#[cfg(feature = "sweep")]
impl PointsBar {
    fn new() -> PointsBar {
        let bar = indicatif::ProgressBar::hidden();
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "[{elapsed_precise}] {bar:30} {pos}/{len} points {msg}",
            )
            .expect("valid template"),
        );
        PointsBar(bar)
    }
}

#[cfg(feature = "sweep")]
impl sweep::exec::Progress for PointsBar {
    fn begin(&self, done: usize, total: usize) {
        self.0.set_length(total as u64);
        self.0.set_position(done as u64);
        self.0
            .set_draw_target(indicatif::ProgressDrawTarget::stderr());
    }

    fn update(&self, done: usize, status: &str) {
        self.0.set_position(done as u64);
        self.0.set_message(status.to_owned());
    }

    fn say(&self, line: &str) {
        self.0.suspend(|| eprintln!("{line}"));
    }

    fn end(&self) {
        self.0.finish_and_clear();
    }
}

/// `--dry-run`: what would run, and with Slurm the batch script (written, not submitted).
#[cfg(feature = "sweep")]
fn dry_run(
    dir: &Path,
    exe: &Path,
    slurm_opts: Option<&SlurmOptions>,
    jobs: Option<u16>,
) -> anyhow::Result<ExitCode> {
    let plan = SweepPlan::load(dir)?;
    let status = Status::read(dir, &plan);
    eprintln!("{}", status.line());
    match slurm_opts {
        None => {
            let ids: Vec<String> = status.to_run().iter().map(|i| format!("p{i:04}")).collect();
            println!(
                "would run {} point(s), {} at a time: {}",
                ids.len(),
                jobs.unwrap_or(1),
                ids.join(" ")
            );
        }
        Some(o) => match sweep::slurm::prepare(dir, exe, o, engine::slurm::max_array_size())? {
            None => println!("nothing to submit"),
            Some((path, text, _)) => {
                eprintln!(
                    "the batch script, not submitted (sbatch {}):",
                    path.display()
                );
                print!("{text}");
            }
        },
    }
    Ok(ExitCode::SUCCESS)
}

/// The table, plots and summary of the sweep in `dir`.
#[cfg(feature = "sweep")]
fn collect(
    dir: &Path,
    plan: &SweepPlan,
    status: &Status,
    registry: &Registry,
) -> anyhow::Result<String> {
    let rows = sweep::collect::collect(dir, plan);
    let style = |name: &str| match registry.get(name) {
        Ok(s) => (s.label.clone(), s.color.clone(), s.marker.clone()),
        Err(_) => (name.to_owned(), "black".to_owned(), "o".to_owned()),
    };
    sweep::output::write(dir, plan, status, &rows, &style)
}

/// Runs point `id` of the sweep in `dir` here (`pantheon run local`'s experiment, `run sim`'s
/// in a simulated sweep), with `pantheon run`'s progress bar.
#[cfg(feature = "sweep")]
fn point(dir: &Path, id: u32) -> anyhow::Result<ExitCode> {
    super::install_interrupt_handler()?;
    let bar = super::run::RunBar::new();
    let placed = sweep::point::run_point(dir, id, &bar);
    bar.finish();
    Ok(match placed? {
        None if INTERRUPTED.load(Ordering::SeqCst) => ExitCode::from(130),
        None => {
            eprintln!("point {id} is done already");
            ExitCode::SUCCESS
        }
        Some(r) if r.ok() => ExitCode::SUCCESS,
        Some(r) => {
            eprintln!("point {id} failed: {}", r.error.unwrap_or_default());
            ExitCode::from(1)
        }
    })
}

/// Without the `sweep` feature: says so.
#[cfg(not(feature = "sweep"))]
pub(crate) fn exec(_: SweepArgs) -> anyhow::Result<ExitCode> {
    super::left_out("sweep", "sweep")
}
