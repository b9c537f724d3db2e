//! The testbed's node agent (`pantheon-agent`) and the orchestrator's client of it.
//!
//! # Brief overview
//!
//! - [`proto`]: the gRPC protocol, generated from `proto/agent.proto` (read that file first: it
//!   says in which order a remote run calls what).
//! - [`service`]: the agent — tunnel endpoints, scheme processes and namespaces of each run it
//!   is asked to host, clock offsets, node info, log streaming.
//! - [`client`]: a blocking client, as the (synchronous) experiment runner uses it.
//! - [`auth`]: credentials (TLS certificate + shared token) and the token check.
//! - [`bootstrap`]: a node brought up over SSH (`pantheon node bootstrap`).
//!
//! Everything an agent creates for run `R` lives in namespaces named `pa-<node>-<R>-f<flow>`
//! and in the process groups started there; StopRun removes them, and an agent that was killed
//! removes its own leftovers (by that name prefix) when it starts again ([`cleanup_leftovers`]).

pub mod auth;
pub mod bootstrap;
pub mod client;
pub mod server;
pub mod service;

/// The generated protocol (`pantheon.agent.v1`).
#[allow(missing_docs, clippy::all)]
pub mod proto {
    tonic::include_proto!("pantheon.agent.v1");
}

/// Port an agent listens on unless told otherwise.
pub const DEFAULT_PORT: u16 = 7_070;

/// Prints one line of the agent's log on stderr, with a UTC timestamp.
pub fn log(message: &str) {
    log_as("pantheon-agent", message);
}

/// One line on stderr: UTC time (ms, [`stamp`]), `program`, `message` (the daemons' log
/// format).
pub fn log_as(program: &str, message: &str) {
    tracing::info!("{} {program}: {message}", stamp(chrono::Utc::now()));
}

/// `t` as the daemons write times, in their logs and the testbed archive: RFC 3339, UTC,
/// milliseconds, e.g. `2026-11-24T08:00:00.000Z`.
pub fn stamp(t: chrono::DateTime<chrono::Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// Whether `name` is a plain file name — not empty, no `/`, not hidden — as every file that
/// travels between a node and the orchestrator, or is served by the daemon, must be (so that
/// nothing is read or written outside its directory).
pub fn is_plain_file_name(name: &str) -> bool {
    !name.is_empty() && !name.contains('/') && !name.starts_with('.')
}

/// The regular files directly in `dir`, sorted by path; empty if `dir` cannot be read.
pub fn files_in(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|p: &std::path::PathBuf| p.is_file());
    files.sort();
    files
}

/// Checks a name that becomes part of namespace and file names: 1–`max` characters of
/// `[a-z0-9-]`, not starting with `-`. `what` names it in the error.
pub fn check_name(name: &str, max: usize, what: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= max
        && !name.starts_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{what} {name:?}: use 1–{max} characters of a–z, 0–9 and '-', not starting with '-'"
        ))
    }
}

/// The namespace prefix of every run of agent `node`.
pub fn namespace_prefix(node: &str) -> String {
    format!("pa-{node}-")
}

/// Removes what a previous instance of agent `node` left behind when it was killed: every
/// namespace named with its prefix, after killing the processes inside it (they were started
/// by that agent: its schemes). Returns the namespaces removed.
pub fn cleanup_leftovers(node: &str) -> Vec<String> {
    let prefix = namespace_prefix(node);
    netns::remove_where(|name| name.starts_with(&prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_become_namespaces_are_checked() {
        assert!(check_name("node-a1", 16, "node").is_ok());
        for bad in ["", "-a", "A", "a_b", "a/b", "abcdefghijklmnopq"] {
            let e = check_name(bad, 16, "node").unwrap_err();
            assert!(e.starts_with("node"), "{e}");
        }
    }
}
