//! From packet logs to Pantheon's numbers.
//!
//! # Brief overview
//!
//! - [`ingest`]: a run's logs (our binary tunnel logs, Pantheon's merged datalink logs,
//!   Mahimahi's mm-link logs) → Polars frames of arrivals into the path and departures from
//!   it with their one-way delays, on one clock, plus the link's opportunities.
//! - [`text`]: sans-IO parsers of Pantheon's and Mahimahi's text logs.
//! - [`metrics`]: per flow and total: average throughput, 95th-percentile one-way delay and loss
//!   rate, exactly as Pantheon defines them ([`metrics::run_stats`]).
//! - [`timeseries`]: a run in 500 ms bins (capacity, ingress, egress) and per-packet delays.
//! - [`report`]: Pantheon's stats text, the throughput–delay summary plots (with 1-σ
//!   ellipses), the per-run throughput and delay plots.
//! - [`document`]: Pantheon's report as `pantheon_report.html` (one self-contained file) and
//!   `pantheon_report.pdf`, no LaTeX or browser needed.
//! - [`files`]: names that may become file names, files written whole (temporary name, then
//!   renamed), input files read by type and size bound, the one-writer lock of a results
//!   directory.
//! - [`results`]: `pantheon_metadata.json` as one typed value, written by the run and read by
//!   the analysis; Pantheon's JSON format ([`results::write_json`]).
//! - [`perf`]: `pantheon_perf.json`, every run's metrics, as one typed value: written by the
//!   analysis, read by the comparison, the calibration, the sweep's table and the daemon.
//! - [`stats`]: mean, median, standard deviation of per-run figures.
//! - [`competition`]: how flows of different schemes share a bottleneck: Jain's index (whole
//!   interval and per bucket), time to converge, throughput ratio, harm.
//! - [`table`]: a tidy table written as CSV and Parquet (`pantheon sweep`'s results).
//! - [`compare`]: two experiments side by side (means, % difference, Welch's t-test) and the
//!   replication error.
//!
//! Polars lives only in this crate: it is most of the workspace's build time. Without the
//! default feature `frames` only [`text`], [`stats`], [`results`], [`files`], [`perf`]
//! and [`competition`] are built (the fuzz targets, the calibration model, the engine's plans and
//! the readers of perf files use those).

#[cfg(feature = "frames")]
pub mod compare;
pub mod competition;
#[cfg(feature = "frames")]
pub mod document;
pub mod files;
#[cfg(feature = "frames")]
pub mod ingest;
#[cfg(feature = "frames")]
pub mod metrics;
pub mod perf;
#[cfg(feature = "frames")]
pub mod report;
pub mod results;
pub mod stats;
#[cfg(feature = "table")]
pub mod table;
pub mod text;
#[cfg(feature = "frames")]
pub mod timeseries;

#[cfg(feature = "frames")]
pub use metrics::{FlowStats, RunStats};
