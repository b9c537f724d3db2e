//! The `pantheon` command: scheme registry, local experiment runner and analysis front end.
//!
//! # Brief overview
//!
//! - [`schemes`]: scheme descriptors (`schemes/*.toml`) and whether each can run here.
//! - [`plan`]: command-line flags → a validated [`plan::ExperimentPlan`] →
//!   `pantheon_metadata.json`.
//! - [`runner`]: one run of one scheme through the tunnel and the emulator, with cleanup on
//!   every exit path.
//! - [`shell`]: `pantheon shell`, a command inside an emulated path given as Mahimahi shells.
//! - [`analyze`]: a results directory → Pantheon's stats logs, `pantheon_perf.json`, summary
//!   table and plots.
//! - [`setup`]: `pantheon schemes setup`, what the descriptors ask to install and run once.
//! - [`check`]: `pantheon schemes check`, each scheme through a short emulated run.
//! - [`compare`]: `pantheon compare A B`, two results directories side by side.
//! - [`calibrate`]: `pantheon calibrate`, an emulator fitted to a real path's results.
//! - [`agent`]: the testbed's node agent (`pantheon-agent`), its gRPC protocol and client.
//! - [`remote`]: `pantheon run remote`, one run between two agents.
//! - [`clock`]: NTP clock offsets before and after a run → each log's correction.
//! - [`testbed`]: `pantheon serve`, the orchestrator daemon (schedule, archive, web pages).

pub mod agent;
pub mod analyze;
pub mod calibrate;
pub mod check;
pub mod clock;
pub mod compare;
pub mod plan;
pub mod remote;
pub mod runner;
pub mod schemes;
pub mod setup;
pub mod shell;
pub mod testbed;
