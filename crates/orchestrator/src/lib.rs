//! The testbed: the node agent (`pantheon-agent`), remote runs between two agents over gRPC,
//! NTP clock offsets, ssh bootstrap, and the orchestrator daemon (`pantheon serve`: schedule,
//! SQLite archive, web pages) with its protocols.
//!
//! It builds on the experiment engine (`crates/engine`: plans, runner, schemes, analysis) and
//! is the only crate of the workspace that depends on tonic, rusqlite, axum and ssh2.
//! Dependency direction (`shared/DESIGN.md`): `orchestrator → engine`.
//!
//! # Brief overview
//!
//! - [`agent`]: the testbed's node agent (`pantheon-agent`), its gRPC protocol and client.
//! - [`remote`]: `pantheon run remote`, one run between two agents.
//! - [`clock`]: NTP clock offsets before and after a run → each log's correction.
//! - [`testbed`]: `pantheon serve`, the orchestrator daemon (schedule, archive, web pages).

pub mod agent;
pub mod clock;
pub mod remote;
pub mod testbed;
