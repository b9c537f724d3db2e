//! `pantheon-agent`: the daemon on every testbed node. It hosts its node's half of remote runs
//! (tunnel endpoints, scheme processes, namespaces), measures the node's clock offset, and
//! streams logs back — over gRPC with TLS and a shared token (`pantheon node credentials`).
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use engine::schemes::Registry;
use pantheon_orchestrator::agent::auth::Credentials;
use pantheon_orchestrator::agent::service::AgentService;
use pantheon_orchestrator::agent::{self, log};

/// The Pantheon-rs node agent (needs root: it creates network namespaces and TUN devices).
///
/// Listens for the orchestrator (`pantheon run remote`, `pantheon node info`) on --listen.
/// Every call must come over TLS with the testbed's token; others are refused and logged. A
/// run's namespaces are named pa-<NODE>-<run>-f<flow>; at start the agent removes any that a
/// killed instance of the same --name left behind.
#[derive(Parser)]
#[command(name = "pantheon-agent", version)]
struct Args {
    /// Address and port to listen on.
    #[arg(long, default_value = "0.0.0.0:7070")]
    listen: SocketAddr,
    /// This node's name (a–z, 0–9, '-'; at most 16): prefixes its namespaces.
    #[arg(long)]
    name: String,
    /// Directory with agent.pem, agent.key and token (`pantheon node credentials`).
    #[arg(long, default_value = "credentials")]
    credentials: PathBuf,
    /// Where runs keep their files until the orchestrator fetches them.
    #[arg(long, default_value = "/var/tmp/pantheon-agent")]
    data_dir: PathBuf,
    /// Extra scheme descriptors (*.toml) that add to or override the built-in ones.
    #[arg(long)]
    schemes_dir: Option<PathBuf>,
}

fn main() -> ExitCode {
    tunnel::messages::print_on_stderr();
    let args = Args::parse();
    match real_main(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log(&format!("error: {e:#}"));
            ExitCode::from(2)
        }
    }
}

fn real_main(a: Args) -> anyhow::Result<()> {
    agent::check_name(&a.name, 16, "--name").map_err(anyhow::Error::msg)?;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        anyhow::bail!("pantheon-agent needs root (network namespaces and TUN devices)");
    }
    let credentials = Credentials::load(&a.credentials, true)?;
    let registry = Registry::load(a.schemes_dir.as_deref())?;
    std::fs::create_dir_all(&a.data_dir)
        .with_context(|| format!("create {}", a.data_dir.display()))?;
    let removed = agent::cleanup_leftovers(&a.name);
    if !removed.is_empty() {
        log(&format!(
            "removed what a previous instance left behind: {}",
            removed.join(", ")
        ));
    }
    let service = AgentService::new(a.name.clone(), a.data_dir.clone(), registry);
    // SIGINT/SIGTERM: the server stops, and the runs still hosted end.
    let (stop, stopped) = std::sync::mpsc::channel();
    ctrlc::set_handler(move || {
        let _ = stop.send(());
    })
    .context("install the SIGINT/SIGTERM handler")?;
    agent::server::serve(a.listen, &credentials, service, stopped)
}
