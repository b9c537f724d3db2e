//! `pantheon node credentials|bootstrap|info`: a testbed's nodes and their agents.
#![cfg_attr(not(feature = "testbed"), allow(dead_code))]
use std::path::PathBuf;
use std::process::ExitCode;
#[cfg(feature = "testbed")]
use std::time::Duration;

#[cfg(feature = "testbed")]
use anyhow::Context;
use clap::Subcommand;

#[derive(Subcommand)]
pub(crate) enum NodeAction {
    /// Make a testbed's credentials: a TLS certificate valid for the agents' addresses, its key
    /// and a shared token (agent.pem, agent.key, token). Give the same directory to every
    /// `pantheon-agent --credentials` and to `pantheon run remote --credentials`.
    Credentials {
        /// Directory to write (created if missing).
        #[arg(long)]
        out: PathBuf,
        /// An address or DNS name the agents are reached at (repeat it; localhost and
        /// 127.0.0.1 are always included).
        #[arg(long = "host", value_name = "ADDR")]
        hosts: Vec<String>,
    },
    /// Bring a node up over SSH: copy pantheon-agent and the credentials to it and start the
    /// agent there (replacing one this command started before), then wait until it answers.
    Bootstrap {
        /// The node: [USER@]HOST[:SSH_PORT] (user root, port 22 by default).
        target: String,
        /// The agent's name on that node (a–z, 0–9, '-'; at most 16).
        #[arg(long)]
        name: String,
        /// Credentials directory (with agent.key: the agent needs it).
        #[arg(long, default_value = "credentials")]
        credentials: PathBuf,
        /// Private key to log in with (default ~/.ssh/id_ed25519).
        #[arg(long, short = 'i')]
        identity: Option<PathBuf>,
        /// known_hosts file to check the node's host key against (default
        /// ~/.ssh/known_hosts; an unknown host is accepted and its fingerprint printed).
        #[arg(long)]
        known_hosts: Option<PathBuf>,
        /// Directory on the node for the agent, its credentials, data and log.
        #[arg(long, default_value = "/opt/pantheon-rs")]
        remote_dir: String,
        /// Port the agent listens on.
        #[arg(long, default_value_t = 7070)]
        port: u16,
        /// The pantheon-agent binary to copy (default: the one beside this pantheon).
        #[arg(long)]
        agent_binary: Option<PathBuf>,
    },
    /// Ask an agent what its node is: kernel, sysctls, interfaces, runnable schemes (and with
    /// --ntp-addr its clock offset).
    Info {
        /// The agent: HOST[:PORT].
        agent: String,
        /// Credentials directory.
        #[arg(long, default_value = "credentials")]
        credentials: PathBuf,
        /// Also measure the node's clock offset to this NTP server.
        #[arg(long, value_name = "HOST")]
        ntp_addr: Option<String>,
    },
}

#[cfg(feature = "testbed")]
pub(crate) fn exec(action: NodeAction) -> anyhow::Result<ExitCode> {
    use pantheon_orchestrator::agent::{auth::Credentials, client::AgentClient};
    match action {
        NodeAction::Credentials { out, hosts } => {
            Credentials::generate(&hosts)?.write(&out)?;
            eprintln!(
                "wrote {}/{{agent.pem,agent.key,token}}: copy the directory to every node \
                 (pantheon-agent --credentials) and keep it for pantheon run remote",
                out.display()
            );
        }
        NodeAction::Bootstrap {
            target,
            name,
            credentials,
            identity,
            known_hosts,
            remote_dir,
            port,
            agent_binary,
        } => {
            use pantheon_orchestrator::agent::bootstrap::{bootstrap, Bootstrap};
            let creds = Credentials::load(&credentials, true)?;
            let (user, host, ssh_port) = Bootstrap::parse_target(&target)?;
            let home = PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()));
            let agent_binary = match agent_binary {
                Some(p) => p,
                None => std::env::current_exe()
                    .context("locate this pantheon binary")?
                    .with_file_name("pantheon-agent"),
            };
            let b = Bootstrap {
                user,
                host: host.clone(),
                port: ssh_port,
                identity: identity.unwrap_or_else(|| home.join(".ssh/id_ed25519")),
                known_hosts: known_hosts.unwrap_or_else(|| home.join(".ssh/known_hosts")),
                remote_dir,
                name,
                listen_port: port,
                agent_binary,
            };
            bootstrap(&b, &creds, &|m| eprintln!("{m}"))?;
            let client = AgentClient::new(&format!("{host}:{port}"), &creds)?;
            let info = client
                .wait_ready(Duration::from_secs(20))
                .context("the agent did not answer within 20 s (see agent.log on the node)")?;
            let runnable: Vec<&str> = info
                .schemes
                .iter()
                .filter(|s| s.runnable)
                .map(|s| s.name.as_str())
                .collect();
            println!(
                "node {} ({}, {}) answers on {host}:{port}; runnable schemes: {}",
                info.node,
                info.hostname,
                info.kernel,
                if runnable.is_empty() {
                    "none yet (pantheon schemes setup)".to_owned()
                } else {
                    runnable.join(" ")
                }
            );
        }
        NodeAction::Info {
            agent,
            credentials,
            ntp_addr,
        } => {
            let c = AgentClient::new(&agent, &Credentials::load(&credentials, false)?)?;
            let info = c.info()?;
            let mut v = serde_json::json!({
                "node": info.node, "hostname": info.hostname, "kernel": info.kernel,
                "version": info.version, "sysctls": info.sysctls,
                "interfaces": info.interfaces.iter().map(|i| serde_json::json!({
                    "name": i.name, "mtu": i.mtu, "addresses": i.addresses})).collect::<Vec<_>>(),
                "schemes": info.schemes.iter().map(|s| serde_json::json!({
                    "name": s.name, "runnable": s.runnable, "detail": s.detail})).collect::<Vec<_>>(),
            });
            if let Some(server) = ntp_addr {
                let r = c.clock_offset(&server, 4)?;
                v["clock_offset_ms"] = serde_json::json!(r.offset_ms);
                v["clock_rtt_ms"] = serde_json::json!(r.rtt_ms);
            }
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Without the `testbed` feature: says so.
#[cfg(not(feature = "testbed"))]
pub(crate) fn exec(_: NodeAction) -> anyhow::Result<ExitCode> {
    super::left_out("node", "testbed")
}
