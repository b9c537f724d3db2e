//! `pantheon serve`: the orchestrator daemon, until SIGINT/SIGTERM.
#![cfg_attr(not(feature = "testbed"), allow(dead_code))]
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
#[cfg(feature = "testbed")]
use {std::sync::Arc, std::time::Duration};

#[cfg(feature = "testbed")]
use anyhow::Context;
use clap::Args;
#[cfg(feature = "testbed")]
use {
    engine::schemes::Registry,
    pantheon_orchestrator::agent::auth::Credentials,
    pantheon_orchestrator::testbed::archive::{Archive, SqliteArchive},
    pantheon_orchestrator::testbed::config::TestbedConfig,
    pantheon_orchestrator::testbed::daemon::{log, Daemon},
    pantheon_orchestrator::testbed::server::{self, ServeOptions},
};

/// `pantheon serve`'s flags.
#[derive(Args)]
pub(crate) struct ServeArgs {
    /// The testbed file (TOML): nodes, experiment matrix, schedule. See docs/testbed.md.
    testbed: PathBuf,
    /// The archive (SQLite file, created if missing).
    #[arg(long, default_value = "pantheon-archive.sqlite")]
    archive: PathBuf,
    /// Where each experiment's results directory goes (`DIR/<number>/`).
    #[arg(long, default_value = "archive")]
    results_dir: PathBuf,
    /// Address of the gRPC service for `pantheon submit|status|results` (TLS and token, with
    /// the testbed's credentials: its host must be in the certificate).
    #[arg(long, default_value = "127.0.0.1:7071")]
    listen: SocketAddr,
    /// Address of the web pages (plain HTTP, read-only).
    #[arg(long, default_value = "127.0.0.1:8080")]
    web: SocketAddr,
    /// Seconds between two scheduling steps.
    #[arg(long, default_value_t = 1.0)]
    tick: f64,
    /// Extra scheme descriptors (*.toml).
    #[arg(long)]
    schemes_dir: Option<PathBuf>,
}

/// Runs the daemon until SIGINT/SIGTERM.
#[cfg(feature = "testbed")]
pub(crate) fn exec(a: ServeArgs) -> anyhow::Result<ExitCode> {
    let config = TestbedConfig::load(&a.testbed)?;
    let registry = Registry::load(a.schemes_dir.as_deref())?;
    for s in &config.matrix.schemes {
        registry
            .get(s)
            .with_context(|| format!("{}: [matrix] schemes", a.testbed.display()))?;
    }
    let tick = Duration::try_from_secs_f64(a.tick)
        .ok()
        .filter(|t| !t.is_zero())
        .context("--tick must be a positive number of seconds")?;
    let credentials = Credentials::load(&config.credentials, true)?;
    let archive: Arc<dyn Archive> = Arc::new(SqliteArchive::open(&a.archive)?);
    let daemon = Daemon::new(
        config,
        Arc::clone(&archive),
        registry,
        a.results_dir.clone(),
    )?;
    let interrupted = daemon.recover()?;
    if interrupted > 0 {
        log(&format!("{interrupted} interrupted run(s) will run again"));
    }
    {
        let d = Arc::clone(&daemon);
        ctrlc::set_handler(move || {
            log("stopping: the runs in progress end early and will run again at the next start");
            d.shutdown();
        })
        .context("install the SIGINT/SIGTERM handler")?;
    }
    let opts = ServeOptions {
        listen: a.listen,
        web: a.web,
        tick,
        results_dir: a.results_dir,
        archive_file: a.archive,
    };
    server::serve(daemon, archive, &credentials, &opts)?;
    Ok(ExitCode::SUCCESS)
}

/// Without the `testbed` feature: says so.
#[cfg(not(feature = "testbed"))]
pub(crate) fn exec(_: ServeArgs) -> anyhow::Result<ExitCode> {
    super::left_out("serve", "testbed")
}
