//! From packet logs to Pantheon's numbers.
//!
//! # Brief overview
//!
//! - [`ingest`]: a run's binary tunnel logs → two Polars frames (arrivals into the path,
//!   departures from it), on one clock.
//! - [`metrics`]: per flow and total: average throughput, 95th-percentile one-way delay and loss
//!   rate, exactly as Pantheon defines them ([`metrics::run_stats`]).
//! - [`report`]: Pantheon's stats text, the throughput–delay summary plots.
//!
//! Polars lives only in this crate: it is most of the workspace's build time.

pub mod ingest;
pub mod metrics;
pub mod report;

pub use metrics::{FlowStats, RunStats};
