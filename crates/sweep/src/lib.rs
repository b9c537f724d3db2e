//! `pantheon sweep`: an evaluation over a grid — environments × flow mixes × runs — as the
//! PCC Proteus paper evaluates a scavenger (the CDF of the primary flow's throughput ratio over
//! many environments), resumable and collected into one tidy table.
//!
//! - [`file`]: the sweep file (`SWEEP.toml`): environments, mixes, runs, heatmap axes.
//! - [`plan`]: the file frozen into numbered points (`sweep_plan.json`); a point is one run of
//!   one mix in one environment, and the unit every executor runs.
//! - [`point`]: running one point: skipped when done, run into a temporary directory and
//!   renamed into place (`points/pNNNN/`) with a record of how it ended, where and under which
//!   job.
//! - [`exec`]: the local executor, `--jobs N` points at a time, with progress, an ETA, Ctrl-C
//!   and the status read from the results directory alone.
//! - [`slurm`]: the Slurm executor, the missing points as one job array (`sbatch`), followed
//!   with `squeue` and the results directory, cancelled with `scancel` on Ctrl-C.
//! - [`collect`]: the points' `pantheon_perf.json` → one row per (environment, mix, run, flow),
//!   with throughput ratio and harm against each scheme's solo runs in the same environment.
//! - [`output`]: `sweep.csv`, `sweep.parquet`, the ratio CDF, the heatmaps and
//!   `sweep_summary.md`.

pub mod collect;
pub mod exec;
pub mod file;
pub mod output;
pub mod plan;
pub mod point;
pub mod slurm;
