//! `pantheon serve`: the testbed's orchestrator daemon — Pantheon's cron job, results site and
//! archive in one process.
//!
//! ```text
//!  testbed.toml ──► Daemon ── tick ──► schedule (tournament, pick) ──► experiment threads
//!                     │                                                  │ agents (gRPC)
//!                     ▼                                                  ▼
//!                  Archive (SQLite) ◄──── runs, metrics ──── results/<n>/ (report, logs)
//!                     ▲
//!        web pages (HTTP) and the CLI's service (gRPC)
//! ```
//!
//! - [`config`]: the testbed file (nodes, experiment matrix, schedule).
//! - [`schedule`]: round-robin tournaments over node pairs; which queued experiments start
//!   (no node in two at once). Pure.
//! - [`archive`]: experiments with stable numbers, their runs and metrics; survives restarts.
//! - [`daemon`]: the scheduling loop and the execution of one experiment through the agents.
//! - [`service`]: the gRPC service the CLI talks to (`pantheon submit`, `status`, `results`)
//!   and its client.
//! - [`server`]: `pantheon serve`'s servers (gRPC, web) around the daemon's loop.
//! - [`web`]: the archive's pages (list with filters, experiment, report, history over time).

pub mod archive;
pub mod config;
pub mod daemon;
pub mod schedule;
pub mod server;
pub mod service;
pub mod web;
