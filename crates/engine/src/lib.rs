//! The experiment engine: everything a local experiment needs, as a library.
//!
//! It owns the scheme library (descriptors, setup, check), experiment plans, the local runner
//! (tunnel, emulator and schemes in network namespaces of its own), `pantheon shell`, results
//! directories and their analysis, comparison and the calibration driver. It is what the
//! `pantheon` CLI (`crates/cli`) and the testbed (`crates/orchestrator`) build on.
//!
//! It must never depend on gRPC, SQLite, web or ssh crates (tonic, rusqlite, axum, ssh2): those
//! are the testbed's. Dependency direction (`shared/DESIGN.md`): `engine → {emucal, tunnel,
//! netns, analyzer, workload, sim}`.
//!
//! # Brief overview
//!
//! - [`schemes`]: scheme descriptors (`schemes/*.toml`) and whether each can run here.
//! - [`bounds`]: the upper bound of every duration a user gives, and [`bounds::seconds`],
//!   which checks one.
//! - [`mix`]: mixed experiments, flows of different schemes on one bottleneck: `--mix` and
//!   Pantheon's YAML config file.
//! - [`plan`]: command-line flags → a validated [`plan::ExperimentPlan`] →
//!   `pantheon_metadata.json`.
//! - [`experiment`]: the experiment driver, whoever starts it: results directory, metadata,
//!   runs × schemes, analysis.
//! - [`record`]: how each run ended (`pantheon_runs.json`), and Ctrl-C.
//! - [`runner`]: one run of one scheme through the tunnel and the emulator, with cleanup on
//!   every exit path.
//! - [`sequence`]: the order of a run's steps (first sides, setup, second sides, runtime), one
//!   for local and remote runs.
//! - [`simulate`]: `pantheon run sim`, runs on a virtual clock ([`sim`]), filed as real ones.
//! - [`shell`]: `pantheon shell`, a command inside an emulated path given as Mahimahi shells.
//! - [`analyze`]: a results directory → Pantheon's stats logs, `pantheon_perf.json`, summary
//!   table and plots.
//! - [`transfers`]: runs with workloads (`--workload`): completion times, slowdowns, page load
//!   times, from the programs' transfer records.
//! - [`setup`]: `pantheon schemes setup`, what the descriptors ask to install and run once.
//! - [`step`]: a command line of a descriptor's setup or a source scheme's build.
//! - [`check`]: `pantheon schemes check`, each scheme through a short emulated run.
//! - [`clean`]: what killed commands left behind (namespaces named after a dead pid), removed.
//! - [`compare`]: `pantheon compare A B`, two results directories side by side.
//! - [`calibrate`]: `pantheon calibrate`, an emulator fitted to a real path's results.
//! - [`emulators`]: `pantheon emulators import`, iBoxNet's profiles into the emulator library.
//! - [`rootless`]: commands that create namespaces, run by an ordinary user inside a user
//!   namespace of their own.
//! - [`slurm`]: Slurm's command-line tools (`sbatch`, `squeue`, `scancel`, `srun`), for the
//!   sweep's job arrays and the calibration's job steps.

pub mod analyze;
pub mod bounds;
#[cfg(feature = "calibrate")]
pub mod calibrate;
pub mod check;
pub mod clean;
pub mod compare;
pub mod emulators;
pub mod experiment;
pub mod guests;
pub mod mix;
pub mod plan;
pub mod process;
pub mod provenance;
pub mod record;
pub mod rootless;
pub mod runner;
pub mod schemes;
pub mod sequence;
pub mod setup;
pub mod shell;
pub mod simulate;
pub mod slurm;
pub mod source;
pub mod step;
pub mod transfers;

/// The error of a capability this build leaves out: `what` needs the cargo feature `feature`
/// (of `pantheon-engine`, or `pantheon-cli`'s of the same name), which the main job's lean
/// build (`scripts/main-job.sh`) does not build and the full install (`scripts/install.sh`,
/// the test command) does.
pub fn left_out(what: &str, feature: &str) -> String {
    format!(
        "{what} is left out of this build of pantheon (cargo feature `{feature}`): the main \
         job builds only what local experiments need; `bash scripts/install.sh` builds and \
         installs everything"
    )
}
